#!/usr/bin/env bash
# Session 61, call 1: gluon_small's bf16 rows now convert V by _bf16_to_f16_scaled (moved from gluon_prefill, where it
# is config cvt_asm): its GPU tests (the large-latent test at 8 / 32 heads, every small head count over bf16 rows, odd
# top-k, under DSATTN_SPARSE_MLA_IMPL=gluon), and its time against cbacd42's (an untracked copy in old61/src), three
# alternating processes each (bench/time_small_bf16.py); then session 60's bench/gpu_s60_cvt_asm.sh (prefill cvt_asm
# and sffma: tests, kernel probes, A/Bs).
# PREDICTION: right; gluon_small's bf16 decode within +-2% (its conversion is one pass over a stage a block).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s61.sh
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG
mkdir -p $OUT/r; S=$OUT/small.log
nvidia-smi --query-gpu=name --format=csv,noheader > $S
t0=$SECONDS
timeout 200 python -m pytest -q -p no:cacheprovider -rfE tests/gpu/test_sparse_mla_gpu.py \
  -k "(small_bf16_large or (every_small_head_count and bf16) or odd_topk) and gluon and not gluon_ws and not gluon64" \
  > $OUT/r/small_tests.log 2>&1
echo "small tests rc=$? $((SECONDS - t0)) s" >> $S; grep -E "passed|failed|Error" $OUT/r/small_tests.log | tail -n 12 >> $S
for r in 1 2 3; do
  PYTHONPATH=$PWD/old61/src timeout 60 python bench/time_small_bf16.py "old cbacd42" >> $S 2>&1
  timeout 60 python bench/time_small_bf16.py "new" >> $S 2>&1
done
cat $S
bash bench/gpu_s60_cvt_asm.sh
