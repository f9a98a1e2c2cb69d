#!/usr/bin/env bash
# Session 20, device call 6 (one H200): the 8-head decode rows (fp8_ds_mla and nope, 512 and 2048 tokens, FlashMLA in
# the same process, 3 alternating rounds) after the nope default took producer 48 registers (call 5), and the rx GPU
# tests of the nope defaults.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s20_rows8.sh   (log $OUT/r8.log, results under $OUT/r, $OUT/r.tgz; ~2 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/r8.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
for t in 512 2048; do
  timeout 90 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8 --tokens $t \
    --impl auto --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s20_rows8_$t > $R/rows8_$t.log 2>&1
  echo "decode 8 heads $t rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/rows8_$t.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
done
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfEs \
  -k "auto and nope and (default or sraw or idxpf or hang)" > $R/t_rx.log 2>&1
echo "rx GPU tests (auto, nope) rc=$?" >> $L; tail -n 3 $R/t_rx.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
