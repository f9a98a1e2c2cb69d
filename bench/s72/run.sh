#!/usr/bin/env bash
# Session 72 (carry [".peer"] for PART h).
# PART a: gluon_pair's sfold 1 (S unscaled, P = 2^(S c - m c) by one FFMA): its GPU tests beside the pair's, then
#   `dsattn bench ab` sfold 0 against 1 over converted rows at 32 heads s_q 1024 / 8192, 16 and 8 heads s_q 1024.
#   PREDICTION (before the run): 1.00-1.03x at each (56 of ~4300 SASS instructions, ~10% of a consumer's per-element
#   issue, on the critical path only in part).
# PART h: issue 3's prefill table (bench/gpu_s16_table.sh PARTS=prefill, FlashMLA in the same process), tagged by card.
#   PART=a DSATTN_GIT_COMMIT=<sha> bash bench/s72/run.sh     ($OUT/s72_<part>.log)
set -u
export PYTHONPATH=src:.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
P=${PART:-a}
L=$OUT/s72_$P.log
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$GPU tree ${DSATTN_GIT_COMMIT:-?} part $P" > $L
t0=$SECONDS
if [ "$P" = a ]; then
  timeout ${TEST_S:-200} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
    -k "${TESTS_K:-pair_sfold or pair_over or row_scratch_bit_equal}" > $OUT/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
  grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 12 | cut -c1-300 >> $L
  for c in ${AB_CASES:-32:1024 32:8192 16:1024 8:1024}; do
    h=${c%%:*}; s=${c##*:}
    timeout ${AB_S:-100} python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h \
      --a "row_scratch=1,env:DSATTN_PF_CONFIG=pair=1" --b "row_scratch=1,env:DSATTN_PF_CONFIG=pair=1;sfold=1" \
      --name ab_s72_sfold_${s}_h${h} --out $OUT > $OUT/ab.log 2>&1
    echo "ab $c rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  done
fi
if [ "$P" = h ]; then
  case "$GPU" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
  PARTS=prefill TABLE_TAG=${TABLE_TAG:-s72_$tag} bash bench/gpu_s16_table.sh > /dev/null 2>&1
  cp $OUT/r/*.json $OUT/ 2>/dev/null; rm -rf $OUT/r $OUT/r.tgz; cat $OUT/tb.log >> $L; rm -f $OUT/tb.log
fi
cat $L
