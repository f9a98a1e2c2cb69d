#!/usr/bin/env bash
# Session 43: the top-k at few long rows (a latency-bound decode step over long contexts). Session 40's profile gave
# 1 x 65536 ~38 us as a CUDA-graph replay (topk_small_s40.json, uncapped select): three launches (threshold, 16
# filter programs, select) whose select sorts the atomics' slot order with 8 packed-count scans (16 filter programs).
# New: _v4_fused (ops/topk/select.py), one launch: every tile's program (4096 columns, 8 warps) finds the row's
# threshold from the sample itself while its tile loads, reserves its slots with one atomic and records (base, number)
# in a table; the last to arrive (acq_rel count) loads the candidates in column order through the table (one scan
# left) and selects. The count and the arrival count are zeroed by a fill just before (a second graph node).
# Call `a`: the top-k GPU tests (new: v4_3l / v4_fused impls, test_topk_few_long_rows with graph replays); then
# bench/topk_v3.py at few-row shapes (k 2048 and k 512), three launches against the one-launch path by tile size,
# graph replays; then a decode layer over 64K-token contexts (glm-5 TP8, glm-5.3-flash TP8) with and without it.
# PREDICTION: tests pass. Graph replays: 1 x 65536 ~38 -> ~15-18 us, 1 x 16384 ~32 -> ~14, 16 x 65536 ~45 -> ~20;
# past ~2 programs an SM (64 x 65536) the three launches win. Layer spans at 1-16 requests ~20 us less.
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s43.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s43.log; }
V=v4,v4_3l,v4_fused,v4_fused_t1k,v4_fused_t2k,v4_fused_t8k
S=1x16384,1x65536,1x131072,4x65536,16x65536,32x65536,64x65536,8x131072,1x262144
S5=1x4096,1x16384,8x16384,32x16384,1x32768
case "$1" in
a)
  for i in 0 1 2 3 4 5; do timeout 150 python bench/topk_v3.py --warm $i/6 --variants $V --shapes $S > $R/warm$i.log 2>&1 & done
  for i in 0 1; do timeout 150 python bench/topk_v3.py --warm $i/2 --variants v4_3l,v4_fused --shapes $S5 --k 512 \
    > $R/warm5_$i.log 2>&1 & done
  N=8 K=topk LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_a tests/gpu/test_indexer_gpu.py
  wait
  cat $R/tests_a/summary.log >> $L; pack
  timeout 150 python bench/topk_v3.py --variants $V --shapes $S --rounds 1 --rep-ms 15 --out $R/topk_few_s43.json \
    > $R/bench_a.log 2>&1
  echo "bench rc=$?" >> $L; grep -v -i warn $R/bench_a.log >> $L; pack
  timeout 60 python bench/topk_v3.py --variants v4_3l,v4_fused --shapes $S5 --k 512 --rounds 1 --rep-ms 15 \
    --out $R/topk_few_k512_s43.json > $R/bench5_a.log 2>&1
  echo "bench k512 rc=$?" >> $L; grep -v -i warn $R/bench5_a.log >> $L; pack
  for m in "" "--topk-3l"; do
    timeout 120 python bench/decode_layer_kernels.py --configs glm-5:8:fp8_ds_mla,glm-5.3-flash:8:fp8_ds_mla_nope \
      --batches 1,4,16,32 --context 65536 $m --out $R --name decode_layer_64k_s43${m:+_3l} > $R/layer_a$m.log 2>&1
    echo "layer $m rc=$?" >> $L; grep -v -i warn $R/layer_a$m.log >> $L; pack
  done
  ;;
esac
