#!/usr/bin/env bash
# Session 13, device call 3 (one H200): helper C3's script (three ping-pong consumers without spills, spillfix), then
# ping-pong consumers over 16-head programs with spillfix 1 (no spill at sm_90a, 152 B without) beside the 16-head
# default (two consumers in step): GPU tests, then timings at 512 tokens, fp8_ds_mla and nope.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s13_call3.sh      (log $OUT/c3.log, results under $OUT/r)
set -u
bash bench/gpu_s13_c3.sh
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; L=$OUT/c3.log
P="-q -p no:cacheprovider -rfEs"
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -s -k "pingpong16_spillfix" > $R/t_pp16.log 2>&1
echo "pp16 tests rc=$?" >> $L; grep -E "passed|failed|error" $R/t_pp16.log | tail -n 6 >> $L
timeout 150 python bench/mla_rx_bench.py --heads 16 --layouts fp8_ds_mla,fp8_ds_mla_nope --tokens 512 --rep-ms 20 \
  --configs default,4/56/4/0/1/2/0/0/1/1/1,4/64/4/0/1/2/0/0/1/1/1,5/64/4/0/1/2/0/0/1/1/1 --out $R > $R/rx16.log 2>&1
echo "rx16 rc=$?" >> $L; grep -E " ms|FAILED" $R/rx16.log >> $L
[ -f $R/sparse_mla_rx_bench.json ] && mv $R/sparse_mla_rx_bench.json $R/s13_rx16.json
tar -czf $OUT/r.tgz -C $OUT r
