#!/usr/bin/env bash
# (vraw was removed after this session's calls 2-3: the script runs at d0cea7e .. 3d4dcc3 only.)
# Session 60: gluon_rx config vraw (O^T's A operand from the unscaled fp8 values, 4-byte loads paired by key before
# cvt; the group scales folded into four P^T buffers, one accumulator a latent group) on the ping-pong consumers.
# 1: its GPU tests (after the hang guard); 2: `dsattn bench ab` against the default at 8 heads (both layouts, 512 /
# 2048 tokens) and, at 16 heads, ping-pong + vraw against the default one-consumer two-CTA program.
# PREDICTION: right; timing build 3 (V without its multiplies, H100) was 1.3-6.1% faster; vraw also drops 64 PRMT a
# block and adds 32 LDS, P x 4 and more wgmma fences: 8 heads 1.02-1.06x both layouts, nope at least as much as
# fp8_ds_mla; 16 heads unknown (ping-pong lost to the two-CTA program by 3-6% in session 19).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s60_vraw.sh
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_SPARSE_MLA_IMPL DSATTN_WS_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/vraw.log
nvidia-smi --query-gpu=name --format=csv,noheader > $L; echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
pack() { tar -czf $OUT/vraw.tgz -C $OUT r vraw.log; }
if [ "${TESTS:-1}" = 1 ]; then
  t0=$SECONDS
  timeout ${TLIMIT:-240} python -m pytest -q -p no:cacheprovider -rfE -s tests/gpu/test_sparse_mla_rx_gpu.py \
    -k "hang_guard or vraw" > $R/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s" >> $L; grep -E "passed|failed|vraw|Error|error" $R/tests.log | tail -n 30 >> $L; pack
fi
F8="stages=4;producer_regs=56;consumers=2;hp8=1;pingpong=1;spillfix=1;vraw=1"
NP="stages=5;producer_regs=48;consumers=2;hp8=1;pingpong=1;spillfix=1;idxpf=2;sraw=1;vraw=1"
P16="stages=3;producer_regs=48;consumers=2;hp8=1;pingpong=1;spillfix=1;vraw=1"
P16N="stages=4;producer_regs=48;consumers=2;hp8=1;pingpong=1;spillfix=1;vraw=1"
ab() {  # name layout tokens heads config
  local t0=$SECONDS
  timeout 120 python -m dsattn.cli bench ab --op sparse_mla_decode --heads $4 --layout $2 --tokens $3 \
    --b "env:DSATTN_SPARSE_MLA_IMPL=gluon_rx,env:DSATTN_RX_CONFIG=$5" --name $1 --out $R > $R/$1.log 2>&1
  echo "== $1 ($2, $3 tokens, $4 heads; A default, B $5) rc=$? $((SECONDS - t0)) s" >> $L
  tail -n 4 $R/$1.log >> $L; pack
}
ab ab_s60_vraw_nope_512 fp8_ds_mla_nope 512 8 "$NP"
ab ab_s60_vraw_fp8_512 fp8_ds_mla 512 8 "$F8"
ab ab_s60_vraw_nope_2048 fp8_ds_mla_nope 2048 8 "$NP"
ab ab_s60_vraw_fp8_2048 fp8_ds_mla 2048 8 "$F8"
ab ab_s60_vraw16_fp8_512 fp8_ds_mla 512 16 "$P16"
ab ab_s60_vraw16_nope_512 fp8_ds_mla_nope 512 16 "$P16N"
cat $L
