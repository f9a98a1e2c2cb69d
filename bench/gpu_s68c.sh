#!/usr/bin/env bash
# Session 68, call 3 (carry [".peer"]): after cl=1 became the prefill default from 64 heads (cef9f3f), 1. every GPU
# test with "prefill" in its id in the sparse MLA and backend files (16 shards, 270 s each); 2. issue 3's prefill rows
# beside FlashMLA (bench/gpu_s16_table.sh PARTS=prefill, 3 alternating rounds), on whichever card comes.
# PREDICTION: every test passes (cl is bit-equal: test_pf_cl_bit_equal); the 64 / 128-head rows ~1.5% above session
# 63's on an H100 (0.763x / 0.814x and 0.756x / 0.790x), the others within noise of session 63's.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s68c.sh      ($OUT/s68c_tests.tgz, $OUT/r.tgz, $OUT/tb.log)
set -u
export PYTHONPATH=src
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG \
  DSATTN_G64_CONFIG DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB DSATTN_PREFILL_SPLITS DSATTN_PF_PROFILE
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$GPU" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
K=prefill N=16 LIMIT=270 bash bench/gpu_tests_sharded.sh $OUT/s68c_tests tests/gpu/test_sparse_mla_prefill_gpu.py \
  tests/gpu/test_sparse_mla_gpu.py tests/gpu/test_backend_gpu.py
echo "$GPU tree ${DSATTN_GIT_COMMIT:-?}" >> $OUT/s68c_tests/summary.log
tar -czf $OUT/s68c_tests.tgz -C $OUT s68c_tests && cp $OUT/s68c_tests/summary.log $OUT/tests_summary.log && rm -rf $OUT/s68c_tests
PARTS=prefill TABLE_TAG=s68_$tag bash bench/gpu_s16_table.sh > /dev/null 2>&1
rm -rf $OUT/r
cat $OUT/tests_summary.log $OUT/tb.log
