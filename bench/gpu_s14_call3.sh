#!/usr/bin/env bash
# Session 14, device call 3 (one H200): fp8_ds_mla_nope at 8-head programs with 6 raw stages (fits: 229832 B of
# shared memory at sm_90a, no spill; rx_config stops at 5) and with L2 prefetch of rows, beside the default, at 512
# and 2048 tokens, with fp8_ds_mla's default at 8 heads for the nope / fp8 ratio (issue 3: >= 1.15x).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s14_call3.sh      (log $OUT/c3.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/c3.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
for n in 512 2048; do
  if [ $n = 512 ]; then C=default,6/56/4/0/1/2/0/0/1/1/0,6/48/4/0/1/2/0/0/1/1/0,6/64/4/0/1/2/0/0/1/1/0,5/56/4/1/1/2/0/0/1/1/0,6/56/4/1/1/2/0/0/1/1/0
  else C=default,6/56/4/0/1/2/0/0/1/1/0,6/48/4/0/1/2/0/0/1/1/0; fi
  timeout 150 python bench/mla_rx_bench.py --heads 8 --layouts fp8_ds_mla_nope --tokens $n --rep-ms 20 \
    --configs $C --out $R > $R/nope_$n.log 2>&1
  echo "nope $n rc=$?" >> $L; grep -E " ms|FAILED|Error" $R/nope_$n.log >> $L
  [ -f $R/sparse_mla_rx_bench.json ] && mv $R/sparse_mla_rx_bench.json $R/s14_nope_$n.json
  timeout 60 python bench/mla_rx_bench.py --heads 8 --layouts fp8_ds_mla --tokens $n --rep-ms 20 \
    --configs default --out $R > $R/fp8_$n.log 2>&1
  echo "fp8 $n rc=$?" >> $L; grep -E " ms|FAILED|Error" $R/fp8_$n.log >> $L
  [ -f $R/sparse_mla_rx_bench.json ] && mv $R/sparse_mla_rx_bench.json $R/s14_fp8_$n.json
  tar -czf $OUT/r.tgz -C $OUT r
done
