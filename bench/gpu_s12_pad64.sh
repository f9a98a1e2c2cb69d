#!/usr/bin/env bash
# Session 12, last device call (one H200): the prefill 'pad64' variant through gluon_prefill (one token's heads a
# 64-row program) at <= 32 heads: GPU tests, the prefill calibration as CUDA-graph replays, short-prefill rows of the
# kernel table (eager, FlashMLA beside).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s12_pad64.sh     (results in $OUT/r.tgz, log $OUT/pad64.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/pad64.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 100 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "pad64_variant" > $R/t_pad64.log 2>&1
echo "pad64 tests rc=$?" >> $L; tail -n 3 $R/t_pad64.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
if grep -q " passed" $R/t_pad64.log && ! grep -q "failed" $R/t_pad64.log; then
  timeout 120 python -m dsattn.cli calibrate --graph --rep-ms 5 --kernels prefill --out $R/calibration_prefill.json \
    > $R/calibrate_prefill.log 2>&1; echo "calibrate rc=$?" >> $L; grep -E "heads|table" $R/calibrate_prefill.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
fi
