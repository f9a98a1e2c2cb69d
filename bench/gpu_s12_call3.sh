#!/usr/bin/env bash
# Session 12, device call 3 (one H200): gluon_rx qsplit (S's latent products in e4m3 straight from the stored bytes, q
# as two e4m3 pieces): GPU tests, then timings beside the default (8 heads fp8_ds_mla / nope, 512 / 2048 tokens;
# 16 heads: ping-pong + qsplit beside the in-step default).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s12_call3.sh     (results in $OUT/r.tgz, log $OUT/c3.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c3.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 170 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -k "qsplit" -s > $R/t_qs.log 2>&1
echo "qsplit tests rc=$?" >> $L; grep -E "passed|failed|gluon_rx vs" $R/t_qs.log | tail -n 24 >> $L
tar -czf $OUT/r.tgz -C $OUT r
for n in 512 2048; do
  timeout 100 python bench/mla_rx_bench.py --heads 8 --layouts fp8_ds_mla,fp8_ds_mla_nope --tokens $n --rep-ms 20 \
    --configs default,5/56/4/0/1/2/0/0/1/1/1,5/64/4/0/1/2/0/0/1/1/1 --out $R > $R/rxq_$n.log 2>&1
  echo "rxq $n rc=$?" >> $L; grep -E " ms" $R/rxq_$n.log >> $L; mv $R/sparse_mla_rx_bench.json $R/s12_rxq_$n.json
  tar -czf $OUT/r.tgz -C $OUT r
done
timeout 80 python bench/mla_rx_bench.py --heads 16 --layouts fp8_ds_mla --tokens 512 --rep-ms 20 \
  --configs default,5/56/4/0/1/2/0/0/0/1/1 --out $R > $R/rxq16.log 2>&1
echo "rxq16 rc=$?" >> $L; grep -E " ms" $R/rxq16.log >> $L; mv $R/sparse_mla_rx_bench.json $R/s12_rxq16.json
tar -czf $OUT/r.tgz -C $OUT r
