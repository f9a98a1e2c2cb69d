#!/usr/bin/env bash
# Session 42: the decode indexer's paged logits at a decode layer's shapes (session 40-41's layer profile: ~12 us at
# 1-8 requests of 4K + 64 i tokens, 35.7 us at 32, 152 us at 128 = 0.9 TB/s of 138 MB).
# Call `a`: the paged-logits GPU tests (the pipelined kernel and the new hand-issued ring, ahead 1 and 2); then
# bench/paged_logits_sweep.py: kernel (pipe; ring1 / ring2; ring with BN 128 x 8 warps; ring2 x 8 warps) x split count
# (the rule, 4, 8, 32, 64, one tile a program) at the layer's shapes (32 heads bf16 and fp8, 64 heads bf16) and two
# uniform decodes (128 x 65536, 32 x 131072, fp8), beside DeepGEMM's paged MQA logits (fp8).
# PREDICTION: the compile check (sm_90a, CPU) shows the pipelined kernel keeps one key tile in flight and waits for
# its scales and block ids synchronously inside the loop (2-3 global latencies a tile); the ring waits for none.
# ring2 at 128 requests ~2x faster (152 -> ~70 us); at 1 request, one tile a program (65 programs) ~4-5 us against 11.7.
# OUTCOME (ae97e09, paged_logits_sweep_s42.json, bench/logs/s42/a/; after a first try found no machine): tests 6 passed.
# Graph replays, us, best split of each: the ring only helps bf16 queries (128 requests 148.7 -> 100.5, 32: 31.1 ->
# 20.3) and is slower with fp8 ones (128: 64.8 pipe vs 98.9); ring2 slower than ring1 everywhere (registers). bf16
# queries cost 2.3x fp8 ones in the pipelined kernel (148.7 vs 64.8 at 128 requests). One tile a program at 1 request:
# bf16 10.8 -> 4.1 (ring1) / 5.0 (pipe), fp8 7.2 -> 3.8. DeepGEMM (fp8): 7.7 / 9.1 / 12.4 / 44.7 us at 1 / 8 / 32 / 128
# requests, 280.2 at 128 x 65536 (ours 383.0 at 64 splits, 411.5 at the rule), 145.0 at 32 x 131072 (ours 210.6).
# So half the prediction: the few-row gain as predicted, the 128-request gain only for bf16 and smaller.
# Call `b`: key tiles by tensor descriptor (_paged_tma_kernel: Triton pipelines the TMA loads num_stages - 1 deep for
# bf16, num_stages for fp8, compile check; the block id and scales one tile ahead by hand; 55 registers fp8, 96 bf16),
# GPU tests of every kernel (fp8 and bf16 queries, bad block ids over NaN blocks, block sizes 16 / 32 / 64), the sweep
# with num_stages 3 / 4 / 6 and 8 warps, and a split rule `fill` (>= 16 splits, ~4 programs an SM, <= 32 tiles a
# program).
# PREDICTION: tests pass. tma_s4 at 128 requests fp8 ~45-50 us (DeepGEMM 44.7), bf16 ~60-70 us; at 128 x 65536 ~300 us.
# OUTCOME (e0b53cf, paged_logits_tma_s42.json, bench/logs/s42/b/): tests 42 passed. Graph replays, us, against the
# default of the day (pipelined, 16 splits): 3 stages best of 3 / 4 / 6 (8 warps 1.5-2x slower). tma_s3 at its best
# split / at 16 splits: 128 requests fp8 41.2 / 42.2 (was 64.5; DeepGEMM 44.7), bf16 66.7 / 66.8 (148.8), 64 heads bf16
# 77.2 (149.9); 32 requests fp8 8.6 (13.5; DeepGEMM 12.5), bf16 14.7 (31.2); 1 request one tile a program fp8 3.2 (7.1;
# DeepGEMM 7.6), bf16 3.6 (10.8); 8 requests 4.5 / 5.7 (8.7 / 13.1). 128 x 65536 275.0 at 64 splits, 314.9 at 16
# (DeepGEMM 280.6); 32 x 131072 145.4 at 16, 189.3 at 32 (DeepGEMM 145.2): wave quantization (7 programs an SM).
# The prediction held, a little better at 128 requests.
# Call `c` (tensor-descriptor tiles, 3 stages and logits.paged_splits the default; the ring kernel removed): the
# indexer and backend GPU test files; the sweep's default against the old default (and DeepGEMM); a decode layer's
# kernels at 1-128 requests; kernels_indexer's indexer_decode (logits + top-k against DeepGEMM + torch.topk).
# PREDICTION: tests pass; the sweep as call b's tma_s3 at paged_splits' choices (1 request 3.2 / 3.6 us, 128 requests
# 42 / 67, 128 x 65536 ~275, 32 x 131072 ~145); glm-5 TP8 layer span ~8 us less at 1-8 requests, ~20 at 32 and ~80
# at 128 (bf16 indexer queries: 148.8 -> 66.8 us).
# OUTCOME (01be644, bench/logs/s42/c/): GPU tests 154 passed (8 shards). Sweep, old default -> default, us
# (paged_logits_default_s42.json): 1 request bf16 10.5 -> 3.2, fp8 7.2 -> 3.2 (DeepGEMM 7.7); 8: 13.3 -> 5.7, 8.7 -> 4.5
# (9.2); 32: 31.3 -> 14.8, 13.4 -> 8.6 (12.5); 128: 147.6 -> 66.7, 64.3 -> 42.6 (45.1); 64 heads bf16 128: 148.0 -> 77.0;
# 128 x 65536 417.8 -> 278.4 (284.0); 32 x 131072 250.6 -> 147.6 (147.1). Layer spans (decode_layer_kernels_s42.json
# against s41's _new): glm-5 TP8 1 / 8 / 32 / 128 requests 39.9 -> 31.7, 44.8 -> 37.5, 79.1 -> 58.8, 245.4 -> 162.9;
# deepseek-v3.2 TP8 40.0 -> 32.0, 47.8 -> 42.1, 85.9 -> 67.9, 260.7 -> 187.6; TP1 44.9 -> 36.7, 62.9 -> 56.4, 126.9 ->
# 108.6, 411.7 -> 337.1. glm-5.3-flash keeps the pipelined kernel (pooled block size 16): 32 requests 9.9 -> 11.9 us
# (one tile a program), the rest within 0.2 us or better (8: 6.6 -> 5.0). indexer_decode (indexer_decode_s42.json,
# graph): logits + top-k 0.373 ms vs DeepGEMM + torch.topk 0.474 at 128 x 65536 (1.27x; 1.009x in s16), 32 x 131072
# 0.268 vs 0.281 (1.05x), 64 x 65536 x 2 tokens 0.311 vs 0.339 (1.09x), 64 heads 0.348 vs 0.478 (1.37x).
# Prediction held at 1-32 requests; at 128 the span fell 82 us (predicted ~80).
# Call `d`: the pipelined kernel's split rule back to the old one past 4 x SMs one-tile programs (glm-5.3-flash at 32
# requests); the paged GPU tests; glm-5.3-flash's layer.
# PREDICTION: tests pass; glm-5.3-flash 32 requests paged kernel ~9.9 us again, 8 requests ~5.0.
# OUTCOME (6ae6e78, decode_layer_kernels_s42_flash.json, bench/logs/s42/d/): tests 35 passed. glm-5.3-flash paged
# kernel 4.2 / 5.0 / 10.2 / 52.4 us at 1 / 8 / 32 / 128 requests (s41: 4.3 / 6.6 / 9.9 / 52.6); spans 25.2 / 30.4 / 44.6
# / 128.2 (s41: 26.9 / 33.6 / 46.3 / 128.8).
# Call `e`: the descriptor 3-D ([blocks, block_size, 128], strides block_size * 132, 128, 1), so block sizes that are
# multiples of 16 take it (glm-5.3-flash's pooled cache: 16-key tiles, mma v2 at M 16, compile check); the indexer and
# backend GPU test files; the sweep at pooled shapes (a quarter of 4K + 64 i keys, block 16) and two layer shapes; the
# glm-5.3-flash layer.
# PREDICTION: tests pass; layer shapes as call c (66.7 / 42.6 us at 128); pooled 128 requests ~52 -> ~20 us, 32
# requests ~10 -> ~5.
# OUTCOME (acd65a4, paged_logits_pooled_s42.json, decode_layer_kernels_s42_flash3d.json, bench/logs/s42/e/): GPU tests
# 154 passed. Layer shapes as call c (128 requests bf16 67.3, fp8 42.1; DeepGEMM 45.0). Pooled (block 16, 16-key tiles)
# against the pipelined loads at their old rule: faster at 1 / 8 requests (bf16 4.6 -> 3.3, 7.1 -> 5.4), slower from 32
# (bf16 10.6 -> 13.9, 46.8 -> 59.8 at 128; fp8 6.3 -> 9.3, 22.3 -> 36.6); glm-5.3-flash's layer at 128 requests 128.2 ->
# 137.4 us span. The prediction was wrong for pooled shapes: 16-key tiles (2 KB a TMA load, M 16 products) lose. So
# the default takes the descriptor kernel only where tiles are 64 keys (block size a multiple of 64); glm-5.3-flash
# keeps the pipelined loads (call d's numbers).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s42.sh a
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s42.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s42.log; }
case "$1" in
a)
  timeout 150 python -m pytest -q -x tests/gpu/test_indexer_gpu.py -k paged_logits > $R/tests_a.log 2>&1
  echo "tests rc=$? $(tail -n 1 $R/tests_a.log)" >> $L; pack
  t0=$(date +%s)
  timeout 400 python bench/paged_logits_sweep.py --out $R --name paged_logits_sweep_s42 > $R/sweep_a.log 2>&1
  echo "sweep rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/sweep_a.log >> $L; pack
  ;;
