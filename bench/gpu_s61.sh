#!/usr/bin/env bash
# Written in session 61 (no device came; not run yet): gluon_small's GluonConfig.cvt_asm (bf16 rows' V converted by
# _bf16_to_f16_scaled, moved from gluon_prefill, where it is config cvt_asm): its GPU tests (test_small_cvt_asm*, at
# 8 / 32 heads, under DSATTN_SPARSE_MLA_IMPL=gluon) and its time against cvt_asm 0 (bench/time_small_bf16.py, 3
# alternating rounds, 8 / 16 / 32 heads); then session 60's bench/gpu_s60_cvt_asm.sh (prefill cvt_asm and sffma:
# tests, kernel probes, A/Bs).
# PREDICTION: right; gluon_small's bf16 decode within +-2% (its conversion is one pass over a stage a block). If right
# and not slower: cvt_asm 1 the default in launch.gluon_config and in gluon_prefill's prefill_config.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s61.sh
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG
mkdir -p $OUT/r; S=$OUT/small.log
nvidia-smi --query-gpu=name --format=csv,noheader > $S
t0=$SECONDS
timeout 200 python -m pytest -q -p no:cacheprovider -rfE -s tests/gpu/test_sparse_mla_gpu.py \
  -k "small_cvt_asm and gluon and not gluon_ws and not gluon64" \
  > $OUT/r/small_tests.log 2>&1
echo "small tests rc=$? $((SECONDS - t0)) s" >> $S; grep -E "passed|failed|Error" $OUT/r/small_tests.log | tail -n 12 >> $S
timeout 120 python bench/time_small_bf16.py 3 $OUT/r/small_cvt_asm_time.json >> $S 2>&1
echo "time rc=$?" >> $S
cat $S
bash bench/gpu_s60_cvt_asm.sh
