#!/usr/bin/env bash
# Session 12, device call 4 (one H200): helper H's fast launch path (host-time breakdown; the benchmark and GPU
# tests under DSATTN_FAST_LAUNCH=check), the gluon_rx GPU tests that call 1 cut off, and Nsight Compute's warp-state
# and memory sections of the 8-head decode (fp8_ds_mla, nope) and 64-head prefill kernels (one launch each).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s12_call4.sh     (results in $OUT/r.tgz, log $OUT/c4.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c4.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 100 python bench/host_overhead.py --breakdown > $R/h_breakdown.log 2>&1; echo "breakdown rc=$?" >> $L
tail -n 40 $R/h_breakdown.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
DSATTN_FAST_LAUNCH=check timeout 60 python bench/host_overhead.py > $R/h_check.log 2>&1; echo "check rc=$?" >> $L
tail -n 6 $R/h_check.log >> $L
(DSATTN_FAST_LAUNCH=check timeout 170 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x \
   -k "hang_guard or heads or chunks or duplicates or odd_topk" > $R/h_t_pf.log 2>&1; echo "rc=$?" >> $R/h_t_pf.log) &
(DSATTN_FAST_LAUNCH=check timeout 170 python -m pytest tests/gpu/test_sparse_mla_gpu.py $P -x \
   -k "(triton or gluon) and not gluon_ws and not gluon64" > $R/h_t_dec.log 2>&1; echo "rc=$?" >> $R/h_t_dec.log) &
(timeout 170 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -x -k "not pingpong3 and not hang_guard" \
   > $R/t_rx_rest.log 2>&1; echo "rc=$?" >> $R/t_rx_rest.log) &
wait
for f in $R/h_t_pf.log $R/h_t_dec.log $R/t_rx_rest.log; do echo "== $f" >> $L; grep -E "passed|failed|FAILED|Error|rc=" $f | tail -n 6 >> $L; done
tar -czf $OUT/r.tgz -C $OUT r
if command -v ncu > /dev/null; then
  for c in decode-fp8-8:rx2 decode-nope-8:rx2 prefill-64:prefill_kernel; do
    name=${c%%:*}; k=${c##*:}
    timeout 120 ncu --clock-control none -k regex:$k -s 1 -c 1 --section SpeedOfLight --section WarpStateStats \
      --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy \
      python bench/ncu_cases.py --case $name > $R/ncu_$name.log 2>&1
    echo "ncu $name rc=$?" >> $L; tar -czf $OUT/r.tgz -C $OUT r
  done
else
  echo "no ncu" >> $L
fi