b)
  timeout 200 python -m pytest -q -x tests/gpu/test_indexer_gpu.py -k paged_logits > $R/tests_b.log 2>&1
  echo "tests rc=$? $(tail -n 1 $R/tests_b.log)" >> $L; pack
  t0=$(date +%s)
  timeout 420 python bench/paged_logits_sweep.py --out $R --name paged_logits_tma_s42 > $R/sweep_b.log 2>&1
  echo "sweep rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/sweep_b.log >> $L; pack
  ;;
c)
  N=8 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests_c tests/gpu/test_indexer_gpu.py tests/gpu/test_backend_gpu.py
  cat $R/tests_c/summary.log >> $L; pack
  timeout 150 python bench/paged_logits_sweep.py --kernels default,old --splits rule --rounds 3 --out $R \
    --name paged_logits_default_s42 > $R/sweep_c.log 2>&1
  echo "sweep rc=$?" >> $L; grep -v -i warn $R/sweep_c.log >> $L; pack
  timeout 200 python bench/decode_layer_kernels.py --batches 1,8,32,128 --out $R --name decode_layer_kernels_s42 \
    > $R/layer_c.log 2>&1
  echo "decode layer kernels rc=$?" >> $L; grep -v -i warn $R/layer_c.log >> $L; pack
  timeout 150 python -m dsattn.bench.kernels_indexer --op indexer_decode --out-dir $R > $R/idx_decode.log 2>&1
  echo "indexer_decode rc=$?" >> $L; tail -n 12 $R/idx_decode.log >> $L; pack
  ;;
