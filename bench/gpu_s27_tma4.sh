#!/usr/bin/env bash
# Session 27, device call 2 (one H200): config tma again (bench/gpu_s27_tma.sh: bit-equal, 0.577x), with the copies
# issued by FOUR one-warp loader partitions (each a quarter of a half-block's rows, each arming the stage's mbarrier
# with its own bytes) instead of one. Question: is the one-row TMA gather bound by one warp issuing ~14 instructions a
# copy (then ~4x the issue rate), or by the copy engine / latency (then no change)? From call 1 (64 copies a half-block
# over fp8_ds_mla 2 stages: ~4300 SM cycles a half; nope 32 copies, 3 stages: ~2800), a fit predicts 0.30-0.40 ms if
# issue-bound. PREDICTION: 0.577x -> 0.85-1.1x of the default if issue-bound, ~0.58x if not; bit-equal either way.
# OUTCOME (bench/logs/s27_tma4.log, at 1e63530): bit-equal (9 GPU tests), 0.717x / 0.757x (512 / 2048 tokens), nope
# 0.967x: partly issue-bound (1.23x over one loader), still slower; config tma was removed, so the script runs only at 1e63530.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s27_tma4.sh   (log $OUT/tma4.log, results under $OUT/r, $OUT/r.tgz)
LOG=tma4.log TAG=s27 source bench/gpu_lib.sh
ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/128/4/0/2/1/96/1 tma4_fp8_h32
timeout 240 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE -k "ws_ahead and gluon_ws" \
  > $R/t_ws4.log 2>&1
echo "ws ahead/tma4 GPU tests rc=$?" >> $L; tail -n 6 $R/t_ws4.log >> $L; pack
ab DSATTN_WS_CONFIG fp8_ds_mla_nope 32 3/128/4/0/2/1/96/1 tma4_nope_h32
ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/128/4/0/2/1/96/1 tma4_fp8_h32_2048 2048
