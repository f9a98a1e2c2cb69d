#!/usr/bin/env bash
# Session 19, device call 3 (one H200): follow-up of bench/gpu_s19_decode.sh, whose A/B at 512 tokens had gluon_rx's
# one-consumer kernel at two CTAs an SM (RxConfig maxnreg 128, 2 stages) 2.8% faster than the ping-pong default at
# 16 heads over fp8_ds_mla (0.282 -> 0.274 ms) and 4.5% over nope (0.251 -> 0.241), slower at 8 heads
# (bench/results/ab_s19_2cta_*.json). Here: (1) the same A/B at 2048 tokens, 16 heads, both layouts; (2) variants of
# the two-CTA config at 16 heads, 512 tokens (producer 40 / 56 registers, pv_depth 2); (3) gluon_rx forced at 32 heads
# against auto (gluon_ws), where session 10 measured it slower (0.463 vs 0.353); (4) issue 3's decode rows at 16
# heads with the two-CTA config (FlashMLA in the same process), 512 and 2048 tokens.
# PREDICTION: (1) 2-4% faster as at 512 tokens; (2)-(3) none with confidence.
#   bash bench/gpu_s19_2cta.sh   (log $OUT/c.log, results under $OUT/r, $OUT/r.tgz; carry .peer; ~5 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/c.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
TWO=2/48/4/0/1/1/0/0/1/0/0/128
ab() {  # layout heads tokens b-arm name
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens $3 --heads $2 --layout $1 \
    --a env:DSATTN_RX_CONSUMERS=2 --b $4 --name ab_s19_$5 --out $R > $R/ab_$5.log 2>&1
  echo "ab $1 $2 heads $3 tokens b=$4 rc=$?" >> $L; tail -n 3 $R/ab_$5.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
B2=env:DSATTN_RX_CONSUMERS=1,env:DSATTN_RX_CONFIG
ab fp8_ds_mla 16 2048 $B2=$TWO 2cta_fp8_h16_2048
ab fp8_ds_mla_nope 16 2048 $B2=$TWO 2cta_nope_h16_2048
ab fp8_ds_mla 16 512 $B2=2/40/4/0/1/1/0/0/1/0/0/128 2cta_r40_fp8_h16
ab fp8_ds_mla 16 512 $B2=2/56/4/0/1/1/0/0/1/0/0/128 2cta_r56_fp8_h16
ab fp8_ds_mla 16 512 $B2=2/48/4/0/2/1/0/0/1/0/0/128 2cta_pv2_fp8_h16
ab fp8_ds_mla 32 512 env:DSATTN_SPARSE_MLA_IMPL=gluon_rx rx_vs_ws_h32
for n in 512 2048; do
  DSATTN_RX_CONSUMERS=1 DSATTN_RX_CONFIG=$TWO timeout 90 python -m dsattn.cli bench kernels --op sparse_mla \
    --cases decode --heads 16 --tokens $n --impl auto --rounds 3 --rep-ms 20 --out $R \
    --name sparse_mla_s19_2cta_decode_$n > $R/dec_$n.log 2>&1
  echo "decode 16 heads $n tokens two CTAs rc=$?" >> $L; grep -E "dsattn:native|flashmla:" $R/dec_$n.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
done
