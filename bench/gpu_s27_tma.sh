#!/usr/bin/env bash
# Session 27, device call 1 (one H200): gluon_ws (the 32-head decode kernel) with WsConfig tma 1, the 6th field of
# DSATTN_WS_CONFIG: each latent row (512 bytes) and RoPE row (128 bytes) lands by one TMA copy (a one-row box of a
# host tensor descriptor) issued from a one-warp loader partition; the scales stay cp.async (from the loader); the
# producer warpgroup only converts. Why: sessions 23-24 had the 32-head program co-limited by shared-memory traffic,
# with its latent cp.async at 10.5 wavefronts for 4 ideal (16-byte copies of 656-byte rows that start mid-line) and the
# producer's copy instructions sharing the SM with the consumer; session 19's 768-byte padded rows were 5.7% faster.
# TMA writes whole rows by the copy engine: no per-16-byte copy instruction, no address arithmetic in the converting
# warps. PREDICTION: bit-equal; 32 heads fp8_ds_mla 512 tokens 1.03-1.10x (issue 3 needs 1.05x at 512, 1.066x at 2048).
# OUTCOME (bench/logs/s27_tma.log, at 8d639a2): bit-equal (9 GPU tests, A/B diff 0) and much slower, 0.577x / 0.576x
# (512 / 2048 tokens), nope 0.830x: config tma was removed, so the script runs only at 8d639a2.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s27_tma.sh   (log $OUT/tma.log, results under $OUT/r, $OUT/r.tgz)
LOG=tma.log TAG=s27 source bench/gpu_lib.sh
ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/128/4/0/2/1/96/1 tma_fp8_h32
timeout 240 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE -k "ws_ahead and gluon_ws" \
  > $R/t_ws.log 2>&1
echo "ws ahead/tma GPU tests rc=$?" >> $L; tail -n 6 $R/t_ws.log >> $L; pack
ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/128/4/0/2/1/96/1 tma_fp8_h32_2048 2048
ab DSATTN_WS_CONFIG fp8_ds_mla_nope 32 3/128/4/0/2/1/96/1 tma_nope_h32
ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/128/4/0/2/1/128/1 tma_l128_fp8_h32
ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/160/4/0/2/1/96/1 tma_p160_fp8_h32
