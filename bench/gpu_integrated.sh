#!/usr/bin/env bash
# One device call: the backend and TP GPU tests, calibration, the serving-step bench, the TP=1 bench and
# the demo on the GPU. Usage (device run): DSATTN_GIT_COMMIT=<sha> bash bench/gpu_integrated.sh
# Logs and JSON land in $OUT.
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:${PYTHONPATH:-}
unset TRITON_INTERPRET
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 170 python -m pytest tests/gpu/test_backend_gpu.py tests/gpu/test_tp_gpu.py -q -rs 2>&1 | tee $OUT/gpu_tests.log | tail -15
timeout 130 python -m dsattn.cli calibrate --out $OUT/calibration_h200.json 2>&1 | tee $OUT/calibrate.log | tail -25
timeout 110 python -m dsattn.cli bench serve --calibration $OUT/calibration_h200.json --out $OUT 2>&1 | tee $OUT/serve.log | tail -25
timeout 100 python -m dsattn.cli bench tp --quick --out $OUT 2>&1 | tee $OUT/tp.log | tail -15
timeout 45 python -m dsattn.cli demo --device cuda 2>&1 | tee $OUT/demo.log | tail -12
