#!/usr/bin/env bash
# Written in session 79 for the next device call (one GPU, carry .peer; results under $OUT, <= 5 files).
# (1) The pair's GPU tests on the tree session 79 ended with. odd became the pair's default there; its own tests
#     (test_pair_odd, bit-equal to the pair without it) and the table ran on an H200 at d33fcee, whose default build's
#     sm_90a PTX differs from the final tree's only by pers's unused kernel parameter (bench/mla_gluon_check.py --dump). The default path's tests through rows_config did not run:
#     pair_over_converted_rows, pair_options, pair_split_options, pair_stamps, pair_other_paths, row_scratch_bit_equal.
# (2) Where the 32-head call's time goes now, torch.profiler (bench/s76/prof.py): the pair kernel, the union lists,
#     the row conversion, the duplicates pass, at s_q 1024 and 8192. On the H200 in session 79 the row read 1.249x /
#     1.282x as replays; 1.3x asks 4% / 1.4% less time. PREDICTION (H200): at 8192 the union lists ~80 us of ~3.1 ms.
#   DSATTN_GIT_COMMIT=<sha> bash bench/s80/run.sh
LOG=s80.log TAG=s80
source bench/gpu_lib.sh  # (the environment, $L with the GPU's name; $OUT/r)
unset DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
t0=$SECONDS
timeout ${TEST_S:-240} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "pair_over_converted_rows or pair_options or pair_split_options or pair_stamps or pair_other_paths or row_scratch_bit_equal" \
  > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 10 | cut -c1-300 >> $L
timeout 120 python bench/s76/prof.py 32 2>&1 | grep -v -i warn | tail -n 30 >> $L
echo "prof rc=${PIPESTATUS[0]} $((SECONDS - t0)) s" >> $L
# (3) Added in session 80: the union lists alone (the grouping bench, CUDA graph of 10 calls, G 2 as at 32 heads) and
#     one union launch at s_q 8192 under Nsight Compute (what bounds it: ~159 MB of index reads and list writes, ~40 us
#     at the H200's bandwidth, against ~84 us in session 76's profile); then s_q 8192 in one chunk against two
#     (DSATTN_PREFILL_SCRATCH_MIB 128: one union build, one kernel of 4096 programs). PREDICTION: one chunk within
#     +-1% (the waves' total is 32 either way: 2 x ceil(15.5) against ceil(31.03)).
timeout 90 python -m dsattn.ops.sparse_mla.grouping --bench --impl auto --s-q 1024 8192 --groups 2 --skip-edge \
  > $R/grouping.log 2>&1; echo "grouping bench rc=$?" >> $L; tail -n 6 $R/grouping.log >> $L
uprof() {  # name s_q: one union launch under Nsight Compute (the sections of gpu_lib's prof, plus occupancy and launch)
  timeout 150 ncu --clock-control none -k regex:dense_union -s 1 -c 1 --section SourceCounters --section WarpStateStats \
    --section SchedulerStats --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats -f -o $R/$1 python -m dsattn.ops.sparse_mla.grouping --bench --impl auto --s-q $2 --groups 2 \
    --skip-edge --iters 10 > $R/ncu_$1.log 2>&1
  echo "== ncu $1 rc=$?" >> $L
  ncu --import $R/$1.ncu-rep --page source --csv --print-source sass > $R/${1}_source.csv 2> $R/${1}_source.err
  ncu --import $R/$1.ncu-rep --page details > $R/${1}_details.txt 2>&1
  python bench/ncu_stalls.py $R/${1}_source.csv --top 30 > $R/${1}_stalls.txt 2>&1
  head -n 45 $R/${1}_stalls.txt >> $L
  grep -E "Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per|L2 Hit" \
    $R/${1}_details.txt | head -n 24 >> $L
  rm -f $R/$1.ncu-rep $R/${1}_source.csv
}
uprof union8192 8192
uprof union1024 1024
timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens 8192 --heads 32 --a "row_scratch=1" \
  --b "row_scratch=1,env:DSATTN_PREFILL_SCRATCH_MIB=128" --name ab_s80_chunk1_8192_h32 --out $R > $R/ab_chunk1.log 2>&1
echo "ab one chunk rc=$?" >> $L; tail -n 3 $R/ab_chunk1.log | head -n 2 >> $L
pack; echo "end $((SECONDS - t0)) s" >> $L
cat $L
