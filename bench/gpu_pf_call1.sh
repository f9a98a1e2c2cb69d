#!/usr/bin/env bash
# Helper P's first device call (one H200): the grouped Gluon bf16 prefill kernel (gluon_prefill.py) never ran on a
# GPU before. Hang guard, correctness, then s_q 1024 timings beside Triton and FlashMLA and the other schedules.
# Usage on the device machine, repo root: bash bench/gpu_pf_call1.sh   (at most 60 + 90 + 60 + 75 s = 4.8 min; likely ~3; $OUT/pf1.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
P="-q -p no:cacheprovider -rs"
L=$OUT/pf1.log
T=tests/gpu/test_sparse_mla_prefill_gpu.py
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader > $L
# 1. hang guard (tiny cases, every schedule); a timeout (rc 124) stops the call
timeout 60 python -m pytest $T $P -v -x -s -k hang_guard >> $L 2>&1; rc=$?; echo "guard rc=$rc" >> $L
[ $rc -eq 0 ] || exit 0
# 2. correctness
# (in file order, most important first; -v so that a timeout still shows which tests passed)
timeout 90 python -m pytest $T $P -v -s > $OUT/pf_tests.log 2>&1; echo "tests rc=$?" >> $L
echo "PASSED $(grep -c PASSED $OUT/pf_tests.log) FAILED $(grep -c FAILED $OUT/pf_tests.log)" >> $L
grep -E "FAILED|Error|assert|vs triton" $OUT/pf_tests.log | tail -n 30 >> $L
tail -n 3 $OUT/pf_tests.log >> $L
# 3. timings at s_q 1024: default schedule beside Triton and FlashMLA, then the other schedules (8 and 64 heads)
timeout 60 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32,64,128 --tokens 1024 \
  --impl triton,gluon_prefill --rep-ms 10 --out $OUT --name pf1_default >> $L 2>&1; echo "bench rc=$?" >> $L
# schedules (bn/stages/producer_warps/producer_regs/overlap/f16/split, gluon_prefill.PrefillConfig) in one process,
# each output compared with the default's; then timing builds of the default (profile 1: no gathers, 2: no products)
timeout 75 python bench/pf_schedules.py --heads 8,64 --tokens 1024 --out $OUT --name pf1_schedules \
  --specs 32/4/4/56/0/0/0,32/4/4/56/1/0/0,64/2/4/56/0/0/0,32/4/4/56/0/1/0,32/4/4/56/0/0/1,32/4/4/56/1/0/1,32/4/4/56/1/1/1 \
  --profile 1,2 >> $L 2>&1; echo "schedules rc=$?" >> $L
