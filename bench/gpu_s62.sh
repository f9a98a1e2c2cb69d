#!/usr/bin/env bash
# Session 62's second device call (carry [".peer"] not needed): session 60's bench/gpu_s60_cvt_asm.sh (gluon_prefill's
# configs cvt_asm / sffma: their GPU tests and `dsattn bench ab` against the default), then gluon_small's cvt_asm timed
# again (bench/time_small_bf16.py; session 62's first call read 1.075x / 1.077x / 1.037x at 8 / 16 / 32 heads on an
# H100) and its GPU tests with their prints. Everything comes back in two files ($OUT/cvt.tgz, $OUT/small.log): the
# device tool returns only a few files a call.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s62.sh
set -u
bash bench/gpu_s60_cvt_asm.sh > /dev/null 2>&1
S=$OUT/small.log; export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $S
timeout 120 python -m pytest -q -p no:cacheprovider -rfE -s tests/gpu/test_sparse_mla_gpu.py \
  -k "small_cvt_asm and gluon and not gluon_ws and not gluon64" 2>&1 | grep -E "passed|failed|Error|cvt_asm|finite" \
  | tail -n 16 >> $S
timeout 120 python bench/time_small_bf16.py 5 $OUT/r/small_cvt_asm_time.json >> $S 2>&1
echo "time rc=$?" >> $S
tar -czf $OUT/cvt.tgz -C $OUT r cvt.log && rm -rf $OUT/r
cat $OUT/cvt.log $S
