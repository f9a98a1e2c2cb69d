#!/usr/bin/env bash
# Session 79, device call 2 (one GPU, no carry; results under $OUT, <= 8 files). Two pair options:
#  odd: the last step skips a second block past the list (no copies, no S over it, no P V against it; 249 of 512
#       programs at 32 heads s_q 1024 have an odd block count);
#  qpf: the producer prefetches into L2 the q rows of the program an SM count ahead, so that q's load at a program's
#       entry (~8k cycles of its ~8.5k-cycle prologue, bench/s78/edges.py, H100) reads L2.
# (1) `dsattn bench ab` of the default against each, and both; (2) edges.py, default and qpf (the prologue);
# (3) GPU tests: test_pair_bit_options, test_pair_split_options (with odd).
# PREDICTIONS: odd 1.003-1.010x at 32 heads s_q 1024; qpf: q stored ~3-5k cycles after entry instead of ~8k, and
#   1.01-1.02x at 32 heads s_q 1024 (3.88 programs an SM, ~4k cycles each of ~176k); outputs bit-equal.
#   DSATTN_GIT_COMMIT=<sha> bash bench/s79/run2.sh
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
L=$OUT/s79_call2.log
echo "$(nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
ab() {  # name h:s_q b
  local name=$1 c=$2 b=$3 h s
  h=${c%%:*}; s=${c##*:}
  timeout 120 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h --a "row_scratch=1" \
    --b "row_scratch=1,$b" --name ab_s79_${name}_${s}_h${h} --out $OUT > $OUT/ab.log 2>&1
  echo "ab $name $c rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  grep -h "noisy machine" $OUT/ab.log | cut -c1-160 >> $L
  rm -f $OUT/ab.log
}
ab odd 32:1024 "env:DSATTN_PF_CONFIG=pair=1;lazy=1;vst=1;odd=1"
ab qpf 32:1024 "env:DSATTN_PF_CONFIG=pair=1;lazy=1;vst=1;qpf=1"
ab both 32:8192 "env:DSATTN_PF_CONFIG=pair=1;lazy=1;vst=1;odd=1;qpf=1"
ab both 16:1024 "env:DSATTN_PF_CONFIG=pair=1;lazy=1;vst=1;odd=1;qpf=1"
for c in pair=1,lazy=1,vst=1 pair=1,lazy=1,vst=1,qpf=1; do
  echo "== edges $c" >> $L
  timeout 90 python bench/s78/edges.py 32:1024 $c 2>&1 | grep -v -i warn | head -n 30 >> $L
  echo "edges rc=${PIPESTATUS[0]} $((SECONDS - t0)) s" >> $L
done
timeout ${TEST_S:-170} python -m pytest -q -p no:cacheprovider -rfE --tb=short \
  tests/gpu/test_sparse_mla_prefill_gpu.py -k "pair_bit_options or pair_split_options" > $OUT/tests2.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests2.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests2.log | head -n 12 | cut -c1-300 >> $L
cat $L
