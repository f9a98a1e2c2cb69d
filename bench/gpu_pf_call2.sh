#!/usr/bin/env bash
# Helper P's second (final) device call (one H200): gluon_prefill (grouped Gluon bf16 prefill) with its new default
# schedule (64-entry blocks x 2 stages, split consumer, warpgroup 0's P @ V from registers; timed in call 5).
# Usage on the device machine, repo root:
#   bash bench/gpu_pf_call2.sh tests       # <= 170 s, default schedule only: hang guard (8 / 64 / 128 heads) first,
#                                          # then heads 1..128 (T = 50, topk_length, NaN rows, strided out), overlap
#                                          # indices, duplicates, D 512, peaked, odd topk, chunks ($OUT/pf2_tests.log)
#   bash bench/gpu_pf_call2.sh schedules   # <= 100 s, alone on the GPU (timings): the default against the schedules
#                                          # measured in call 1, and its timing builds ($OUT/pf2_schedules.json)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
T=tests/gpu/test_sparse_mla_prefill_gpu.py
case "${1:-tests}" in
tests)
  timeout 170 python -m pytest $T -q -p no:cacheprovider -rs -v \
    -k "(hang_guard and default) or heads or overlap or duplicates or (peaked and default) or chunks or d512 or odd_topk" \
    > $OUT/pf2_tests.log 2>&1
  echo "tests rc=$? PASSED $(grep -c PASSED $OUT/pf2_tests.log) FAILED $(grep -c FAILED $OUT/pf2_tests.log)" \
    | tee -a $OUT/pf2_tests.log
  grep -E "FAILED|Error|assert" $OUT/pf2_tests.log | tail -n 20
  ;;
schedules)
  timeout 100 python bench/pf_schedules.py --heads 8,64 --tokens 1024 --out $OUT --name pf2_schedules \
    --specs 64/2/4/56/0/0/1,32/4/4/56/0/0/1,64/2/4/56/0/0/0,32/4/4/56/1/0/1 --profile 1,2
  echo "schedules rc=$?"
  ;;
esac
