#!/usr/bin/env bash
# Session 50: the indexer's top-k over rows of 8193-65536 columns (decode over 8K-64K contexts, and 34-264 requests
# from 4K contexts) by the Gluon select over thread-block clusters past session 49's rule (4 CTAs at <= SMs / 4 rows,
# rows <= 16384 columns), where the Triton long-row paths run now (glm-5 TP8 layer at 128 requests from 4K contexts:
# _v4_select 13.8 + _v4_tau 8.4 + _v4_filter 6.5 us of a 139.2 us span, bench/logs/s49/d).
# Call `a`: the indexer and backend GPU files whole at HEAD (session 49's 16384-column change ran only the wide-row
# test); topk_v3 at 34-264 rows of 12288-16384 columns and 1-32 rows of 24576-65536, the default against 2 / 4 / 8 CTA
# clusters with the cluster limit raised for the bench (v4_gluon_c*x: cluster_cap 65536; a CTA's columns the power of
# two above width / ctas); k 512 over glm-5.3-flash's 64K pooled rows (16880); the decode layer at 64 / 128 requests
# from 4K contexts with DSATTN_TOPK_CTAS=2 / 4 / 8 against the default.
# PREDICTION: tests pass (344 collected: 281 + 63; session 50 added test_micro_batches_interleaved, 3 cases, and
# test_graph_replays_a_later_step, 6; session 51 test_bf16_decode_rows_through_the_decode_kernel, 6, test_random_step, 16, test_rejected_speculative_tokens_roll_back, 10). 128 x 12224: default (three launches) ~29 us; 2 CTAs (256 CTAs of 8192
# columns, 92 registers: one an SM, two waves) ~20; 4 CTAs (512 of 4096, 53 registers, two an SM) ~18; 8 CTAs ~20.
# 264 x 12288: default ~33, clusters ~30 (four waves). 1 x 32768: _v4_fused ~22, 4 / 8 CTAs ~13. k 512 1 x 16880
# ~16 -> ~11. The glm-5 TP8 layer at 128 requests 139.2 -> ~128 us at the best count.
# Call `b`: decode layers over long contexts with wider clusters (DSATTN_TOPK_CLUSTER_CAP, gluon_select.cluster_cap;
# at most MAX_CTA_COLS 16384 columns a CTA): glm-5 TP8 from 32768-token contexts (rows of 32768-34752 columns, cap
# 65536) at 1 / 4 / 16 / 32 requests, default (_v4_fused / three launches) against 4 and 8 CTAs; glm-5.3-flash TP8 from
# 65536 (pooled rows of ~16.4K, k 512, cap 32768), default against 2 and 4 CTAs.
# PREDICTION: glm-5 at 1 request: top-k ~22 us (_v4_fused) -> ~14 at 8 CTAs (4096 columns a CTA as call e of session
# 49 at 16384 columns); layer span -8 us. 32 requests: 8 CTAs x 32 = 256 CTAs (two waves), ~no gain.
# Call `c`: what graph steps cost (prepare(graph=True): the indexer width and block table rounded up to the power of
# two at or above the longest request, or to quarters of a doubling with graph_bucket_steps 4), the decode layers at
# 1 / 8 / 32 / 128 requests from 4K contexts (buckets 8192 / 8192 / 8192 / 16384; quarters 5120 / 5120 / 6144 /
# 12288) and from 8K (16384; 10240 / 10240 / 10240 / 16384), --graph-steps 1 and 4 against the default; and the
# backend GPU tests of the session (micro-batches, a graph replaying a later step).
# PREDICTION: tests pass. 1 request from 4096 (4097 -> 8192 columns: the cluster's CTAs half empty) +1 us (the select
# as at 1 x 8192, 10.5 against 9.3); 128 requests (12224 -> 16384, the Triton long-row paths over a third more
# columns) +3-8 us of ~139; from 8192 (8257-10240 -> 16384) +1-2 us at 1-32 requests.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s50.sh a|b|c
# OUTCOME (session 52, the tree at f38596e; bench/logs/s52/a, c; results copied to bench/results):
# a: the indexer and backend GPU files whole, 344 passed. Top-k as CUDA-graph replays (us, default / 2 / 4 / 8 CTAs):
#   34x12288 26.0 / 17.3 / 17.1 / 16.9; 64x12288 29.8 / 18.5 / 23.9 / 22.0; 128x12224 33.4 / 29.8 / 34.6 / 34.3;
#   264x12288 50.6 / 53.3 / 58.4 / 60.0; 128x16384 34.8 / 32.0 / 35.9 / 35.5; 1x32768 23.1 / 30.1 / 15.0 / 12.3;
#   8x32768 24.5 / 33.7 / 16.9 / 13.9; 32x24576 26.6 / 33.2 / 27.6 / 26.7; 1x65536 22.7 / - / - / 17.7; k 512
#   1x16880 16.1 / 25.8 / 15.6 / 13.8, 32x16880 25.0 / 26.9 / 26.2 / 26.6. The prediction held at few long rows
#   (1x32768 ~13 at 4-8 CTAs) and for 34-64 rows; it was wrong at 128x12224 (~18-20 predicted, 29.8 at best) and
#   264 rows (clusters slower). The glm-5 TP8 layer at 128 requests: 139.2 us span default, 134.4 with
#   DSATTN_TOPK_CTAS=2, 139.4 / 138.3 at 4 / 8 (predicted ~128); deepseek-v3.2 TP8 169.8 -> 163.6 at 2; glm-5.3-flash
#   93.5 -> 95.4 at 2 (slower). Default unchanged (a rule for 2 CTAs at 34-128 rows of 8193-16384 columns is the next
#   step: 3.4-3.7% faster glm-5 / deepseek layers, not yet written or tested).
# c: the session's backend GPU tests, 9 passed. Spans (us) of the decode layers, default / graph steps 1 / 4: from
#   4096-token contexts glm-5 TP8 1 / 128 requests 21.0 / 21.3 / 21.0 and 140.0 / 146.3 / 140.5; deepseek-v3.2 TP8 128
#   169.9 / 177.2 / 169.3, TP1 317.3 / 326.3 / 317.1; the other cases (1-32 requests, and 8192) -2.0 to +2.5 us
#   (glm-5.3-flash 1 request from 8192 23.5 / 26.0 / 24.9; one replay each, some padded runs faster). As predicted (+1 us at
#   1 request was +0.3; +3-8 us at 128 was +6.3 / +7.3 / +9.0, TP1 past the range); quarter buckets
#   (graph_bucket_steps 4) stay within +1.4 us of the default everywhere.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s50.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s50.log; }
case "$1" in
a)
  N=8 LIMIT=240 bash bench/gpu_tests_sharded.sh $R/tests_a tests/gpu/test_indexer_gpu.py tests/gpu/test_backend_gpu.py
  cat $R/tests_a/summary.log >> $L; pack
  t0=$SECONDS
  timeout 150 python bench/topk_v3.py --shapes 34x12288,64x12288,128x12224,264x12288,128x16384,1x24576,1x32768,8x32768,32x24576 \
    --cases 34x12288:full,64x12288:full,128x12224:full,264x12288:full,128x16384:full,1x24576:full,1x32768:full,8x32768:full,32x24576:full \
    --variants v4,v4_gluon_c2x,v4_gluon_c4x,v4_gluon_c8x --rounds 2 --rep-ms 20 --out $R/topk_wide_a_s50.json > $R/topk.log 2>&1
  echo "topk_v3 k 2048 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk.log >> $L; pack
  t0=$SECONDS
  timeout 60 python bench/topk_v3.py --shapes 1x65536,4x65536 --cases 1x65536:full,4x65536:full \
    --variants v4,v4_gluon_c8x --rounds 2 --rep-ms 20 --out $R/topk_wide64k_a_s50.json > $R/topk64k.log 2>&1
  echo "topk_v3 64K rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk64k.log >> $L; pack
  t0=$SECONDS
  timeout 60 python bench/topk_v3.py --k 512 --shapes 1x16880,16x16880,32x16880 \
    --cases 1x16880:full,16x16880:full,32x16880:full --variants v4,v4_gluon_c2x,v4_gluon_c4x,v4_gluon_c8x \
    --rounds 2 --rep-ms 20 --out $R/topk_wide_k512_a_s50.json > $R/topk512.log 2>&1
  echo "topk_v3 k 512 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk512.log >> $L; pack
  for c in "" 2 4 8; do
    t0=$SECONDS
    DSATTN_TOPK_CTAS=$c timeout 60 python bench/decode_layer_kernels.py --batches 64,128 --context 4096 \
      --out $R --name decode_layer_wide_a_s50_${c:-default} > $R/layer_${c:-default}.log 2>&1
    echo "decode layer (ctas ${c:-default}) rc=$? $((SECONDS - t0)) s" >> $L
    grep -v -i warn $R/layer_${c:-default}.log | sed 's/kernels summing.*select_rows_kernel/.. select_rows_kernel/' >> $L
    pack
  done
  ;;
