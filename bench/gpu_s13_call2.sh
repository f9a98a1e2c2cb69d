#!/usr/bin/env bash
# Session 13, device call 2 (one H200): gluon_prefill's paired consumer (PrefillConfig split 2: both warpgroups compute
# S + softmax of alternate blocks, exchange row maxima and P, each adds both blocks' P V into its half of O): hang guard,
# timing beside the default (+ timing builds), s_q 8192 at 16 heads, then its GPU tests.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s13_call2.sh     (results in $OUT/r.tgz, log $OUT/c2.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c2.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
PAIR=64/2/4/80/0/1/2
timeout 100 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "hang_guard and 0_1_2" \
  > $R/t_pair_guard.log 2>&1; echo "pair guard rc=$?" >> $L; tail -n 3 $R/t_pair_guard.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
if grep -q "passed" $R/t_pair_guard.log && ! grep -q "failed" $R/t_pair_guard.log; then
  timeout 200 python bench/pf_schedules.py --heads 16,32,64,128 --tokens 1024 \
    --specs $PAIR,64/2/4/80/0/1/1,32/4/4/80/0/1/2 --profile 0,1,2 --rep-ms 10 --out $R \
    --name s13_pf_pair > $R/pf_pair.log 2>&1
  echo "pf_pair rc=$?" >> $L; grep -vE "^\s*$" $R/pf_pair.log | tail -n 24 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
  timeout 90 python bench/pf_schedules.py --heads 16 --tokens 8192 --specs $PAIR,64/2/4/80/0/1/1 --rep-ms 10 --out $R \
    --name s13_pf_pair_8192 > $R/pf_pair_8192.log 2>&1
  echo "pf_pair_8192 rc=$?" >> $L; grep -vE "^\s*$" $R/pf_pair_8192.log | tail -n 4 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
  timeout 170 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "pf_pair or (peaked and 0_1_2)" \
    > $R/t_pair.log 2>&1
  echo "pair tests rc=$?" >> $L; grep -E "passed|failed|FAILED|Error" $R/t_pair.log | tail -n 8 >> $L
fi
tar -czf $OUT/r.tgz -C $OUT r
