#!/usr/bin/env bash
# Session 48: the Gluon select (ops/topk/gluon_select.py) for top-k rows that fit the candidate capacity, the largest
# kernel of a small-batch decode layer (the Triton select alone: 15.9-16.5 us at 1-8 glm-5 requests, README).
# Call `a`: the top-k GPU tests (new test_topk_gluon_select_rows: edge rows, same columns and order as the Triton
# select, a CUDA graph; test_topk_sets' v4_gluon / v4_gluon_w16 / v4_triton entries and the default); topk_v3 at
# decode-like shapes, the Gluon select at 4 / 8 / 16 warps against the Triton select (gluon=False); the decode layer's
# kernels with the Gluon select (the default) and without (DSATTN_TOPK_GLUON=0), two processes.
# PREDICTION (arithmetic from the sm_90a compile: 5 barriers, 2 histogram passes of ~700 instructions a thread at cap
# 8192 / 8 warps where the Triton select runs 7-12 two-bit steps and two ordered scans): the select at 1 x 4160 ~5 us of
# kernel time against 14.7 as a graph replay (~7 us replay); a glm-5 TP8 decode layer's span at 1-8 requests ~8-10 us
# shorter (30.3 / 36.3 us); at 4096 rows of 4096 (prefill of short prompts) unknown: many Triton programs an SM with
# 80 registers against the Gluon one's ~100.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s48.sh a
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s48.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s48.log; }
case "$1" in
a)
  K="gluon or triton or (topk_sets and default) or signed_zeros" N=6 LIMIT=200 bash bench/gpu_tests_sharded.sh \
    $R/tests_a tests/gpu/test_indexer_gpu.py
  cat $R/tests_a/summary.log >> $L; pack
  t0=$SECONDS
  timeout 170 python bench/topk_v3.py --shapes 1x4160,8x4160,32x6144,128x8192,264x8192,1x4096,4096x4096 \
    --cases 1x4160:full,8x4160:full,32x6144:ragged,128x8192:full,264x8192:full,1x4096:full,4096x4096:full \
    --variants v4_triton,v4_gluon,v4_gluon_w16 --rounds 3 --rep-ms 20 --out $R/topk_gluon_s48.json > $R/topk.log 2>&1
  echo "topk_v3 k 2048 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk.log >> $L; pack
  t0=$SECONDS
  timeout 90 python bench/topk_v3.py --k 512 --shapes 1x1040,8x2048,128x2048 --cases 1x1040:full,8x2048:full,128x2048:full \
    --variants v4_triton,v4_gluon,v4_gluon_w8 --rounds 3 --rep-ms 20 --out $R/topk_gluon_k512_s48.json > $R/topk512.log 2>&1
  echo "topk_v3 k 512 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk512.log >> $L; pack
  for arm in gluon triton; do
    t0=$SECONDS
    DSATTN_TOPK_GLUON=$([ $arm = gluon ] && echo 1 || echo 0) timeout 150 python bench/decode_layer_kernels.py \
      --batches 1,8,32,128 --out $R --name decode_layer_topk_s48_$arm > $R/layer_$arm.log 2>&1
    echo "decode layer ($arm) rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/layer_$arm.log >> $L; pack
  done
  ;;
esac
