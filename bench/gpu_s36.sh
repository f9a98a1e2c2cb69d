#!/usr/bin/env bash
# Session 36, call 1: bench/fp8_tiny_groups.py again, now with the variant passed (session 35's 64-token launches
# took pad64, so its rows ran gluon64 or the Triton 64-head kernel whatever they said), with gluon_rx's sraw on and
# off; then the new GPU test test_rx_sraw_tiny_group and test_rx_sraw.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s36.sh tiny
set -u
export PYTHONPATH=src; unset TRITON_INTERPRET
case $1 in
  tiny) nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
        timeout 420 python bench/fp8_tiny_groups.py --out $OUT > $OUT/tiny.log 2>&1; echo "tiny rc=$?"
        timeout 150 python -m pytest -q -x tests/gpu/test_sparse_mla_rx_gpu.py -k "sraw" -s > $OUT/sraw_tests.log 2>&1
        echo "tests rc=$?"; tail -n 3 $OUT/sraw_tests.log; grep "sraw tiny" $OUT/sraw_tests.log
        cat $OUT/tiny.log | cut -c1-200 ;;
esac
