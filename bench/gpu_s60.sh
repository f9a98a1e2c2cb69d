#!/usr/bin/env bash
# Session 60. a: issue 3's table when the card is an H200 (bench/gpu_s16_table.sh, TABLE_TAG s60_h200, FlashMLA
# beside it; carry .peer); b: gluon_rx's 8-head timing builds with build 3, V16 without its fp16 multiplies by the group
# scales (bench/rx_timing_builds.py).
# PREDICTION (b): if the consumers bound nope (session 25: alone 83-85% of its time) and V's 128 mul.rn.f16x2 a thread
# and block are ~1/5 of their instructions, build 3 is 3-8% faster over nope and less over fp8_ds_mla; under 2% means
# folding the scales into per-group P buffers is not worth its 4-byte loads.
#   PARTS="a b" DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s60.sh
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_SPARSE_MLA_IMPL DSATTN_WS_CONFIG DSATTN_PF_CONFIG
L=$OUT/s60.log; mkdir -p $OUT/b
nvidia-smi --query-gpu=name --format=csv,noheader >> $L; echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
has() { case " ${PARTS:-a b} " in *" $1 "*) return 0;; esac; return 1; }
if has a && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  t0=$SECONDS; TABLE_TAG=s60_h200 bash bench/gpu_s16_table.sh > /dev/null 2>&1
  echo "== a: table $((SECONDS - t0)) s" >> $L; cat $OUT/tb.log >> $L
fi
if has b; then
  t0=$SECONDS
  timeout 240 python bench/rx_timing_builds.py --tokens 512,2048 --rounds 3 --out $OUT/b --name rx_timing_builds_s60 \
    > $OUT/b/tb.log 2>&1
  echo "== b: timing builds rc=$? $((SECONDS - t0)) s" >> $L; grep -E " ms$|Error" $OUT/b/tb.log >> $L
fi
cat $L
