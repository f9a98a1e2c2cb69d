#!/usr/bin/env bash
# Written in session 19; RAN in session 20 (device call 3: the same crossovers, bench/logs/s20_calibrate.log).
# The head-dispatch table again. bench/results/calibration_h200.json's
# decode rows were measured at c325c6d and its prefill rows at 03deb7e (session 12); since then the 16-head decode
# kernel (ping-pong in session 13, two CTAs an SM in session 19) and the prefill (grouping in shared memory in 18,
# cvt_pipe in 19) changed, so the 'pad64' / 'native' crossovers (decode 16 heads <= 45 tokens, prefill 8 / 16 heads
# <= 362, 32 heads <= 181) may have moved. Writes $OUT/r/calibration_h200.json; commit it to bench/results (the table
# a caller passes as DSAAttention's `calibration`, and the serving bench's) if its crossovers differ, with the log.
#   bash bench/gpu_s20_calibrate.sh   (log $OUT/cal.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/cal.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 300 python -m dsattn.cli calibrate --graph --rep-ms 5 --out $R/calibration_h200.json > $R/calibrate.log 2>&1
echo "calibrate rc=$?" >> $L; tail -n 30 $R/calibrate.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
