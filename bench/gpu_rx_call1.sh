#!/usr/bin/env bash
# Device call of gluon_rx's two-consumer kernel (helper X; one H200; typically ~3-4 minutes, at most ~7 by the
# timeouts): hang guard, timings beside gluon_ws, then the GPU tests. Usage on the device machine, from the repo root:
#   OUT=<dir> bash bench/gpu_rx_call1.sh        (log: $OUT/rx1.log; tests: $OUT/rx1_tests.log; $OUT/sparse_mla_rx_bench.json)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
L=$OUT/rx1.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
# 1. hang guard: a tiny launch in a child process (60 s limit)
timeout 100 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -k "hang_guard and c2" >> $L 2>&1
rc=$?; echo "hang guard rc=$rc" >> $L
CFG=""
grep -q "FAILED.*hang_guard\[c2\]" $L || CFG="c2,c2+pp,c2+pipe"
# (the one-consumer kernel, c1, was timed at edd6f78: bench/logs/s10_rx1.log; here again with 8-head programs)
CFG="$CFG,c1"
CFG=${CFG#,}
if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then CFG=""; fi   # 1: a test failed; other codes: timeout / crash
if [ -z "$CFG" ]; then echo "hang guard failed: no timings, no tests" >> $L; exit 1; fi
# 2. timings: fp8_ds_mla decode 512 tokens, 8 / 16 / 32 heads, gluon_ws's default beside gluon_rx's defaults at
#    two consumer warpgroups (c2); +pipe: block b's S issued before block b - 1's P @ V (spills at 32 heads);
#    (c2 now runs 8-head programs at 8 heads: hp8 1, measured the fastest); +pp: ping-pong consumers (alternate
#    blocks whole, merged at the end; <= 16 heads a program: at 32 heads it reports FAILED, ValueError)
#    (session 10 call 5 measured c2, c2+alu3, c2+alu+pipe, c2+hp8, c2+alu+pipe+hp8: bench/logs/s10_call5.log)
timeout 130 python bench/mla_rx_bench.py --out $OUT --rep-ms 20 --heads 8,16,32 --configs $CFG >> $L 2>&1
echo "bench rc=$?" >> $L
# 3. the GPU tests of the two-consumer kernel (reference twin + gluon_ws comparison; compile-bound; the one-consumer
#    kernel's passed at edd6f78, bench/logs/s10_rx1_tests.log)
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -s -k "c2" > $OUT/rx1_tests.log 2>&1
echo "tests rc=$?" >> $L
grep -E "passed|failed|FAILED|Error|vs gluon_ws" $OUT/rx1_tests.log | tail -n 40 >> $L
