#!/usr/bin/env bash
# Session 25, device call 7 (one H200): three ping-pong consumers at the 8-head programs (gluon_rx config consumers 3,
# spillfix 1; 152 registers a consumer, 8 B of spills in two of them by the compile check). Why: the timing builds
# (call 5) have nope's consumers setting its pace, and Nsight Compute (call 3) has the SM issuing an instruction every
# 1.8 cycles a scheduler with 0.89 eligible warps of 3 (no pipe above 54%): latency-bound, so a third independent
# consumer chain a scheduler may raise the consumers' rate until the producer (0.132 ms alone over nope) binds.
# Sessions 12-13 measured three consumers slower (nope 0.2155 vs 0.1924 ms), before vst / sraw / idxpf and the
# 48-register producer. PREDICTION: nope 8 heads 1.00-1.10x against the default, fp8_ds_mla 0.95-1.03x (its producer
# binds sooner); outputs within 1e-2 of the default.
# OUTCOME (bench/logs/s25_c3.log): right (5 GPU tests), slower: nope 0.957x / 0.985x (512 / 2048 tokens), fp8_ds_mla
# 0.918x; removed. Needs 881755d (consumers 3 and its test).
#   bash bench/gpu_s25_c3.sh   (log $OUT/c3.log, results under $OUT/r, $OUT/r.tgz; ~3 min)
LOG=c3.log TAG=s25 source bench/gpu_lib.sh
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfE -s \
  -k "(hang_guard and c2) or (three_consumers and c2)" > $R/t_c3.log 2>&1
rc=$?; echo "guard + three-consumer tests rc=$rc" >> $L; grep -E "three consumers h=|passed|failed|Error" $R/t_c3.log | tail -n 8 >> $L
pack; [ $rc -ne 0 ] && exit 1
V=DSATTN_RX_CONFIG
ab $V fp8_ds_mla_nope 8 5/48/4/0/1/3/0/0/1/1/1/0/2/1/1 c3_nope_h8
ab $V fp8_ds_mla 8 4/56/4/0/1/3/0/0/1/1/1/0/0/0/1 c3_fp8_h8
ab $V fp8_ds_mla_nope 8 5/48/4/0/1/3/0/0/1/1/1/0/2/1/1 c3_nope_h8_2048 2048