b)
  for v in default c4 c8; do
    case $v in default) E="";; c4) E="DSATTN_TOPK_CTAS=4 DSATTN_TOPK_CLUSTER_CAP=65536";;
      c8) E="DSATTN_TOPK_CTAS=8 DSATTN_TOPK_CLUSTER_CAP=65536";; esac
    t0=$SECONDS
    env $E timeout 90 python bench/decode_layer_kernels.py --configs glm-5:8:fp8_ds_mla --batches 1,4,16,32 \
      --context 32768 --out $R --name decode_layer_32k_b_s50_$v > $R/layer32k_$v.log 2>&1
    echo "decode layer glm-5 32K ($v) rc=$? $((SECONDS - t0)) s" >> $L
    grep -v -i warn $R/layer32k_$v.log | sed 's/kernels summing.*select_rows_kernel/.. select_rows_kernel/' >> $L; pack
  done
  for v in default c2 c4; do
    case $v in default) E="";; c2) E="DSATTN_TOPK_CTAS=2 DSATTN_TOPK_CLUSTER_CAP=32768";;
      c4) E="DSATTN_TOPK_CTAS=4 DSATTN_TOPK_CLUSTER_CAP=32768";; esac
    t0=$SECONDS
    env $E timeout 90 python bench/decode_layer_kernels.py --configs glm-5.3-flash:8:fp8_ds_mla_nope \
      --batches 1,4,16,32 --context 65536 --out $R --name decode_layer_64k_flash_b_s50_$v > $R/layer64k_$v.log 2>&1
    echo "decode layer glm-5.3-flash 64K ($v) rc=$? $((SECONDS - t0)) s" >> $L
    grep -v -i warn $R/layer64k_$v.log | sed 's/kernels summing.*select_rows_kernel/.. select_rows_kernel/' >> $L; pack
  done
  ;;
c)
  K="micro_batches or graph_replays" N=4 LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_c tests/gpu/test_backend_gpu.py
  cat $R/tests_c/summary.log >> $L; pack
  for ctx in 4096 8192; do
    for g in 0 1 4; do
      t0=$SECONDS
      timeout 120 python bench/decode_layer_kernels.py --batches 1,8,32,128 --context $ctx --graph-steps $g \
        --out $R --name decode_layer_graph_c${ctx}_s50_g$g > $R/layer_${ctx}_g$g.log 2>&1
      echo "decode layer (context $ctx, graph steps $g) rc=$? $((SECONDS - t0)) s" >> $L
      grep -v -i warn $R/layer_${ctx}_g$g.log | sed 's/kernels summing.*select_rows_kernel/.. select_rows_kernel/' >> $L
      pack
    done
  done
  ;;
esac
