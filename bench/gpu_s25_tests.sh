#!/usr/bin/env bash
# Session 25, device call 4 (one H200): the three sparse MLA GPU test files whole at this tree (the public ops and
# dispatcher, gluon_rx, the prefill kernels: 717 tests), split over 12 pytest processes (bench/gpu_tests_sharded.sh).
# Earlier sessions ran them one file at a time and several were cut by their time limits (notes/sparse_mla.md).
#   bash bench/gpu_s25_tests.sh   (log $OUT/tests.log, shard logs under $OUT/r/tests_mla, $OUT/r.tgz; ~9 min)
LOG=tests.log TAG=s25 source bench/gpu_lib.sh
N=12 LIMIT=${LIMIT:-520} bash bench/gpu_tests_sharded.sh $R/tests_mla tests/gpu/test_sparse_mla_gpu.py \
  tests/gpu/test_sparse_mla_rx_gpu.py tests/gpu/test_sparse_mla_prefill_gpu.py
cat $R/tests_mla/summary.log >> $L
rm -f $R/tests_mla/ids*.txt; pack
