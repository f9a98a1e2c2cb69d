#!/usr/bin/env bash
# Session 21, device call 5 (one H200): GPU test files of the decode kernels at the final kernel code (gluon_rx vst 1,
# gluon64 vst 1): the gluon_rx file whole (every way: defaults, one and two consumers), then the dispatcher's decode
# tests over the Gluon kernels, each under a time limit.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s21_tests.sh   (log $OUT/t.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS \
  DSATTN_WS_CONFIG DSATTN_G64_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/t.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 290 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfE > $R/t_rx.log 2>&1
echo "gluon_rx GPU tests rc=$?" >> $L; tail -n 4 $R/t_rx.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 150 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE \
  -k "(decode or g64 or ws_matches) and not triton" > $R/t_dec.log 2>&1
echo "dispatcher decode GPU tests rc=$?" >> $L; tail -n 4 $R/t_dec.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
