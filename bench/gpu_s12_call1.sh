#!/usr/bin/env bash
# Session 12, device call 1 (one H200): (a) hang guard of the late-conversion prefill schedule (f16 2) and its timing
# beside the default (+ timing builds), (b) gluon_rx: half of the e4m3 conversions by integer operations (alu 1 / 2)
# at 8 heads (fp8_ds_mla, nope) and 16 heads (in step, ping-pong), (c) GPU tests: session 11's Gluon refactors
# (gluon_rx, gluon_ws: not run on a GPU since) and the late schedule over the whole prefill file, (d) host time of
# the public calls after the dispatcher bypass.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s12_call1.sh     (results in $OUT/r.tgz, log $OUT/c1.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c1.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
LATE=64/2/4/80/0/2/1
timeout 90 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "hang_guard and s64_2_4_80_0_2_1" \
  > $R/t_late_guard.log 2>&1; echo "late guard rc=$?" >> $L; tail -n 3 $R/t_late_guard.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
if grep -q "passed" $R/t_late_guard.log && ! grep -q "failed" $R/t_late_guard.log; then
  timeout 120 python bench/pf_schedules.py --heads 16,64,128 --tokens 1024 --specs $LATE,64/2/4/80/0/1/1 \
    --profile 0,1,2 --rep-ms 10 --out $R --name s12_pf_late > $R/pf_late.log 2>&1
  echo "pf_late rc=$?" >> $L; grep -vE "^\s*$" $R/pf_late.log | tail -n 16 >> $L
fi
tar -czf $OUT/r.tgz -C $OUT r
timeout 110 python bench/mla_rx_bench.py --heads 8 --layouts fp8_ds_mla,fp8_ds_mla_nope --tokens 512 --rep-ms 20 \
  --configs default,5/56/4/0/1/2/1/0/1/1,5/56/4/0/1/2/2/0/1/1 --out $R > $R/rx8.log 2>&1
echo "rx8 rc=$?" >> $L; grep -E " ms" $R/rx8.log >> $L; mv $R/sparse_mla_rx_bench.json $R/s12_rx8.json 2>/dev/null
tar -czf $OUT/r.tgz -C $OUT r
timeout 110 python bench/mla_rx_bench.py --heads 16 --layouts fp8_ds_mla --tokens 512 --rep-ms 20 \
  --configs default,5/64/4/0/1/2/1/0/1/0,5/64/4/0/1/2/2/0/1/0,5/56/4/0/1/2/0/0/1/1,5/56/4/0/1/2/1/0/1/1 \
  --out $R > $R/rx16.log 2>&1
echo "rx16 rc=$?" >> $L; grep -E " ms" $R/rx16.log >> $L; mv $R/sparse_mla_rx_bench.json $R/s12_rx16.json 2>/dev/null
tar -czf $OUT/r.tgz -C $OUT r
(timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -x > $R/t_rx.log 2>&1; echo "rc=$?" >> $R/t_rx.log) &
(DSATTN_PF_CONFIG=$LATE timeout 150 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x \
   -k "not hang_guard and not configs" > $R/t_pf_late.log 2>&1; echo "rc=$?" >> $R/t_pf_late.log) &
(timeout 150 python -m pytest tests/gpu/test_sparse_mla_gpu.py $P -x -k "gluon_ws" > $R/t_ws.log 2>&1; \
   echo "rc=$?" >> $R/t_ws.log) &
wait
for f in $R/t_rx.log $R/t_pf_late.log $R/t_ws.log; do echo "== $f" >> $L; grep -E "passed|failed|FAILED|Error|rc=" $f | tail -n 8 >> $L; done
tar -czf $OUT/r.tgz -C $OUT r
timeout 60 python bench/host_overhead.py > $R/host.log 2>&1; echo "host rc=$?" >> $L; tail -n 12 $R/host.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
