#!/usr/bin/env bash
# Session 12, final device call (one H200): GPU tests of the gluon_rx / gluon_ws / gluon64 launches through the fast
# launch path (DSATTN_FAST_LAUNCH=check), host time a call, issue 3's decode 512 / prefill 1024 tables (eager,
# alternating rounds, FlashMLA in the same process) and the head-dispatch calibration as CUDA-graph replays.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s12_final.sh     (results in $OUT/r.tgz, log $OUT/final.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/final.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
(DSATTN_FAST_LAUNCH=check timeout 140 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -x \
   -k "pingpong or layouts_heads or split_k" > $R/t_rx.log 2>&1; echo "rc=$?" >> $R/t_rx.log) &
(DSATTN_FAST_LAUNCH=check timeout 140 python -m pytest tests/gpu/test_sparse_mla_gpu.py $P -x \
   -k "gluon64 or gluon_ws" > $R/t_ws64.log 2>&1; echo "rc=$?" >> $R/t_ws64.log) &
wait
for f in $R/t_rx.log $R/t_ws64.log; do echo "== $f" >> $L; grep -E "passed|failed|FAILED|Error|rc=" $f | tail -n 6 >> $L; done
tar -czf $OUT/r.tgz -C $OUT r
timeout 60 python bench/host_overhead.py > $R/host.log 2>&1; echo "host rc=$?" >> $L; tail -n 5 $R/host.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 80 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16,32,64,128 --tokens 512 \
  --impl auto --rep-ms 10 --out $R --name sparse_mla_s12_decode_512 > $R/table_decode_512.log 2>&1
echo "decode table rc=$?" >> $L; grep -E "^ *decode" $R/table_decode_512.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
timeout 90 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32,64,128 --tokens 1024 \
  --impl auto --rep-ms 10 --out $R --name sparse_mla_s12_prefill_1024 > $R/table_prefill_1024.log 2>&1
echo "prefill table rc=$?" >> $L; grep -E "^ *prefill" $R/table_prefill_1024.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
timeout 200 python -m dsattn.cli calibrate --graph --rep-ms 5 --out $R/calibration_h200.json > $R/calibrate.log 2>&1
echo "calibrate rc=$?" >> $L; tail -n 4 $R/calibrate.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
