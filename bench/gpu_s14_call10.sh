#!/usr/bin/env bash
# Session 14, device call 10 (one H200): the rest of the prefill GPU tests on the final default (1-D launch: pad64,
# D 512, duplicates, peaked, matches_triton) and the backend GPU tests (the serving step through it).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s14_call10.sh      (log $OUT/c10.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL
L=$OUT/c10.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 130 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x \
  -k "pad64 or d512 or duplicates or peaked or matches_triton" > $OUT/t_pf.log 2>&1
echo "prefill tests rc=$?" >> $L; tail -n 3 $OUT/t_pf.log >> $L
timeout 120 python -m pytest tests/gpu/test_backend_gpu.py $P -x > $OUT/t_backend.log 2>&1
echo "backend tests rc=$?" >> $L; tail -n 3 $OUT/t_backend.log >> $L
