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
# Call 1 measured (064edf2, bench/logs/s38/call1/): hang guards 14 passed, the file 150 passed in 8 shards; the sweep
# stopped at its third case on an illegal address: bench.common.graph_replay returned the replay alone, so the
# arm's closure (and the union lists and partials it held, made outside the graph's pool) was freed while the
# graph still used that memory. Call 2 (186bccd, graph_replay keeps fn; bench/logs/s38/call2/): the arm that had
# failed ran clean eagerly at 1 / 8 / 16 / 32 parts and the plan (bench/prefill_split_debug.py, outputs against the
# reference), and the whole sweep ran (bench/results/prefill_splits_sweep_s38.json): 8 heads 32 tokens pad64 0.089
# -> 0.032 ms, native 0.232 -> 0.051; 1 token 0.09-0.11 -> 0.014-0.025; the 256-key minimum left 1-8 tokens short
# of 16-32 parts, so the minimum became one 64-key block (dispatch.PREFILL_MIN_SPLIT_KEYS).
# Call 3 (`b`): the head-dispatch table again (`dsattn calibrate`: with splits, 'native' beats 'pad64' from ~64-128
# tokens instead of 181-362), issue 3's prefill table at s_q 32 and 128 beside FlashMLA, and `dsattn bench ab` of
# the plan against no split (eager calls, confidence intervals).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s38.sh a|b
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
b)
  t0=$(date +%s)
  timeout 300 python -m dsattn.cli calibrate --graph --rep-ms 5 --out $R/calibration_h200.json > $R/calibrate.log 2>&1
  echo "calibrate rc=$? $(( $(date +%s) - t0 )) s" >> $L; tail -n 12 $R/calibrate.log >> $L; pack
  export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer
  for tok in 32 128; do
    t0=$(date +%s)
    timeout 150 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32,64,128       --tokens $tok --impl auto --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s38_prefill_$tok > $R/prefill_$tok.log 2>&1
    echo "prefill $tok rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -E "dsattn:|flashmla:" $R/prefill_$tok.log >> $L; pack
  done
  for c in "32 8" "128 32" "8 64"; do
    set -- $c
    timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $1 --heads $2       --a env:DSATTN_PREFILL_SPLITS=1 --b "" --name ab_s38_split_$1_h$2 --out $R > $R/ab_$1_h$2.log 2>&1
    echo "ab no split vs plan, s_q $1, $2 heads rc=$?" >> $L; tail -n 4 $R/ab_$1_h$2.log >> $L; pack
  done
  ;;
esac
pack
