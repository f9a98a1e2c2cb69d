#!/usr/bin/env bash
# Session 72 (carry [".peer"] for PART h).
# PART a: gluon_pair's sfold 1 (S unscaled, P = 2^(S c - m c) by one FFMA), prel 1 (each half released by every
#   consumer thread's own arrive: 31 -> 25 bar.sync in the PTX) and (at dc7f84e, removed after) the row conversion in
#   the union launch: their GPU tests beside the pair's, then bench/s72/arms.py: (then session 71's path, FUSE=0,
#   + the fused conversion,) + sfold 1, + prel 1, rounds beside FlashMLA, 32 heads s_q 1024 / 8192, 16 heads s_q 1024,
#   8 heads s_q 8192.
#   PREDICTION (before the run): fused conversion 1.02-1.04x at s_q 1024 (f16_rows ~20 us beside the lists' ~13, of
#   ~440), ~1.00-1.01x at 8192; sfold 1.00-1.03x (56 of ~4300 SASS instructions, ~10% of a consumer's per-element
#   issue, on the critical path only in part); prel another 1.00-1.03x (two partition barriers a step a warpgroup).
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
    -k "${TESTS_K:-pair_options or pair_over or row_scratch_bit_equal}" > $OUT/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
  grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 12 | cut -c1-300 >> $L
  timeout ${ARMS_S:-300} python bench/s72/arms.py ${CASES:-32:1024,32:8192,16:1024,8:8192} >> $L 2>&1
  echo "arms rc=$? $((SECONDS - t0)) s" >> $L
fi
if [ "$P" = h ]; then
  case "$GPU" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
  PARTS=prefill TABLE_TAG=${TABLE_TAG:-s72_$tag} bash bench/gpu_s16_table.sh > /dev/null 2>&1
  cp $OUT/r/*.json $OUT/ 2>/dev/null; rm -rf $OUT/r $OUT/r.tgz; cat $OUT/tb.log >> $L; rm -f $OUT/tb.log
fi
[ "$P" = s ] || cat $L
# PART s (after the device's first calls): the shared-memory probe. `dsattn bench ab` of the default call over
#   converted rows (gluon_pair at 32 / 16 heads) against the same with DSATTN_PF_PROFILE=4 (the producer reads each
#   stage's latent part once more from shared memory: +64 KB a block on the kernel's ~293 KB; outputs unchanged).
#   PREDICTION: if shared-memory bandwidth bounds the pair's blocks (293 KB at 128 B a clock ~ 2290 clocks, about the
#   2175 of the block's wgmma work at peak), B reads 0.80-0.88x; if it does not, 0.97-1.00x.
if [ "$P" = s ]; then
  for c in ${CASES:-32:1024 16:1024 32:8192}; do
    h=${c%%:*}; s=${c##*:}
    timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h --a row_scratch=1 \
      --b row_scratch=1,env:DSATTN_PF_PROFILE=4 --name ab_s72_smem_probe_${s}_h${h} --out $OUT > $OUT/ab.log 2>&1
    echo "ab $c rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  done
  cat $L
fi
