#!/usr/bin/env bash
# First device call of gluon_rx (helper X; one H200, < 4 minutes): hang guard, GPU tests, then timings beside gluon_ws.
# Usage on the device machine, from the repo root: OUT=<dir> bash bench/gpu_rx_call1.sh   (log: $OUT/rx1.log)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
L=$OUT/rx1.log
P="-q -p no:cacheprovider -rs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
# 1. hang guard: a tiny launch in a child process (120 s limit inside the test)
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -k hang_guard >> $L 2>&1
rc=$?; echo "hang guard rc=$rc" >> $L
if [ $rc -ne 0 ]; then echo "hang guard failed: no timings" >> $L; exit 1; fi
# 2. the GPU tests (reference twin + gluon_ws comparison; compile-bound)
timeout 170 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -s > $OUT/rx1_tests.log 2>&1
echo "tests rc=$?" >> $L
grep -E "passed|failed|FAILED|Error|vs gluon_ws" $OUT/rx1_tests.log | tail -n 40 >> $L
# 3. timings: fp8_ds_mla decode 512 tokens, 8 / 16 / 32 heads; default config and a few others
timeout 120 python bench/mla_rx_bench.py --out $OUT --rep-ms 30 --heads 8,16,32 \
    --configs default,4/64/4,4/64/4/0/2,4/64/8,5/64/4/2 >> $L 2>&1
echo "bench rc=$?" >> $L
