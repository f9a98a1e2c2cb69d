#!/usr/bin/env bash
# Session 51 (no device; written for the next one, after bench/gpu_s50.sh a; then gpu_s50.sh c and b).
# Call `d`: session 51's GPU tests, none run yet:
#   - test_bf16_decode_rows_through_the_decode_kernel (6): DSAAttention.bf16_decode_kernel, an A/B knob (below);
#   - test_random_step (16 random steps at real sizes);
#   - test_rejected_speculative_tokens_roll_back (10) and the indexer file's k-pool tests: the k-pool tail kernel's
#     change (a rejected speculative token that completed a pool, scheduled again, finds its pool's members);
#   - test_transformers_backend_gpu.py (8: the backend with the kernels against transformers' layers over a serving
#     sequence; the machine's transformers is 5.17: a kind it lacks skips);
#   - test_backend_serving_sim_gpu.py (11 simulations of an engine, each step against the CPU oracle);
#   - (added in session 52) test_transformers_model_gpu.py (21: a three-layer transformers model whose attention layers
#     all run through the backend, logits against transformers' step by step; speculative rollbacks; greedy
#     generation; a prefix-cache hit). Session 52 also made the transformers tests run under the machine's 5.17 (checked on the CPU:
#     before, every transformers case here would have failed on 5.17's `past_key_values` keyword).
# PREDICTION: all pass (8 + 21 transformers cases; 5.17 has all three kinds). The simulations' risk (the helper's
# note): exact-zero indexer ties at the k-th place with 4 indexer heads, which the top-k breaks toward the lower column
# on the GPU as on the CPU.
# Call `e`: a bf16 cache's decode rows. Since session 45 the backend runs them through the prefill kernel's pad64 (one
# token a program, 64-row programs): 128 glm-5 TP8 decodes took 97.9 us of sparse MLA there against 55.0 for the fp8
# decode kernel over fp8_ds_mla (notes/backend.md, "Left"). The decode kernels over a paged bf16 cache (Triton at
# <= 16 heads a program, gluon_small at 17-32; DSATTN_SPARSE_MLA_IMPL forces one) were never timed on these rows.
# bench/bf16_decode_rows.py at 8 / 16 / 32 heads, 1-256 tokens, 8192 slots a request (prefill pad64 against decode
# native / pad64 under auto, triton, gluon); the decode layer of glm-5 TP8 and deepseek-v3.2 TP8 over a bf16 cache at
# 1 / 8 / 32 / 128 requests with bf16_decode_kernel prefill / decode:native / decode:pad64.
# PREDICTION: bytes: 128 rows x 2048 x 1152 B = 302 MB, 71 us at 4.27 TB/s; pad64 at 128 x 8 heads ~95-100 us
# (3.1 TB/s). The Triton decode (keys on M, its row loads not pipelined: ~1.1 TB/s of fp8 rows in session 1's sweep)
# ~150-250 us; gluon_small over bf16 rows (8 heads: 1.73 TB/s of fp8 rows at 512 tokens, fp8 -> fp16 conversions
# included) ~90-120 us; decode pad64 (64-head programs) about pad64 prefill's time. So pad64 prefill stays the fastest
# or within 5% at 32-256 tokens and 8 / 16 heads; at 32 heads native and pad64 both run 64-row wgmma (M >= 64), within
# 5%. At 1-8 tokens the split-K plans decide (both split to fill a wave): within 10%. The layers follow: 182.1 us at
# 128 glm-5 requests (session 45) within +-5% for the best decode arm.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s51.sh d|e
# OUTCOME (session 52, the tree at f38596e; bench/logs/s52/d, e): d: 74 tests, all passed (the 8 + 21 transformers
# cases included, under the machine's transformers 5.17). e: the prediction held: the prefill kernel's pad64 stays
# fastest from 32 tokens on (128 tokens, 8 heads: 94.2 us against decode native gluon 110.3, Triton 161.9, pad64
# 210.5; 256 tokens 184.9 against 206.4 native auto); at 1-8 tokens decode native gluon is 2-12% faster (1 token 8
# heads 8.46 vs 9.41 us, 16 heads 9.06 vs 10.27), except 8 tokens at 32 heads (prefill 15.84, gluon 16.63). The layers: glm-5 TP8 at 128 requests 182.0 us span (prefill) against 248.8 (decode:native)
# and 296.6 (decode:pad64), deepseek-v3.2 TP8 197.6 / 260.8 / 312.3; at 1 and 8 requests prefill ahead of decode:native
# by 0.1-1.9 us and of decode:pad64 by 2.2-6.4.
# bf16_decode_kernel's default ('prefill') stays.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s51.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s51.log; }
case "$1" in
d)
  K="bf16_decode_rows or random_step or transformers or roll_back or kpool or simulation" N=4 LIMIT=300 \
    bash bench/gpu_tests_sharded.sh $R/tests_d tests/gpu/test_backend_gpu.py tests/gpu/test_transformers_backend_gpu.py \
    tests/gpu/test_indexer_gpu.py tests/gpu/test_backend_serving_sim_gpu.py tests/gpu/test_transformers_model_gpu.py
  cat $R/tests_d/summary.log >> $L; pack
  ;;
e)
  t0=$SECONDS
  timeout 240 python bench/bf16_decode_rows.py --heads 8,16,32 --tokens 1,8,32,128,256 --context 8192 \
    --out $R --name bf16_decode_rows_e_s51 > $R/rows.log 2>&1
  echo "bf16 decode rows rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/rows.log >> $L; pack
  for k in prefill decode:native decode:pad64; do
    t0=$SECONDS
    n=${k/:/_}
    timeout 100 python bench/decode_layer_kernels.py --configs glm-5:8:bf16,deepseek-v3.2:8:bf16 --batches 1,8,32,128 \
      --bf16-decode-kernel $k --out $R --name decode_layer_bf16_e_s51_$n > $R/layer_$n.log 2>&1
    echo "decode layer bf16 ($k) rc=$? $((SECONDS - t0)) s" >> $L
    grep -v -i warn $R/layer_$n.log | sed 's/kernels summing.*select_rows_kernel/.. select_rows_kernel/' >> $L; pack
  done
  ;;
esac