d)
  timeout 100 python -m pytest -q -x tests/gpu/test_indexer_gpu.py -k paged_logits > $R/tests_d.log 2>&1
  echo "tests rc=$? $(tail -n 1 $R/tests_d.log)" >> $L; pack
  timeout 150 python bench/decode_layer_kernels.py --configs glm-5.3-flash:8:fp8_ds_mla_nope --batches 1,8,32,128 \
    --out $R --name decode_layer_kernels_s42_flash > $R/layer_d.log 2>&1
  echo "decode layer kernels rc=$?" >> $L; grep -v -i warn $R/layer_d.log >> $L; pack
  ;;
e)
  N=8 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests_e tests/gpu/test_indexer_gpu.py tests/gpu/test_backend_gpu.py
  cat $R/tests_e/summary.log >> $L; pack
  timeout 150 python bench/paged_logits_sweep.py --kernels default,old --splits rule --rounds 3 --out $R \
    --cases pooled:1:32:bf16,pooled:8:32:bf16,pooled:32:32:bf16,pooled:128:32:bf16,pooled:32:32:fp8,pooled:128:32:fp8,layer:128:32:bf16,layer:128:32:fp8 \
    --name paged_logits_pooled_s42 > $R/sweep_e.log 2>&1
  echo "sweep rc=$?" >> $L; grep -v -i warn $R/sweep_e.log >> $L; pack
  timeout 150 python bench/decode_layer_kernels.py --configs glm-5.3-flash:8:fp8_ds_mla_nope --batches 1,8,32,128 \
    --out $R --name decode_layer_kernels_s42_flash3d > $R/layer_e.log 2>&1
  echo "decode layer kernels rc=$?" >> $L; grep -v -i warn $R/layer_e.log >> $L; pack
  ;;
esac
