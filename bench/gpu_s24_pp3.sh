#!/usr/bin/env bash
# Session 24, device call 4 (one H200): call 2's profile had each pingpong consumer spinning on `full` for about a third
# of its samples: the producer, slowed by the two chains' shared-memory traffic, set the pace. gluon64's register
# producers (WsConfig depth / unit, session 22's code at a8df6ed brought back under pingpong only) write the fp16 tiles
# straight from registers: no raw cp.async stages, so per block no 42 KB cp.async write and 42 KB conversion read of
# shared memory (of ~365 KB), and 185,648 B of shared memory. Compile check: 2/112/4/0/2/1/2/16 and 2/64/8/0/2/1/2/16
# spill only in the merge (52 B), no wgmma serialization. PREDICTION: against the one-consumer default, 0.95-1.10x
# (it lost alone in session 22, 0.94-0.99x, when the consumer set the pace).
# OUTCOME (bench/logs/s24_pp3.log): right (the 8-warp variant's tests hit a test bug), 0.85-0.89x; removed. Needs
# 50732b0.
#   bash bench/gpu_s24_pp3.sh   (log $OUT/pp3.log, results under $OUT/r, $OUT/r.tgz; ~7 min)
LOG=pp3.log source bench/gpu_s24_lib.sh
T="python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE -s"
timeout 150 $T -k "ws_pingpong and gluon_ws and 32 and 2000 and reg" > $R/t_guard3.log 2>&1
rc=$?; echo "guard rc=$rc" >> $L; grep -E "pingpong|passed|failed|Error" $R/t_guard3.log | tail -n 10 >> $L; pack
[ $rc -eq 124 ] && exit 1
ab fp8_ds_mla 32 2/112/4/0/2/1/2/16 ppr16_fp8_h32
ab fp8_ds_mla 32 2/64/8/0/2/1/2/16 ppr16w8_fp8_h32
ab fp8_ds_mla 32 2/112/4/0/2/1/1/32 ppr1_fp8_h32
ab fp8_ds_mla_nope 32 2/112/4/0/2/1/2/16 ppr16_nope_h32
timeout 150 $T -k "ws_pingpong and gluon_ws and reg" > $R/t_pp3.log 2>&1
echo "pingpong register-producer GPU tests rc=$?" >> $L; grep -E "pingpong" $R/t_pp3.log | sort | tail -n 3 >> $L
tail -n 3 $R/t_pp3.log >> $L; pack
