#!/usr/bin/env bash
# Session 13, device call 5 (one H200): the 16-head ping-pong default's neighbours (producer registers, pv_depth,
# stages; sm_90a compile check: no spill, pv_depth 2 serializes wgmma), then GPU tests of the new default: split-K at
# 16 heads, odd top-k, the 16-head spillfix test, and the backend tests (auto path).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s13_call5.sh      (log $OUT/c5.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/c5.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 120 python bench/mla_rx_bench.py --heads 16 --layouts fp8_ds_mla,fp8_ds_mla_nope --tokens 512 --rep-ms 20 \
  --configs default,4/48/4/0/1/2/0/0/1/1/1,4/72/4/0/1/2/0/0/1/1/1,4/56/4/0/0/2/0/0/1/1/1,3/56/4/0/1/2/0/0/1/1/1 \
  --out $R > $R/rx16b.log 2>&1
echo "rx16b rc=$?" >> $L; grep -E " ms|FAILED" $R/rx16b.log >> $L
[ -f $R/sparse_mla_rx_bench.json ] && mv $R/sparse_mla_rx_bench.json $R/s13_rx16b.json
tar -czf $OUT/r.tgz -C $OUT r
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -x \
  -k "c2 and (split_k or odd_topk or pingpong16 or page_sizes)" > $R/t_rx16.log 2>&1
echo "rx tests rc=$?" >> $L; grep -E "passed|failed|FAILED|Error" $R/t_rx16.log | tail -n 8 >> $L
timeout 120 python -m pytest tests/gpu/test_backend_gpu.py $P -x > $R/t_backend.log 2>&1
echo "backend tests rc=$?" >> $L; grep -E "passed|failed|FAILED|Error" $R/t_backend.log | tail -n 8 >> $L
tar -czf $OUT/r.tgz -C $OUT r
