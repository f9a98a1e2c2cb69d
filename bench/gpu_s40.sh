#!/usr/bin/env bash
# Session 40. Call `a`: the split call's combine launched with programmatic dependent launch and / or over 4 column
# programs (bench/combine_launch.py: graphs of 8 consecutive calls, then single-call graphs), then the split tests of
# the sparse MLA GPU files and the whole backend GPU file with the new default launch.
# PREDICTION: PDL saves ~0.5-1.5 us a split call in the 8-call graphs (the combine's launch gap), more at 1-16 tokens
# where a call is 8-25 us; 128 columns a program cut the combine ~0.5 us where it has few programs (1-4 tokens at 8
# heads: 8-32 programs of 512 columns) and change nothing at 16 tokens x 64 heads (1024 programs).
# OUTCOME (bench/results/combine_launch_s40*.json, bench/logs/s40/call1/): PDL no faster in the 8-call graphs
# (0.990-1.011x, -0.20..+0.15 us a call), 0.16-0.51 us (1.004-1.022x) in single-call graphs; 128 columns 0.1-0.25 us
# faster at 1-4 tokens x 8 heads, up to 20 us (0.67x) slower elsewhere. The split tests (87 passed, 5 skipped) and the
# backend GPU file (19 passed) ran with PDL on. Both removed after the call: the code (launch.COMBINE_PDL /
# COMBINE_COLS, kernels.py's combine_splits_kernel, bench/combine_launch.py) is at ea33551, where `a` runs.
# Call `b`: small-batch decode (1-64 tokens) beside FlashMLA by each side's kernel time a call (torch.profiler;
# FlashMLA's decode fails on graph replay), bench/decode_small_vs_flashmla.py.
# PREDICTION: ours 7-13 us at 1 token (8-64 heads, session 39's kernel times); FlashMLA padded to 64 ~10-15 us, so ~1.5x
# at 8 heads and ~1x at 64 heads.
# OUTCOMES. First run (733ce44, decode_small_vs_flashmla_s40_sums.json, bench/logs/s40/call2/): it summed each
# kernel's own duration, which is not a call's time (FlashMLA's two kernels overlap by up to 4.6 us, and our gap is left
# out). Second run (537c13e, _eager.json, call3/): spans of eager calls; ours are host-bound (~45-55 us a call at every
# size: the gap between our two kernels is the host's launch work), FlashMLA ~19 us at 1-4 tokens. Third run
# (669f499, decode_small_vs_flashmla_s40.json, call4/): our spans from profiled CUDA-graph replays, FlashMLA's eager:
# ours faster at 8 heads 2.0-2.4x, 16 heads 1.66-2.2x, 32 heads 1.5-1.89x, 64 heads 1.09-1.42x, 128 heads 0.98-1.39x
# (1 token 8 heads 8.1 vs 19.0 us); outputs within 2.5e-4 of FlashMLA's. The prediction was low at 8-32 heads:
# FlashMLA's call is ~19 us at 1-4 tokens, not 10-15.
# Call `c`: where one decode layer's GPU time goes at 1 / 8 / 32 / 128 requests, each kernel inside the layer's CUDA
# graph (bench/decode_layer_kernels.py; glm-5 TP8, glm-5.3-flash TP8 nope, deepseek-v3.2 TP8 and TP1).
# PREDICTION: at 1 request a layer replays in ~40-60 us, most of it the fixed latency of ~10 small kernels (3-5 us
# each), the sparse MLA ~8-10 us of it; at 128 requests glm-5 TP8 ~0.27 ms as in session 15 (serve_s15_graph*.json).
# Call `d`: the top-k's latency at few rows (call c: at 1 request its three kernels take ~22 us of a glm-5 TP8 layer's
# ~48 us, the select ~13 us whatever the batch), knobs of launch_topk_v4 one at a time (bench/topk_v3.py --shapes).
# PREDICTION: one filter program a row (segs 1: the threshold fused, one launch less, no order scans) saves ~5-8 us at
# 1 x 4097; the histogram select (4 rounds instead of up to 12 two-bit steps) a few us of the select's ~13; 16 select
# warps no better (the steps are reduction latency, not work).
# OUTCOME (topk_small_s40.json, bench/logs/s40/call6/, CUDA-graph replays): the register cap off (select_maxnreg 0) is
# the one knob faster at every few-row shape: 1 x 65536 0.0451 -> 0.0383 ms, 32 x 65536 0.0489 -> 0.0421, 128 x 65536
# 0.0520 -> 0.0479, 1 x 4097 0.0308 -> 0.0305. One filter program a row only at 1 x 4097 (0.0297), slower from 65536;
# the histogram select ~2x slower everywhere; 4 select warps slower, 16 no better. So launch_topk_v4 now caps the
# select only past two programs an SM (select.select_register_cap).
# Call `e` (after that change): the indexer and backend GPU test files, then call c again (the layer's kernels).
# PREDICTION: tests pass (the uncapped select was bad=0 at every shape of call d); the top-k's select a few us less at
# 1-128 requests, the layer's span 1-4 us less.
# Call `f`: the three profiler benches after their profiling moved into bench.common (kernel_events, call_spans):
# each runs one small case (a check that they still run and read as before, not a measurement).
# OUTCOME (e9beaca, bench/logs/s40/call8/): all three ran (rc 0) and read as before: glm-5 TP8 layer span 47.7 / 87.0 us
# at 1 / 32 requests (call 7: 47.7 / 87.0); 1 token 8 heads 7.94 vs FlashMLA 19.17 us (call 4: 8.08 vs 19.03); the
# split prefill 8 heads pad64 1 token 88.0 -> 8.8 us (session 39: 87.7 -> 8.9).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s40.sh a|b|c|d|e|f
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB \
  DSATTN_PREFILL_SPLITS DSATTN_COMBINE_PDL DSATTN_COMBINE_COLS
