#!/usr/bin/env bash
# Session 32: does the 16-head decode's launch choice still hold when no row is gathered twice a call? `dsattn bench
# ab` of the default (two one-consumer CTAs an SM) against ping-pong (DSATTN_RX_CONSUMERS=2) and idxpf 2, at 2048
# tokens over an 8,388,608-slot pool (5.5 GB: ~0.5 gathers a slot a call) and over the usual 131072-slot pool.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s32_ab.sh     (log $OUT/ab.log, results $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/ab.log
D16='stages=2;producer_regs=48;consumers=1;hp8=1;maxnreg=128'
ab() {  # name slots layout heads tokens arm-B
  timeout 120 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens $5 --heads $4 --layout $3 --slots $2 \
    --b "$6" --name ab_s32_$1 --out $R > $R/$1.log 2>&1
  echo "== $1 ($3, $4 heads, $5 tokens, $2 slots; B $6) rc=$?" >> $L; tail -n 3 $R/$1.log | head -n 2 >> $L
}
for s in 8388608 131072; do
  ab pp16_$s $s fp8_ds_mla 16 2048 env:DSATTN_RX_CONSUMERS=2
  ab idxpf16_$s $s fp8_ds_mla 16 2048 "env:DSATTN_RX_CONFIG=$D16;idxpf=2"
done
