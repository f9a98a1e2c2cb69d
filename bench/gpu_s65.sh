#!/usr/bin/env bash
# Session 65, one device call: the hand-off probe (bench/handoff_probe.py: mbarrier against named-barrier hand-offs
# between two Gluon partitions) on any card; on an H200 also issue 3's prefill rows beside FlashMLA
# (bench/gpu_s63_h200.sh; README's H200 rows are session 60's, before cvt_asm). Carry [".peer"].
# PREDICTION (probe): a named-barrier hand-off several times cheaper than an mbarrier one (~20-40 against ~100-300
# cycles); the prefill rows 1.00-1.05x session 60's ratios, 32 heads ~0.95x / ~0.98x FlashMLA's best.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s65.sh      ($OUT/s65.log, $OUT/handoff.json, $OUT/r.tgz on an H200)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/s65.log
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader > $L
timeout 120 python bench/handoff_probe.py --out $OUT/handoff.json >> $L 2>&1; echo "probe rc=$?" >> $L
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$GPU" in
  *H200*) bash bench/gpu_s63_h200.sh > /dev/null 2>&1; cat $OUT/s63h.log >> $L ;;
  *) echo "not an H200: no table" >> $L ;;
esac
cat $L
