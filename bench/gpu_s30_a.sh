#!/usr/bin/env bash
# Session 30, call 1: gluon_prefill after the N-split consumer / overlap 1 / producer_warps removal. Hang guard, then
# the whole prefill GPU test file (sharded), then one A/B through the ';'-in-env path of `dsattn bench ab`.
set -u
export PYTHONPATH=src
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL
L=$OUT/s30_a.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv > $L
timeout 150 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_sparse_mla_prefill_gpu.py -k hang_guard > $OUT/s30_guard.log 2>&1
echo "hang guard rc=$? $(tail -n 1 $OUT/s30_guard.log)" >> $L
N=8 LIMIT=330 bash bench/gpu_tests_sharded.sh $OUT/s30_a_tests tests/gpu/test_sparse_mla_prefill_gpu.py
cat $OUT/s30_a_tests/summary.log >> $L
timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens 1024 --heads 32 \
  --b "env:DSATTN_PF_CONFIG=f16=0;cvt_pipe=0;producer_regs=56" --name ab_s30_bf16_h32 --out $OUT > $OUT/ab_s30_bf16_h32.log 2>&1
echo "ab default vs bf16 schedule (32 heads, s_q 1024) rc=$?" >> $L; tail -n 4 $OUT/ab_s30_bf16_h32.log >> $L
