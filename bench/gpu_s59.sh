#!/usr/bin/env bash
# Session 59's device calls. Call `a` first:
#   1. the prefill GPU test file at HEAD, 8 shards (not run since 4a809b5, session 58's fix of the prefill regression:
#      the SPLIT constexpr; the split launches of the fixed tree have not run on a GPU);
#   2. on an H200: issue 3's prefill rows at s_q 1024 beside FlashMLA (bench/gpu_s16_table.sh, PARTS=prefill; the rows
#      are asked of the H200 and were last timed there by session 37, before the regression);
#      on any other GPU: the decode rows at 8 / 16 / 32 heads, 512 tokens, session 34's tree (old_src = git archive
#      3bbe37b src) against HEAD in turn (bench/gpu_tree_ab.sh): the host-side launch code's share, which session 58's
#      PTX comparison did not cover.
# PREDICTION: every prefill GPU test passes; H200 prefill rows as session 37's (32 heads 0.92x / 0.955x, 64 heads
# ~0.74x); tree A/B within ~2% at every head count (no decode regression).
# Call `b` (H200 only): the decode rows at 512 / 2048 tokens and the prefill rows at s_q 8192 beside FlashMLA.
# Call `c` (H200 only): `dsattn calibrate --graph` (both calibrations were measured with the slow prefill) and the
# top-k rule's H200 A/B (bench/gpu_s58.sh b's H200 branch).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s59.sh a|b|c        (carry .peer; old_src/ travels untracked)
set -u
export PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) TAG=h200 ;; *H100*) TAG=h100 ;; *) TAG=gpu ;; esac
L=$OUT/s59.log; echo "$GPU; tree ${DSATTN_GIT_COMMIT:-?}; call ${1:-}" > $L
pack() { tar -czf $OUT/s59.tgz -C $OUT $(cd $OUT && ls -d s59.log pf_tests r tree_ab* cal* 2>/dev/null); }
case "${1:-}" in
a)
  t0=$SECONDS
  PYTHONPATH=$PWD/src N=8 LIMIT=240 bash bench/gpu_tests_sharded.sh $OUT/pf_tests tests/gpu/test_sparse_mla_prefill_gpu.py
  echo "prefill tests $((SECONDS - t0)) s" >> $L; cat $OUT/pf_tests/summary.log >> $L; pack
  if [ $TAG = h200 ]; then
    PARTS=prefill TABLE_TAG=s59_h200 bash bench/gpu_s16_table.sh   # writes $OUT/tb.log, $OUT/r (s_q 1024 and 8192)
    cat $OUT/tb.log >> $L
  else
    REPS=2 bash bench/gpu_tree_ab.sh > /dev/null 2>&1
  fi
  pack
  ;;
b)
  [ $TAG = h200 ] || { echo "call b is for an H200 (got $GPU)" >> $L; pack; exit 0; }
  PARTS=decode TABLE_TAG=s59_h200 bash bench/gpu_s16_table.sh
  cat $OUT/tb.log >> $L; pack
  ;;
c)
  t0=$SECONDS
  PYTHONPATH=$PWD/src timeout 300 python -m dsattn.cli calibrate --graph --rep-ms 5 --out $OUT/cal_$TAG.json \
    > $OUT/cal.log 2>&1
  echo "calibrate rc=$? $((SECONDS - t0)) s" >> $L; tail -n 14 $OUT/cal.log >> $L; pack
  ;;
*)
  echo "usage: bash bench/gpu_s59.sh a|b|c" >&2; exit 2
  ;;
esac
