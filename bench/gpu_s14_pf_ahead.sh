#!/usr/bin/env bash
# For the next device session (written in session 13, NOT YET RUN): gluon_prefill overlap 2 (_wg_s_ahead: warpgroup 0's
# softmax of block b + 1 runs under S(b + 2) and P V(b), every wgmma retired by a full wait in its iteration; sm_90a
# compile check: no spill, no wgmma serialization at 32/4/4/80/2/1/1): hang guard, timing beside the default and the
# same blocks without overlap (+ timing builds), then its GPU tests (bit-identical to 32/4/4/80/0/1/1).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s14_pf_ahead.sh      (log $OUT/pa.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/pa.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
AHEAD=32/4/4/80/2/1/1
timeout 100 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "hang_guard and 2_1_1" \
  > $R/t_ahead_guard.log 2>&1; echo "guard rc=$?" >> $L; tail -n 3 $R/t_ahead_guard.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
if grep -q "passed" $R/t_ahead_guard.log && ! grep -q "failed" $R/t_ahead_guard.log; then
  timeout 200 python bench/pf_schedules.py --heads 16,32,64,128 --tokens 1024 \
    --specs $AHEAD,64/2/4/80/0/1/1,32/4/4/80/0/1/1,32/4/4/80/1/1/1 --profile 0,1,2 --rep-ms 10 --out $R \
    --name s14_pf_ahead > $R/pf_ahead.log 2>&1
  echo "pf_ahead rc=$?" >> $L; grep -vE "^\s*$" $R/pf_ahead.log | tail -n 24 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
  timeout 200 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "pf_ahead or 2_1_1" > $R/t_ahead.log 2>&1
  echo "ahead tests rc=$?" >> $L; grep -E "passed|failed|FAILED|Error" $R/t_ahead.log | tail -n 8 >> $L
fi
tar -czf $OUT/r.tgz -C $OUT r
