#!/usr/bin/env bash
# (Ran at 3d4dcc3; its vraw parts need that tree: vraw was removed in 2c11301.)
# Session 60, call 3: gluon_rx config vpair (V's fp8 bytes paired by key before cvt.rn.f16x2.e4m3x2: the consumer loop
# 876 -> 812 SASS instructions at 8-head nope programs, PRMT 128 -> 64, nothing added) against the defaults at 8 / 16 /
# 32 heads; what vraw's spillfix costs (vraw 1 without it spills 36-84 B; spillfix 1 alone at 8 heads); the vraw
# group-scale tests (fixed amax) and the vpair bit-equality test.
# PREDICTION: vpair bit-equal; 1.00-1.04x at 8 heads (timing build 3 took ~1.8x as many instructions out for
# 2.5-6%), less at 32 heads (gluon_rx's 32-head consumers wait more on wgmma). spillfix 1 alone at 8-head nope:
# 0.96-0.99x (session 20: 0.959x), so vraw's ~0.98-1.01x hides a small gain under it.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s60_vpair.sh
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_SPARSE_MLA_IMPL DSATTN_WS_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/vpair.log
nvidia-smi --query-gpu=name --format=csv,noheader > $L; echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
pack() { tar -czf $OUT/vpair.tgz -C $OUT r vpair.log; }
t0=$SECONDS
timeout 200 python -m pytest -q -p no:cacheprovider -rfE -s tests/gpu/test_sparse_mla_rx_gpu.py \
  -k "hang_guard or vraw_group or vpair" > $R/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s" >> $L; grep -E "passed|failed|vraw group|Error|error" $R/tests.log | tail -n 30 >> $L; pack
ab() {  # name layout tokens heads config
  local t0=$SECONDS
  timeout 120 python -m dsattn.cli bench ab --op sparse_mla_decode --heads $4 --layout $2 --tokens $3 \
    --b "env:DSATTN_SPARSE_MLA_IMPL=gluon_rx,env:DSATTN_RX_CONFIG=$5" --name $1 --out $R > $R/$1.log 2>&1
  echo "== $1 ($2, $3 tokens, $4 heads; A default, B $5) rc=$? $((SECONDS - t0)) s" >> $L
  tail -n 4 $R/$1.log | cut -c1-20,150- >> $L; pack
}
NP="stages=5;producer_regs=48;consumers=2;hp8=1;pingpong=1;idxpf=2;sraw=1"
F8="stages=4;producer_regs=56;consumers=2;hp8=1;pingpong=1"
S16="stages=2;producer_regs=48;consumers=1;hp8=1;maxnreg=128"
P32="producer_regs=40;consumers=2;hp8=1;pingpong=1;spillfix=1;pv_depth=0"
ab ab_s60_vpair_nope_512 fp8_ds_mla_nope 512 8 "$NP;vpair=1"
ab ab_s60_vpair_fp8_512 fp8_ds_mla 512 8 "$F8;vpair=1"
ab ab_s60_vpair_nope_2048 fp8_ds_mla_nope 2048 8 "$NP;vpair=1"
ab ab_s60_vpair_fp8_2048 fp8_ds_mla 2048 8 "$F8;vpair=1"
ab ab_s60_vpair16_fp8_512 fp8_ds_mla 512 16 "$S16;vpair=1"
ab ab_s60_vpair16_nope_512 fp8_ds_mla_nope 512 16 "$S16;vpair=1"
ab ab_s60_vpair32_fp8_512 fp8_ds_mla 512 32 "$P32;stages=4;vpair=1"
ab ab_s60_vpair32_nope_512 fp8_ds_mla_nope 512 32 "$P32;stages=5;vpair=1"
ab ab_s60_spillfix_nope_512 fp8_ds_mla_nope 512 8 "$NP;spillfix=1"
ab ab_s60_vraw_sf0_nope_512 fp8_ds_mla_nope 512 8 "$NP;vraw=1"
cat $L
