#!/usr/bin/env bash
# Session 13, device call 1 (one H200): gluon_prefill's register-ring producer (PrefillConfig ring 2: the producer
# loads units of 16 rows into registers, converts to fp16 x 2^-8 there and stores straight into the stage, instead of
# cp.async + an in-place conversion pass): hang guard, timing beside the default (+ timing builds of the ring), then
# its GPU tests (bit-identical to the default's outputs).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s13_call1.sh     (results in $OUT/r.tgz, log $OUT/c1.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c1.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
RING=64/2/4/120/0/1/1/2
timeout 100 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "hang_guard and 1_2" \
  > $R/t_ring_guard.log 2>&1; echo "ring guard rc=$?" >> $L; tail -n 3 $R/t_ring_guard.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
if grep -q "passed" $R/t_ring_guard.log && ! grep -q "failed" $R/t_ring_guard.log; then
  timeout 240 python bench/pf_schedules.py --heads 16,64,128 --tokens 1024 \
    --specs $RING,64/2/4/80/0/1/1,64/2/4/128/0/1/1/2,32/4/4/120/0/1/1/2 --profile 0,1,2 --rep-ms 10 --out $R \
    --name s13_pf_ring > $R/pf_ring.log 2>&1
  echo "pf_ring rc=$?" >> $L; grep -vE "^\s*$" $R/pf_ring.log | tail -n 24 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
  timeout 170 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "ring_matches" > $R/t_ring.log 2>&1
  echo "ring tests rc=$?" >> $L; grep -E "passed|failed|FAILED|Error" $R/t_ring.log | tail -n 8 >> $L
fi
tar -czf $OUT/r.tgz -C $OUT r
