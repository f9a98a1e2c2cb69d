#!/usr/bin/env bash
# Session 36, call 1: bench/fp8_tiny_groups.py again, now with the variant passed (session 35's 64-token launches
# took pad64, so its rows ran gluon64 or the Triton 64-head kernel whatever they said), with gluon_rx's sraw on and
# off; then the new GPU test test_rx_sraw_tiny_group and test_rx_sraw.
# Call 2 (`sraw`): what sraw (exact lse for such groups) costs in the defaults that do not have it: `dsattn bench ab`
# default vs sraw 1 at 8 heads over fp8_ds_mla (ping-pong; 512 and 2048 tokens) and 16 (two CTAs; both layouts).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s36.sh tiny|sraw
set -u
export PYTHONPATH=src; unset TRITON_INTERPRET
case $1 in
  tiny) nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
        timeout 420 python bench/fp8_tiny_groups.py --out $OUT > $OUT/tiny.log 2>&1; echo "tiny rc=$?"
        timeout 150 python -m pytest -q -x tests/gpu/test_sparse_mla_rx_gpu.py -k "sraw" -s > $OUT/sraw_tests.log 2>&1
        echo "tests rc=$?"; tail -n 3 $OUT/sraw_tests.log; grep "sraw tiny" $OUT/sraw_tests.log
        cat $OUT/tiny.log | cut -c1-200 ;;
  sraw) LOG=sraw.log TAG=s36; source bench/gpu_lib.sh
        P8="stages=4;producer_regs=56;producer_warps=4;pv_depth=1;consumers=2;hp8=1;pingpong=1;spillfix=0;maxnreg=0;idxpf=0;sraw=1;vst=1"
        P16="stages=2;producer_regs=48;producer_warps=4;pv_depth=1;consumers=1;hp8=1;pingpong=0;spillfix=0;maxnreg=128;idxpf=0;sraw=1;vst=1"
        ab DSATTN_RX_CONFIG fp8_ds_mla 8 "$P8" sraw_f8_h8 512
        ab DSATTN_RX_CONFIG fp8_ds_mla 8 "$P8" sraw_f8_h8_2048 2048
        ab DSATTN_RX_CONFIG fp8_ds_mla 16 "$P16" sraw_f8_h16 512
        ab DSATTN_RX_CONFIG fp8_ds_mla_nope 16 "$P16" sraw_nope_h16 512
        cat $L ;;
esac
