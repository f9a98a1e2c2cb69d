#!/usr/bin/env bash
# Session 68, call 1 (carry [".peer"]): on an H200, issue 3's prefill rows beside FlashMLA first (bench/gpu_s63_h200.sh,
# README's H200 prefill rows are still session 60's), then PART=d of bench/gpu_s67.sh; on any other card PART=d then
# PART=e of bench/gpu_s67.sh (their predictions are written there). The pair file must exist first (gpu_s67.sh says how).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s68.sh      ($OUT/<part>.log, $OUT/<part>.tgz)
set -u
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
part() { PART=$1 bash bench/gpu_s67.sh > /dev/null 2>&1; mv $OUT/s67.log $OUT/$1.log; mv $OUT/s67.tgz $OUT/$1.tgz; }
case "$GPU" in
  *H200*) bash bench/gpu_s63_h200.sh > /dev/null 2>&1; rm -rf $OUT/r; part d; cat $OUT/s63h.log ;;
  *) part d; part e ;;
esac
cat $OUT/d.log $OUT/e.log 2>/dev/null
