#!/usr/bin/env bash
# Session 13, device call 6 (one H200): 16-head ping-pong producer registers 48 / 40 and 3 stages beside the default (56),
# then issue 3's 16-head decode rows (512 / 2048 tokens, beside FlashMLA) with the default (producer registers 48 since
# the first run of this script: bench kernels takes DSATTN_RX_CONFIG as given, and 5 stages of fp8_ds_mla did not fit).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s13_call6.sh      (log $OUT/c6.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/c6.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 110 python bench/mla_rx_bench.py --heads 16 --layouts fp8_ds_mla,fp8_ds_mla_nope --tokens 512 --rep-ms 20 \
  --configs default,5/48/4/0/1/2/0/0/1/1/1,3/48/4/0/1/2/0/0/1/1/1,5/40/4/0/1/2/0/0/1/1/1 --out $R > $R/rx16c.log 2>&1
echo "rx16c rc=$?" >> $L; grep -E " ms|FAILED" $R/rx16c.log >> $L
[ -f $R/sparse_mla_rx_bench.json ] && mv $R/sparse_mla_rx_bench.json $R/s13_rx16c.json
tar -czf $OUT/r.tgz -C $OUT r
for n in 512 2048; do
  timeout 90 python -m dsattn.cli bench kernels --op sparse_mla --cases decode \
    --heads 16 --tokens $n --impl auto --rep-ms 10 --out $R --name sparse_mla_s13_decode_h16_r48_$n \
    > $R/table_h16_$n.log 2>&1
  echo "table h16 $n rc=$?" >> $L; grep -E "dsattn:native|flashmla" $R/table_h16_$n.log >> $L
done
tar -czf $OUT/r.tgz -C $OUT r
