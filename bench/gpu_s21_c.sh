#!/usr/bin/env bash
# Session 21, device call 3 (one H200): issue 3's decode rows at the new defaults (gluon_rx vst 1 since call 1,
# gluon64 vst 1 since call 2), FlashMLA in the same process, 3 alternating rounds a row, 512 and 2048 tokens, every
# head count, both fp8 layouts; then the gluon_rx GPU tests of the defaults ("auto") and the dispatcher's decode tests.
# PREDICTION (from the A/Bs, bench/logs/s21_vst.log, s21_b.log): decode 16 heads 0.240 -> ~0.213 ms (2.0-2.1x of
# FlashMLA padded to 64; issue 3 asks 2x), 8 heads ~2.2x, 64 / 128 heads ~1.0x / 0.93x, 32 heads unchanged (1.25x),
# nope at 8 heads ~1.13x of fp8_ds_mla (both gained 5-6%).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s21_c.sh   (log $OUT/c.log, results under $OUT/r, $OUT/r.tgz; ~8 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS \
  DSATTN_WS_CONFIG DSATTN_G64_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/c.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
run() {  # tokens timeout
  timeout $2 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16,32,64,128 --tokens $1 \
    --impl auto --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s21_decode_$1 > $R/decode_$1.log 2>&1
  echo "decode $1 rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/decode_$1.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
run 512 130
run 2048 150
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfE -k "auto" > $R/t_rx.log 2>&1
echo "rx GPU tests (auto) rc=$?" >> $L; tail -n 4 $R/t_rx.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 110 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE -k "decode and not triton" \
  > $R/t_dec.log 2>&1
echo "dispatcher decode GPU tests rc=$?" >> $L; tail -n 4 $R/t_dec.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
