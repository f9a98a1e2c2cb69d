#!/usr/bin/env bash
# Session 79, device call 3 (one GPU, carry .peer; results under $OUT, <= 8 files; run3.sh, written first, never got a
# machine: this takes its place). Two things:
#  odd, now the pair's default, with warpgroup 1 waiting for R(1)'s copy-less arrive before releasing it (call 2's
#    build could release it before the producer's wait for that release: a hang the protocol model found,
#    tests/test_prefill_protocol.py test_pair_odd_protocol; the GPU runs did not hit it);
#  pers (PrefillConfig.pers): persistent pair programs, one an SM, walking work items; the producer refills the next
#    item's first halves as the last item's last step releases them, O staged through q's buffer (model:
#    test_pair_pers_protocol).
# Trimmed to fit the ~450 s of device time left after failed starts: (1) GPU tests test_pair_pers, test_pair_odd;
# (2) `dsattn bench ab` at 32 heads s_q 1024, pers against the default; (3) issue 3's prefill table as CUDA-graph
# replays (the default).
# PREDICTIONS: pers 1.01-1.03x at 32 heads s_q 1024
#   (entry -> first step ~10k cycles and ~1.1 us between programs, of which the refills and the launch go; q's load
#   stays; ~2.9 item changes an SM). Table (H100): 32 heads
#   >= 1.23x / 1.27x (session 78 1.234x / 1.278x; this session's call 1 1.212x / 1.257x).
#   DSATTN_GIT_COMMIT=<sha> bash bench/s79/run4.sh
LOG=s79_call3.log TAG=s79
source bench/gpu_lib.sh
unset DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
t0=$SECONDS
abx() {  # name h:s_q a b
  local h=${2%%:*} s=${2##*:}
  timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h --a "row_scratch=1$3" \
    --b "row_scratch=1,$4" --name ab_s79_$1_${s}_h${h} --out $R > $OUT/ab.log 2>&1
  echo "ab $1 $2 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  grep -h "noisy machine" $OUT/ab.log | cut -c1-160 >> $L
  rm -f $OUT/ab.log
}
PERS="env:DSATTN_PF_CONFIG=pair=1;lazy=1;vst=1;odd=1;pers=1"
timeout ${TEST_S:-150} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "pair_pers or pair_odd" > $OUT/tests3.log 2>&1
trc=$?
echo "tests rc=$trc $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests3.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests3.log | head -n 10 | cut -c1-300 >> $L
[ $trc = 0 ] && abx pers 32:1024 "" "$PERS"  # (not after a failed or timed-out test run: a hang would eat the call)
PARTS=prefill TABLE_TAG=s79c3_graph TABLE_ARGS=--graph bash bench/gpu_s16_table.sh
cat $OUT/tb.log >> $L; rm -rf $OUT/r $OUT/tb.log  # (r.tgz holds the table and the A/B JSONs)
cat $L
