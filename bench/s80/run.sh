#!/usr/bin/env bash
# Session 80's device call (one GPU, carry .peer; results under $OUT, the A/B and logs in $OUT/r.tgz).
#   DSATTN_GIT_COMMIT=<sha> bash bench/s80/run.sh
# (1) The union lists' program shape at G 2 (32 heads): the grouping bench (CUDA graph of 10 calls, overlap indices,
#     s_kv 16384, topk 2048, each variant checked against the reference) at 4 / 8 / 16 warps, then 8 / 16 warps with
#     DSATTN_UNION_MAXNREG 32. The default (8 warps) takes 40 registers: 6 programs an SM by registers (the shared
#     memory allows 10); capped at 32 (12 bytes of spill), 8. PREDICTION (H200): s_q 8192 (4096 programs, 5.2 -> 3.9
#     waves of programs) ~84 -> 65-75 us at 8 warps capped; s_q 1024 (512 programs, one wave either way) unchanged,
#     unless 16 warps capped (4 programs an SM: one wave of half-length programs) cut it 13 -> ~9 us.
# (2) `dsattn bench ab` of the prefill, 32 heads, with DSATTN_UNION_MAXNREG 32 (8 warps) against the default:
#     PREDICTION s_q 8192 1.003-1.007x (10-20 us of ~3.1 ms).
# (3) GPU tests: the new warps / registers test, then the pair's default path (odd in it) as session 79 asked:
#     pair_over_converted_rows, pair_options, pair_split_options, pair_stamps, pair_other_paths, row_scratch_bit_equal.
# (4) If time is left: one union launch at s_q 8192 under Nsight Compute (stalls by instruction).
LOG=s80.log TAG=s80
source bench/gpu_lib.sh  # (the environment, $L with the GPU's name; $OUT/r)
unset DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK DSATTN_UNION_WARPS DSATTN_UNION_MAXNREG
echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
t0=$SECONDS
gb() {  # name env... : the grouping bench at G 2
  env "${@:2}" timeout 100 python -m dsattn.ops.sparse_mla.grouping --bench --impl auto --s-q 1024 8192 --groups 2 \
    --skip-edge --union-warps ${UW:-8} > $R/gb_$1.log 2>&1
  echo "== grouping bench $1 (${*:2}) rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/gb_$1.log | tail -n 12 >> $L
}
UW="4 8 16" gb warps
UW="8 16" gb reg32 DSATTN_UNION_MAXNREG=32
pack
abp() {  # name tokens env-b
  timeout 110 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $2 --heads 32 --a "row_scratch=1" \
    --b "row_scratch=1,env:$3" --name ab_s80_$1 --out $R > $R/ab_$1.log 2>&1
  echo "== ab $1 rc=$? $((SECONDS - t0)) s" >> $L; tail -n 3 $R/ab_$1.log | head -n 2 >> $L
}
abp reg32_8192_h32 8192 DSATTN_UNION_MAXNREG=32
pack
timeout ${TEST_S:-200} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_grouping_gpu.py \
  tests/gpu/test_sparse_mla_prefill_gpu.py -k "warps_and_registers or pair_over_converted_rows or pair_options or \
pair_split_options or pair_stamps or pair_other_paths or row_scratch_bit_equal" > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 10 | cut -c1-300 >> $L
if [ $((SECONDS - t0)) -lt 420 ]; then
  timeout 100 ncu --clock-control none -k regex:dense_union -s 1 -c 1 --section SourceCounters --section WarpStateStats \
    --section SpeedOfLight --section Occupancy --section LaunchStats -f -o $R/u8192 python -m dsattn.ops.sparse_mla.grouping \
    --bench --impl auto --s-q 8192 --groups 2 --skip-edge --iters 10 > $R/ncu_u8192.log 2>&1
  echo "== ncu rc=$? $((SECONDS - t0)) s" >> $L
  ncu --import $R/u8192.ncu-rep --page source --csv --print-source sass > $R/u8192_source.csv 2> /dev/null
  ncu --import $R/u8192.ncu-rep --page details > $R/u8192_details.txt 2>&1
  python bench/ncu_stalls.py $R/u8192_source.csv --top 25 > $R/u8192_stalls.txt 2>&1
  head -n 40 $R/u8192_stalls.txt >> $L
  grep -E "Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per" \
    $R/u8192_details.txt | head -n 20 >> $L
  rm -f $R/u8192.ncu-rep $R/u8192_source.csv
fi
pack; echo "end $((SECONDS - t0)) s" >> $L
cat $L
