#!/usr/bin/env bash
# Session 12, last check (one H200): the backend's GPU tests through the new prefill 'pad64' path (the default policy
# pads short prefills) and the fast launch path.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s12_backend.sh     (log $OUT/backend.log)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
L=$OUT/backend.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 170 python -m pytest tests/gpu/test_backend_gpu.py -q -p no:cacheprovider -rfEs >> $L 2>&1; echo "rc=$?" >> $L
