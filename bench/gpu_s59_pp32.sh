#!/usr/bin/env bash
# Session 59: gluon_rx's ping-pong consumers over 32-head programs (consumer 1's O^T handed over in the raw latent
# stages, so 4 / 5 stages fit; row sums reduced every block; compile check: no wgmma serialization, 44 + 92 B of
# spills over fp8_ds_mla at producer 40, 4 B over nope). 1: its GPU test (hang-guarded by the time limit); 2: A/B
# against the default (gluon_ws) at 32 heads. Ran at e7318ee (fp8_ds_mla 0.969x / 1.009x at 512 / 2048 tokens, nope
# 1.088x at 512) and again at 52eed7b, where wgmma reads the RoPE stage (fp8_ds_mla's spills 136 -> 4 B).
# PREDICTION: right; if the 32-head decode is held by gluon_ws's fp16 tiles (shared-memory traffic ~365 KB a block)
# the register operands take it from 0.339 ms (H100) to ~0.28-0.31 (1.1-1.2x); spills or the doubled wgmma N may eat it.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s59_pp32.sh
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_SPARSE_MLA_IMPL DSATTN_WS_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/pp32.log
nvidia-smi --query-gpu=name --format=csv,noheader > $L; echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
pack() { tar -czf $OUT/pp32.tgz -C $OUT r pp32.log; }
t0=$SECONDS
timeout ${TLIMIT:-200} python -m pytest -q -p no:cacheprovider -rfE -s -x tests/gpu/test_sparse_mla_rx_gpu.py \
  -k "hang_guard or pingpong32" > $R/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s" >> $L; grep -E "passed|failed|gluon_rx vs|Error|error" $R/tests.log | tail -n 12 >> $L; pack
PP="env:DSATTN_SPARSE_MLA_IMPL=gluon_rx,env:DSATTN_RX_CONFIG=consumers=2;pingpong=1;spillfix=1;pv_depth=0;producer_regs=40"
ab() {  # name layout tokens stages
  local t0=$SECONDS
  timeout 120 python -m dsattn.cli bench ab --op sparse_mla_decode --heads 32 --layout $2 --tokens $3 \
    --b "$PP;stages=$4" --name $1 --out $R > $R/$1.log 2>&1
  echo "== $1 ($2, $3 tokens, stages $4; A default, B ping-pong 32) rc=$? $((SECONDS - t0)) s" >> $L
  tail -n 5 $R/$1.log >> $L; pack
}
ab ab_s59_pp32_fp8_512 fp8_ds_mla 512 4
ab ab_s59_pp32_nope_512 fp8_ds_mla_nope 512 5
ab ab_s59_pp32_fp8_2048 fp8_ds_mla 2048 4
cat $L
