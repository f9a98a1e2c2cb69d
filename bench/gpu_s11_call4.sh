#!/usr/bin/env bash
# Session 11, device call 4 (one H200): the grouped prefill with fp16 P (PrefillConfig f16: the producer converts each
# landed stage to fp16 x 2^-8, one P @ V instead of P_hi V + P_lo V) at 80 producer registers (no spill; 56 spilled),
# split 1 and 2, against the default; timing builds of the f16 schedule at 64 heads; nope at 4 stages.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s11_call4.sh     (results in $OUT/r.tgz, log $OUT/c4.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c4.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
F=64/2/4/80/0/1/1
timeout 60 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_sparse_mla_prefill_gpu.py -k "hang_guard and s64_2_4_80_0_1_2" > $R/guard.log 2>&1
echo "guard rc=$?" >> $L
timeout 300 python bench/pf_schedules.py --heads 64,128,8,16,32 --tokens 1024 --specs $F,64/2/4/56/0/0/1,$F,64/2/4/80/0/1/2 \
  --profile 1,2 --out $R --name pf_f16 > $R/pf_f16.log 2>&1; echo "pf_f16 rc=$?" >> $L
grep -v "^#" $R/pf_f16.log | cut -c1-200 >> $L; tar -czf $OUT/r.tgz -C $OUT r
timeout 60 python bench/mla_rx_bench.py --heads 8 --layouts fp8_ds_mla_nope,fp8_ds_mla --tokens 512 \
  --configs 4/56/4/0/1/2/0/0/1/1,4/48/4/0/1/2/0/0/1/1,5/48/4/0/1/2/0/0/1/1 --rep-ms 25 --out $R > $R/rx_nope.log 2>&1
echo "rx nope rc=$?" >> $L; grep -E " ms" $R/rx_nope.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
