#!/usr/bin/env bash
# Helper P's second device call (one H200): gluon_prefill (grouped Gluon bf16 prefill) after call 1 chose its default
# schedule. Correctness under the default, then the issue-3 prefill table (s_q 1024 and 8192, 8..128 heads) beside
# Triton and FlashMLA, then timing builds (DSATTN_PF_PROFILE) splitting the per-block time at s_q 1024.
# Usage on the device machine, repo root: bash bench/gpu_pf_call2.sh   (bounds: 60 + 70 + 100 + 45 s < 4.6 min;
# likely ~3; log $OUT/pf2.log, tables $OUT/pf2_*.json)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
P="-q -p no:cacheprovider -rs"
L=$OUT/pf2.log
T=tests/gpu/test_sparse_mla_prefill_gpu.py
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader > $L
timeout 60 python -m pytest $T $P -x -k "hang_guard or heads or overlap" >> $L 2>&1; rc=$?; echo "tests rc=$rc" >> $L
[ $rc -eq 0 ] || exit 0
timeout 70 python -m pytest $T $P -k "not hang_guard and not heads and not overlap" > $OUT/pf2_tests.log 2>&1
echo "tests2 rc=$?" >> $L; tail -n 5 $OUT/pf2_tests.log >> $L
timeout 100 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32,64,128 --tokens 1024,8192 \
  --impl triton,gluon_prefill --rep-ms 10 --out $OUT --name pf2_table >> $L 2>&1; echo "table rc=$?" >> $L
timeout 45 python bench/pf_schedules.py --heads 8,64 --tokens 1024 --specs DEFAULT_SPEC --profile 1,2,3 \
  --out $OUT --name pf2_profile >> $L 2>&1; echo "profile rc=$?" >> $L
