#!/usr/bin/env bash
# Every GPU test file whole (16 shards sharing the one H200, 500 s each: ~6 minutes), log folder $OUT/NAME, packed into
# $OUT/NAME.tgz (the device tool returns a limited number of files) and its summary printed.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_tests_all.sh NAME
set -u
name=$1
export PYTHONPATH=src
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG \
  DSATTN_G64_CONFIG DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB DSATTN_PREFILL_SPLITS
N=16 LIMIT=500 bash bench/gpu_tests_sharded.sh $OUT/$name tests/gpu/test_sparse_mla_gpu.py \
  tests/gpu/test_sparse_mla_rx_gpu.py tests/gpu/test_sparse_mla_rxb_gpu.py tests/gpu/test_sparse_mla_prefill_gpu.py \
  tests/gpu/test_backend_gpu.py \
  tests/gpu/test_indexer_gpu.py tests/gpu/test_grouping_gpu.py tests/gpu/test_tp_gpu.py
cat $OUT/$name/summary.log
tar -czf $OUT/$name.tgz -C $OUT $name && rm -rf $OUT/$name
