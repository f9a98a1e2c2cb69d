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
# PREDICTION: tests pass (303: session 50 added test_micro_batches_interleaved, 3 cases). 128 x 12224: default (three launches) ~29 us; 2 CTAs (256 CTAs of 8192 columns, 92
# registers: one an SM, two waves) ~20; 4 CTAs (512 of 4096, 53 registers, two an SM) ~18; 8 CTAs ~20. 264 x 12288:
# default ~33, clusters ~30 (four waves). 1 x 32768: _v4_fused ~22, 4 / 8 CTAs ~13. k 512 1 x 16880 ~16 -> ~11.
# The glm-5 TP8 layer at 128 requests 139.2 -> ~128 us at the best count.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s50.sh a
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
esac
