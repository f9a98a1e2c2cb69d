#!/usr/bin/env bash
# Session 25, device call 1 (one H200): gluon_rx config pair (RxConfig's 16th field): each ping-pong consumer takes
# two consecutive blocks (128 keys) an iteration, with one online-softmax step for both (one cross-warp max, one alpha,
# one rescale of O^T and the row sums, one fence + barrier for both P^T). Why: the 8-head nope decode is 1-2% short of
# 1.15x over fp8_ds_mla (session 24: 1.132x / 1.142x) and its consumers hold ~63% of the stall samples (session 19
# profile), part of it the per-block softmax synchronization. Compile check (sm_90a): spill-free with spillfix 1 (nope
# 5 stages / 48 registers, fp8_ds_mla 4 / 56), and nope 4 / 56 without it; no wgmma serialization.
# PREDICTION: nope 8 heads 1.02-1.06x against the default, fp8_ds_mla 8 heads 1.00-1.04x (the nope program is the more
# consumer-bound one: fewer bytes a key); outputs within 1e-2 / 1e-6 of the default (the max moves in 128-key steps).
# OUTCOME (bench/logs/s25_pair.log): right (6 GPU tests), no faster: nope 0.970x / 1.000x (512 / 2048 tokens),
# fp8_ds_mla 0.970x, nope 4 / 56 without spillfix 0.849x; removed. Needs 9c3be7b (pair and its test).
#   bash bench/gpu_s25_pair.sh   (SKIP_GUARD=1: without the first tests, which a first try of the call passed;
#   log $OUT/pair.log, results under $OUT/r, $OUT/r.tgz; ~9 min)
LOG=pair.log TAG=s25 source bench/gpu_lib.sh
export DSATTN_GIT_COMMIT=${DSATTN_GIT_COMMIT:-unknown}
T="python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfE -s"
if [ -z "${SKIP_GUARD:-}" ]; then
  timeout 130 $T -k "(hang_guard and c2) or (test_rx_pair and c2 and nope)" > $R/t_guard.log 2>&1
  rc=$?; echo "guard + nope pair tests rc=$rc" >> $L; grep -E "pair h=|passed|failed|Error" $R/t_guard.log | tail -n 8 >> $L
  pack; [ $rc -ne 0 ] && exit 1
fi
V=DSATTN_RX_CONFIG
ab $V fp8_ds_mla_nope 8 5/48/4/0/1/2/0/0/1/1/1/0/2/1/1/1 pair_nope_h8
ab $V fp8_ds_mla 8 4/56/4/0/1/2/0/0/1/1/1/0/0/0/1/1 pair_fp8_h8
ab $V fp8_ds_mla_nope 8 4/56/4/0/1/2/0/0/1/1/0/0/2/1/1/1 pair456_nope_h8
ab $V fp8_ds_mla_nope 8 5/48/4/0/1/2/0/0/1/1/1/0/2/1/1/1 pair_nope_h8_2048 2048
timeout 130 $T -k "test_rx_pair and c2 and not nope" > $R/t_pair.log 2>&1
echo "fp8_ds_mla pair tests rc=$?" >> $L; grep -E "pair h=" $R/t_pair.log | tail -n 4 >> $L; tail -n 2 $R/t_pair.log >> $L
pack
