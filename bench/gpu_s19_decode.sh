#!/usr/bin/env bash
# Written in session 18 after its device time ran out, NOT YET RUN (~4 min). (1) Does the decode care where its rows
# start? bench/decode_row_align.py times sparse_mla_decode (CUDA-graph replays) over the same rows packed (656 / 528 B
# a row) and padded to 32- and 128-byte-aligned strides, outputs bit for bit. Session 18's ncu profile of the 16-head
# decode counted 1.5x the ideal L2 sectors on every latent gather instruction (unexplained; L2 73% busy). PREDICTION:
# none made (if the padded caches are faster by more than the run-to-run spread, ~1%, the gather's alignment matters).
# (2) Two CTAs an SM: gluon_rx's one-consumer kernel with the launch capped at 128 registers (RxConfig maxnreg, the
# 12th field) and 2 / 3 stages (94-111 KB of shared memory at 8 heads, 86-105 KB at 16 with 2), so that two
# programs share an SM and one's start and end overlap the other's blocks, against the ping-pong default (one CTA,
# two consumers). Compile check: 0-28 B of spill (consumer 208 registers at 8-head fp8_ds_mla: 28 B; nope and 16
# heads 0-4). PREDICTION: none with confidence; session 10's one consumer at one CTA an SM was 15% slower than
# ping-pong at 8 heads (0.259 vs 0.224 ms), so two CTAs must recover more than that. GPU tests first (bit-equal to
# the one-consumer default).
#   bash bench/gpu_s19_decode.sh   (log $OUT/dr.log, results under $OUT/r; carry .peer)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/dr.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfEs \
  -k "one_consumer_two_ctas or rx_hang_guard" > $R/t_2cta.log 2>&1
T=$?
echo "two-CTA GPU tests rc=$T" >> $L; tail -n 8 $R/t_2cta.log >> $L
export PYTHONPATH=$PWD/src:$PWD/.peer
ab() {  # layout heads config name
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens 512 --heads $2 --layout $1 \
    --a env:DSATTN_RX_CONSUMERS=2 --b env:DSATTN_RX_CONSUMERS=1,env:DSATTN_RX_CONFIG=$3 \
    --name ab_s19_2cta_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab two CTAs $1 $2 heads $3 rc=$?" >> $L; tail -n 3 $R/ab_$4.log >> $L
}
if [ $T -eq 0 ]; then
  ab fp8_ds_mla 8 2/48/4/0/1/1/0/0/1/0/0/128 fp8_h8
  ab fp8_ds_mla_nope 8 3/48/4/0/1/1/0/0/1/0/0/128 nope_h8
  ab fp8_ds_mla 16 2/48/4/0/1/1/0/0/1/0/0/128 fp8_h16
  ab fp8_ds_mla_nope 16 2/48/4/0/1/1/0/0/1/0/0/128 nope_h16
fi
for lay in fp8_ds_mla fp8_ds_mla_nope; do
  timeout 120 python bench/decode_row_align.py --tokens 512 --heads 8 16 32 --layout $lay \
    --out $R/decode_row_align_s19_$lay.json >> $L 2>&1
  echo "$lay rc=$?" >> $L
done
