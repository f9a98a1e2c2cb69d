#!/usr/bin/env bash
# Session 38: split prefills. A short prefill (and, on the bf16-cache path, every step, decodes included: SPEC 7) ran
# one program a group of G tokens or a token, so below ~one wave most SMs sat idle while each program walked its
# whole list: the calibration table (session 21) has 8 heads at 0.226 ms for 32 tokens 'native' and 0.086 'pad64',
# flat up to ~128 tokens (one program's walk). Now dispatch.prefill_splits cuts each list into parts that fill the
# SMs, gluon_prefill walks each part in its own program into fp32 partials, and launch.combine_splits merges them.
# PREDICTION (arithmetic: ~2.6 us a 64-key block a program, ~5 us fixed a program, combine ~2-5 us): 8 heads 32
# tokens pad64 0.086 -> ~0.03 ms, 'native' (4 groups x 8 parts) 0.226 -> ~0.04; at 1024 tokens (one wave at 8
# heads) no split, no change.
# Call 1 (`a`): the prefill GPU test file whole (the split tests new: 1 / 2 / 3 / 8 parts, every head class and
# variant, an empty last part, overlap lists, chunks, vst and bf16 schedules), its hang guards first; then the
# sweep of split counts against none (bench/prefill_splits_sweep.py, CUDA-graph replays).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s38.sh a
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB \
  DSATTN_PREFILL_SPLITS
R=$OUT/r; mkdir -p $R; L=$OUT/s38.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s38.log; }
case "$1" in
a)
  timeout 150 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_sparse_mla_prefill_gpu.py -k hang_guard \
    > $R/hang_guard.log 2>&1
  echo "hang guards rc=$? $(tail -n 1 $R/hang_guard.log)" >> $L; pack
  N=8 LIMIT=240 bash bench/gpu_tests_sharded.sh $R/pf_tests tests/gpu/test_sparse_mla_prefill_gpu.py
  cat $R/pf_tests/summary.log >> $L; pack
  timeout 260 python bench/prefill_splits_sweep.py --out $R --name prefill_splits_sweep_s38 > $R/sweep.log 2>&1
  echo "sweep rc=$?" >> $L; tail -n 70 $R/sweep.log >> $L; pack
  ;;
esac
pack
