#!/usr/bin/env bash
# Session 58, call 9: the prefill's SPLIT constexpr (the fix of 064edf2's 15% at 64 heads, found on the H100 in calls
# 7-8: 064edf2^ 675.5 us a call, 064edf2 775.6, HEAD 770.7). Needs old_pre/ (git archive 064edf2^ src, untracked).
# Part 1: issue 3's prefill rows at s_q 1024, 8 / 32 / 64 heads, 064edf2^ and the fixed tree alternately, twice each
# (separate processes: two package versions). Part 2: the prefill GPU test file (split tests among them), 8 shards.
# PREDICTION: the fixed tree reads 064edf2^'s times (64 heads ~0.68 ms, 32 ~0.543, 8 ~0.228 on the H100) within 1-2%;
# every prefill GPU test passes.
#   [REPS=2] [TLIMIT=230] DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s58_fix.sh
set -u
export PYTHONUNBUFFERED=1
L=$OUT/fix.log; nvidia-smi --query-gpu=name --format=csv,noheader > $L
for i in $(seq 1 ${REPS:-2}); do
  for t in old_pre fixed; do
    if [ $t = old_pre ]; then P=$PWD/old_pre/src; else P=$PWD/src; fi
    PYTHONPATH=$P timeout 100 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,32,64 \
      --tokens 1024 --impl auto --rounds 3 --rep-ms 20 --no-peer --out $OUT --name pf_fix_${t}_$i 2>&1 \
      | grep "dsattn:native" | sed "s/^/$t $i /" >> $L
  done
done
export PYTHONPATH=$PWD/src
N=8 LIMIT=${TLIMIT:-230} bash bench/gpu_tests_sharded.sh $OUT/pf_tests tests/gpu/test_sparse_mla_prefill_gpu.py
cat $OUT/pf_tests/summary.log >> $L
tar -czf $OUT/fix.tgz -C $OUT fix.log pf_tests $(cd $OUT && ls pf_fix_*.json)
