#!/usr/bin/env bash
# Session 25, device call 6 (one H200): the 8-head ping-pong defaults with two P @ V chunks in flight (pv_depth 2) and
# the wgmma descriptors rebuilt each block (spillfix 1). Why: the timing builds (call 5) have nope's consumers setting
# its pace, and each consumer's P @ V phase waits for every chunk but the newest before converting the next. Session
# 20 measured pv_depth 2 alone at 0.762x, but that build spilled 220 B (compile check); with spillfix 1 it compiles
# spill-free (nope 5 stages / 48 registers, fp8_ds_mla 4 / 56). Config only, no code change.
# PREDICTION: nope 8 heads 1.00-1.04x against the default, fp8_ds_mla 0.98-1.02x; outputs within 1e-3 of the default.
# OUTCOME (bench/logs/s25_pvd.log): bit-equal, no faster: nope 0.999x (CI 0.973-1.021) / 0.957x (2048 tokens),
# fp8_ds_mla 0.985x (0.961-1.004). Not kept (a config string; nothing to remove).
#   bash bench/gpu_s25_pvd.sh   (log $OUT/pvd.log, results under $OUT/r, $OUT/r.tgz; ~2 min)
LOG=pvd.log TAG=s25 source bench/gpu_lib.sh
V=DSATTN_RX_CONFIG
ab $V fp8_ds_mla_nope 8 5/48/4/0/2/2/0/0/1/1/1/0/2/1/1 pvd2_nope_h8
ab $V fp8_ds_mla 8 4/56/4/0/2/2/0/0/1/1/1/0/0/0/1 pvd2_fp8_h8
ab $V fp8_ds_mla_nope 8 5/48/4/0/2/2/0/0/1/1/1/0/2/1/1 pvd2_nope_h8_2048 2048
