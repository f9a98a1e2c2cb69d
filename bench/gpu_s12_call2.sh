#!/usr/bin/env bash
# Session 12, device call 2 (one H200): gluon_rx with three ping-pong consumers (consumers 3, 8-head programs):
# hang guard + GPU tests (the two-consumer merge was rewritten for N consumers: its ping-pong tests too), then
# timings beside the default (fp8_ds_mla and nope, 512 and 2048 tokens).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s12_call2.sh     (results in $OUT/r.tgz, log $OUT/c2.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c2.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -x -k "pingpong3" > $R/t_pp.log 2>&1
echo "pp tests rc=$?" >> $L; tail -n 4 $R/t_pp.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
for n in 512 2048; do
    timeout 120 python bench/mla_rx_bench.py --heads 8 --layouts fp8_ds_mla,fp8_ds_mla_nope --tokens $n --rep-ms 20 \
      --configs default,5/56/4/0/1/3/0/0/1/1,5/56/4/0/0/3/0/0/1/1,5/48/4/0/1/3/0/0/1/1 --out $R > $R/rx3_$n.log 2>&1
    echo "rx3 $n rc=$?" >> $L; grep -E " ms" $R/rx3_$n.log >> $L; mv $R/sparse_mla_rx_bench.json $R/s12_rx3_$n.json
    tar -czf $OUT/r.tgz -C $OUT r
  done
