#!/usr/bin/env bash
# Session 33, call 2: every GPU test file whole at the session's final code (16 shards sharing the one H200), as
# session 30's bench/gpu_s30_d.sh. Logs packed into $OUT/t.tgz (the device tool returns a limited number of files).
set -u
export PYTHONPATH=src
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG \
  DSATTN_G64_CONFIG DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB
N=16 LIMIT=500 bash bench/gpu_tests_sharded.sh $OUT/s33_tests tests/gpu/test_sparse_mla_gpu.py \
  tests/gpu/test_sparse_mla_rx_gpu.py tests/gpu/test_sparse_mla_prefill_gpu.py tests/gpu/test_backend_gpu.py \
  tests/gpu/test_indexer_gpu.py tests/gpu/test_grouping_gpu.py tests/gpu/test_tp_gpu.py
cat $OUT/s33_tests/summary.log
tar -czf $OUT/t.tgz -C $OUT s33_tests && rm -rf $OUT/s33_tests
