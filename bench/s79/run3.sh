#!/usr/bin/env bash
# Session 79, device call 3 (one GPU, carry .peer; results under $OUT, <= 8 files). PrefillConfig.odd is now the pair's
# default, with warpgroup 1 waiting for R(1)'s copy-less arrive before releasing it (call 2's build, 9c1e9e8, could
# release it before the producer's wait for that release: a hang the protocol model found, tests/test_prefill_protocol.py
# test_pair_odd_protocol; the GPU runs did not hit it). (1) `dsattn bench ab` of the default against odd 0 (B = A
# without odd); (2) the pair's GPU tests (the default path bit-equal to pair=1,lazy=1,vst=1, odd's own, the split
# build, the other paths); (3) issue 3's prefill table as CUDA-graph replays.
# PREDICTIONS: the default 1.01-1.02x over odd 0 at 32 heads s_q 1024 (call 2: 1.016x), ~1.01x at 8192 and 16 heads,
#   ~1.00x at 8 heads s_q 8192 (G 8: unions of 8 lists, fewer odd counts matter less); table 32 heads >= 1.23x / 1.27x
#   on an H100 (s78: 1.234x / 1.278x; this session's call 1 1.212x / 1.257x).
#   DSATTN_GIT_COMMIT=<sha> bash bench/s79/run3.sh
LOG=s79_call3.log TAG=s79
source bench/gpu_lib.sh
unset DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
t0=$SECONDS
abo() {  # h:s_q
  local h=${1%%:*} s=${1##*:}
  timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h --a "row_scratch=1" \
    --b "row_scratch=1,env:DSATTN_PF_CONFIG=pair=1;lazy=1;vst=1" --name ab_s79_dflt_vs_odd0_${s}_h${h} --out $OUT \
    > $OUT/ab.log 2>&1
  echo "ab default vs odd 0, $1 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  grep -h "noisy machine" $OUT/ab.log | cut -c1-160 >> $L
  rm -f $OUT/ab.log
}
abo 32:1024; abo 32:8192; abo 16:1024; abo 8:8192
timeout ${TEST_S:-170} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "pair_over_converted_rows or pair_odd or pair_split_options or pair_other_paths" > $OUT/tests3.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests3.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests3.log | head -n 10 | cut -c1-300 >> $L
PARTS=prefill TABLE_TAG=s79c3_graph TABLE_ARGS=--graph bash bench/gpu_s16_table.sh
cat $OUT/tb.log >> $L; rm -rf $OUT/r $OUT/tb.log
cat $L
