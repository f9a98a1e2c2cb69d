#!/usr/bin/env bash
# Session 68, call 8 (carry [".peer"]): after call 7 (row_scratch: bench ab 1.139x / 1.167x at 64 / 128 heads, 1.030x at
# 32, level at 16 with conversion, 0.986x at 8 without it from the host's extra work), the rule's ratio 2 (no
# conversion at 8 / 16 heads s_q 1024) and the host's work before the rule moved behind it: 1. the row_scratch GPU
# tests again (their case now 1000 slots, so that the rule converts at 8 heads too) and the hang guard; 2. issue 3's
# prefill table beside FlashMLA with the '+rows' rows (bench/gpu_s16_table.sh PARTS=prefill, 3 rounds).
# PREDICTION: tests pass; '+rows' over FlashMLA's best at s_q 1024: 8 / 16 heads as the plain rows (not converted),
# 32 heads ~1.00-1.01x, 64 heads ~0.82x, 128 heads ~0.87x; at s_q 8192 every head count converts: 8 heads ~2.4x,
# 16 heads ~1.6x, 32 heads ~1.05x, 64 heads ~0.95x, 128 heads ~0.93x.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s68f.sh      ($OUT/s68f_tests.log, $OUT/tb.log, $OUT/r.tgz)
set -u
export PYTHONPATH=src
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$GPU" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
echo "$GPU tree ${DSATTN_GIT_COMMIT:-?}" > $OUT/s68f_tests.log
timeout 150 python -m pytest -q -p no:cacheprovider -rfE tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "row_scratch or hang_guard" > $OUT/tests_full.log 2>&1
echo "tests rc=$?: $(tail -n 1 $OUT/tests_full.log)" >> $OUT/s68f_tests.log
grep -E "^(FAILED|ERROR)" $OUT/tests_full.log >> $OUT/s68f_tests.log
PARTS=prefill TABLE_TAG=s68_rows_$tag bash bench/gpu_s16_table.sh > /dev/null 2>&1
rm -rf $OUT/r
cat $OUT/s68f_tests.log $OUT/tb.log
