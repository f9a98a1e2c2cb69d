#!/usr/bin/env bash
# Session 20, last device call (one H200): GPU test files at the session's final tree, each under a time limit
# (a file cut by its limit reports what ran before it: pytest -rfE with the per-test dots in the log).
#   bash bench/gpu_s20_tests.sh   (log $OUT/gt.log, per-file logs under $OUT/r; ~9 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG \
  DSATTN_RX_CONSUMERS DSATTN_PREFILL_SCRATCH_MIB
R=$OUT/r; mkdir -p $R; L=$OUT/gt.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
t() {  # file seconds [pytest args...]
  local f=$1 s=$2; shift 2
  timeout $s python -m pytest tests/gpu/$f -q -p no:cacheprovider -rfE "$@" > $R/${f%.py}.log 2>&1
  echo "$f rc=$? ($s s limit)" >> $L
  tail -n 3 $R/${f%.py}.log >> $L
  echo "  dots: $(grep -E '^[.sFE]+' $R/${f%.py}.log | tr -cd '.' | wc -c) passed-dots," \
    "$(grep -E '^[.sFE]+' $R/${f%.py}.log | tr -cd 'F' | wc -c) F" >> $L
}
t test_backend_gpu.py 110
t test_indexer_gpu.py 70
t test_grouping_gpu.py 50
t test_sparse_mla_prefill_gpu.py 150 -k "not configs"
t test_sparse_mla_gpu.py 150