R=$OUT/r; mkdir -p $R; L=$OUT/s40.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s40.log; }
case "$1" in
a)
  t0=$(date +%s)
  timeout 150 python bench/combine_launch.py --calls 8 --out $R --name combine_launch_s40 > $R/combine8.log 2>&1
  echo "combine 8 calls rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/combine8.log >> $L; pack
  t0=$(date +%s)
  timeout 120 python bench/combine_launch.py --calls 1 --out $R --name combine_launch_s40_single > $R/combine1.log 2>&1
  echo "combine 1 call rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/combine1.log >> $L; pack
  K=split N=16 LIMIT=240 bash bench/gpu_tests_sharded.sh $R/tests_split tests/gpu/test_sparse_mla_gpu.py \
    tests/gpu/test_sparse_mla_rx_gpu.py tests/gpu/test_sparse_mla_prefill_gpu.py
  cat $R/tests_split/summary.log >> $L; pack
  N=8 LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_backend tests/gpu/test_backend_gpu.py
  cat $R/tests_backend/summary.log >> $L
  ;;
b)
  t0=$(date +%s)
  PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer timeout 400 python bench/decode_small_vs_flashmla.py --out $R \
    --name decode_small_vs_flashmla_s40 > $R/small_vs_flashmla.log 2>&1
  echo "small decode vs FlashMLA rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/small_vs_flashmla.log >> $L
  ;;
c)
  t0=$(date +%s)
  timeout 400 python bench/decode_layer_kernels.py --out $R --name decode_layer_kernels_s40 > $R/layer_kernels.log 2>&1
  echo "decode layer kernels rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/layer_kernels.log >> $L
  ;;
d)
  V=v4,v4_mode1,v4_segs1,v4_segs1_mode1,v4_sel4w,v4_sel16w,v4_nocap,v4_segs1_sel16w
  S=1x4097,1x16384,1x65536,8x16384,32x16384,32x65536,128x65536
  C=1x4097:full,1x16384:full,1x65536:full,8x16384:ragged,32x16384:ragged,32x65536:full,128x65536:full
  t0=$(date +%s)
  for i in 0 1 2 3 4 5 6 7; do
    timeout 200 python bench/topk_v3.py --warm $i/8 --variants $V --shapes $S > $R/warm$i.log 2>&1 &
  done; wait
  echo "warm $(( $(date +%s) - t0 )) s" >> $L; cat $R/warm*.log | grep -v "^warm v4[a-z0-9_]*: [0-9.]* s$" >> $L
  t0=$(date +%s)
  timeout 300 python bench/topk_v3.py --shapes $S --cases $C --variants $V --rounds 3 --rep-ms 20 \
    --out $R/topk_small_s40.json > $R/topk_small.log 2>&1
  echo "topk small rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/topk_small.log >> $L
  ;;
e)
  N=8 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests_e tests/gpu/test_indexer_gpu.py tests/gpu/test_backend_gpu.py
  cat $R/tests_e/summary.log >> $L; pack
  t0=$(date +%s)
  timeout 300 python bench/decode_layer_kernels.py --out $R --name decode_layer_kernels_s40b \
    > $R/layer_kernels_b.log 2>&1
  echo "decode layer kernels rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/layer_kernels_b.log >> $L
  ;;
f)
  python bench/decode_layer_kernels.py --configs glm-5:8:fp8_ds_mla --batches 1,32 --out $R --name check_layer \
    > $R/check.log 2>&1; echo "layer rc=$?" >> $L
  PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer python bench/decode_small_vs_flashmla.py --heads 8,64 --tokens 1 \
    --out $R --name check_small >> $R/check.log 2>&1; echo "small vs flashmla rc=$?" >> $L
  python bench/prefill_split_kernels.py --cases 8:pad64:1 --out $R --name check_split >> $R/check.log 2>&1
  echo "split kernels rc=$?" >> $L; grep -v -i warn $R/check.log >> $L
  ;;
esac
pack
