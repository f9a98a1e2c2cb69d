#!/usr/bin/env bash
# One table case at two trees on one GPU, in turn (separate processes: two versions of the package), REPS times each:
# did a change since OLD slow a kernel down? Session 58 found the prefill's 064edf2 regression this way
# (bench/gpu_s58_fix.sh, bench/results/prefill_regression_s58_h100.json); its note suggests the decode rows next.
# Prepare the old tree on the CPU machine first (untracked, not ignored, so it travels with the working tree):
#   rm -rf old_src && mkdir old_src && git archive <old sha> src | tar -x -C old_src
# then on the device:
#   [CASES=decode] [HEADS=8,16,32] [TOKENS=512] [REPS=2] [OLD=old_src] DSATTN_GIT_COMMIT=<sha> bash bench/gpu_tree_ab.sh
# Writes $OUT/tree_ab.log (each run's dsattn rows, prefixed by tree and repeat) and $OUT/tree_ab_{old,new}_<i>.json.
# The table's own timing (do_bench medians, 3 rounds, no peers); compare rows of the same case only.
set -u
export PYTHONUNBUFFERED=1
OLD=${OLD:-old_src}
[ -d "$OLD/src/dsattn" ] || { echo "no $OLD/src/dsattn: prepare it first (see the header)" >&2; exit 2; }
L=$OUT/tree_ab.log; nvidia-smi --query-gpu=name --format=csv,noheader > $L
echo "old $OLD, new ${DSATTN_GIT_COMMIT:-?}; ${CASES:-decode} heads ${HEADS:-8,16,32} tokens ${TOKENS:-512}" >> $L
for i in $(seq 1 ${REPS:-2}); do
  for t in old new; do
    if [ $t = old ]; then P=$PWD/$OLD/src; else P=$PWD/src; fi
    PYTHONPATH=$P timeout 200 python -m dsattn.cli bench kernels --op sparse_mla --cases ${CASES:-decode} \
      --heads ${HEADS:-8,16,32} --tokens ${TOKENS:-512} --impl auto --rounds 3 --rep-ms 20 --no-peer --out $OUT \
      --name tree_ab_${t}_$i 2>&1 | grep "dsattn:" | sed "s/^/$t $i /" >> $L
  done
done
cat $L
