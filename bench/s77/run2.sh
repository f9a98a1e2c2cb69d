#!/usr/bin/env bash
# Session 77, device call 3 (one GPU, no carry): the GPU tests that call 1 (run.sh PART both) cut at its timeouts,
# at the tree with PIPE removed and dups_block on: the whole grouping file (the repeated-slot kernel runs after every
# union build), then the prefill tests over repeated slots and chunks, and the pair's that call 1 did not reach.
#   DSATTN_GIT_COMMIT=<sha> bash bench/s77/run2.sh
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
L=$OUT/s77_call3.log
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
t() {  # name timeout pytest-args...
  local n=$1 s=$2; shift 2
  timeout $s python -m pytest -q -p no:cacheprovider -rfE --tb=short "$@" > $OUT/tests_$n.log 2>&1
  echo "tests $n rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests_$n.log)" >> $L
  grep -E "^(FAILED|ERROR)|^E " $OUT/tests_$n.log | head -n 10 | cut -c1-300 >> $L
}
t grouping 280 tests/gpu/test_grouping_gpu.py
t prefill 150 tests/gpu/test_sparse_mla_prefill_gpu.py -k "duplicates or chunks or pair_stamps or pair_other_paths"
cat $L
