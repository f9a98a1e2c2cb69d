#!/usr/bin/env bash
# Written in session 18 after its device time ran out, NOT YET RUN (~1 min): does the decode care where its rows
# start? bench/decode_row_align.py times sparse_mla_decode (CUDA-graph replays) over the same rows packed (656 / 528 B
# a row) and padded to 32- and 128-byte-aligned strides, outputs bit for bit. Session 18's ncu profile of the 16-head
# decode counted 1.5x the ideal L2 sectors on every latent gather instruction (unexplained; L2 73% busy). PREDICTION:
# none made (if the padded caches are faster by more than the run-to-run spread, ~1%, the gather's alignment matters).
#   bash bench/gpu_s19_decode.sh   (log $OUT/dr.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/dr.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
for lay in fp8_ds_mla fp8_ds_mla_nope; do
  timeout 120 python bench/decode_row_align.py --tokens 512 --heads 8 16 32 --layout $lay \
    --out $R/decode_row_align_s19_$lay.json >> $L 2>&1
  echo "$lay rc=$?" >> $L
done
