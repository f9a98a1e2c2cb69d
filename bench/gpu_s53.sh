#!/usr/bin/env bash
# Session 53: the top-k cluster rule past session 49's (gluon_select.default_ctas): 2 CTAs a row at 34-132 rows of
# 8193-16384 columns (decodes from 8K+ contexts at 34+ requests, or 128 requests from 4K), where the Triton long-row
# paths ran; 8 CTAs at 1-8 rows and 4 at 9-16 past 16384 columns up to 65536 (MAX_CLUSTER_CAP, was 16384: decodes over
# 16K-64K contexts), where _v4_fused / the three launches ran. From session 52's kernel timings (bench/gpu_s50.sh a).
# Call `a`: the indexer and backend GPU files whole (test_topk_gluon_wide_rows has 9 new shapes: every branch of the
# rule, both sides of each bound); topk_v3 at the rule's shapes, the default (v4) against the Triton kernels
# (v4_triton, which is the old default there: one CTA does not hold these rows and session 49's clusters did not
# take them); the decode layers from 4K contexts at 64 / 128 requests and from 8K at 32 / 64 / 128, the default against
# DSATTN_TOPK_CTAS=1, which is the old default at each of these row counts but 32 from 8K (rows of 8192-10176
# columns: 4 CTAs by both rules, the Triton paths at CTAS=1; a check of session 49's rule, not of this one).
# PREDICTION: tests pass (344 + 9 = 353). topk_v3 (us, v4 / v4_triton): 34x12288 ~17 / 26; 64x12288 ~18.5 / 30;
# 128x12224 ~30 / 33.4; 132x16384 ~32 / 35; 1x24576 ~13.6 / 22; 1x32768 ~12.3 / 23; 8x32768 ~14 / 24.5;
# 16x24576 ~17-20 / 26; 4x65536 ~18 / 23; k 512 1x16880 ~14 / 16; 16x16880 ~16 / 19.5. Decode layers: 4K 64
# requests no change (rows of 8128 columns, one CTA); 128 requests glm-5 TP8 139 -> ~134 us, deepseek-v3.2 TP8 170 ->
# ~164, TP1 319 -> ~314, glm-5.3-flash TP8 no change (its pooled rows are narrow); 8K at 64 / 128 glm-5 and deepseek
# TP8 -5 to -10 us.
# Call `b`: decode layers over long contexts: glm-5 TP8 and deepseek-v3.2 TP8 from 32768-token contexts at 1 / 4 / 8 /
# 16 requests, glm-5.3-flash TP8 from 65536 (pooled rows of ~16.4K, k 512) at 1 / 4 / 16 / 32, the default against
# DSATTN_TOPK_CLUSTER_CAP=16384 (session 49's limit: the Triton paths past 16384 columns).
# PREDICTION: glm-5 at 1 request top-k ~22 -> ~13 us (span -9 us of ~40?), 4-8 requests ~-10 us, 16 requests (4 CTAs
# of 8K+ columns) ~-5; glm-5.3-flash at 1 / 4 requests -2 us, 16 -3, 32 no change (Triton both).
# Call `c` (after `a`'s tests hit an illegal instruction in test_topk_signed_zeros_tie, 8 x 65536 of +-0.0 ties over
# 8-CTA clusters: the emit's packed eq count of the CTAs before went past 2^15 << 16; fixed by unpacking the CTAs'
# counts): the indexer and backend GPU files whole again (+ test_topk_gluon_cluster_ties, 5 cases), then call `b`.
# PREDICTION: 358 passed.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s53.sh a|b|c
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_TOPK_CTAS DSATTN_TOPK_CLUSTER_CAP DSATTN_TOPK_GLUON
R=$OUT/r; mkdir -p $R; L=$OUT/s53.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s53.log; }
layer() {  # name env args...: one decode_layer_kernels run into the log
  local n=$1 e=$2; shift 2; local t0=$SECONDS
  env $e timeout 150 python bench/decode_layer_kernels.py "$@" --out $R --name $n > $R/$n.log 2>&1
  echo "== $n ($e) rc=$? $((SECONDS - t0)) s" >> $L
  grep -v -i warn $R/$n.log | sed 's/kernels summing.*select_rows_kernel/.. select_rows_kernel/' >> $L; pack
}
tests() {
  N=8 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests_$1 tests/gpu/test_indexer_gpu.py tests/gpu/test_backend_gpu.py
  cat $R/tests_$1/summary.log >> $L; rm -f $R/tests_$1/ids*.txt; tar -czf $OUT/tests_$1.tgz -C $R tests_$1
  rm -rf $R/tests_$1; pack
}
run_b() {
  for v in default cap16k; do
    E=""; [ $v = cap16k ] && E="DSATTN_TOPK_CLUSTER_CAP=16384"
    layer decode_layer_rule_32k_b_s53_$v "$E" --configs glm-5:8:fp8_ds_mla,deepseek-v3.2:8:fp8_ds_mla \
      --batches 1,4,8,16 --context 32768
  done
  for v in default cap16k; do
    E=""; [ $v = cap16k ] && E="DSATTN_TOPK_CLUSTER_CAP=16384"
    layer decode_layer_rule_64k_flash_b_s53_$v "$E" --configs glm-5.3-flash:8:fp8_ds_mla_nope \
      --batches 1,4,16,32 --context 65536
  done
}
case "$1" in
a)
  N=8 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests_a tests/gpu/test_indexer_gpu.py tests/gpu/test_backend_gpu.py
  cat $R/tests_a/summary.log >> $L; pack
  t0=$SECONDS
  S=34x12288,64x12288,128x12224,132x16384,1x24576,1x32768,8x32768,16x24576,4x65536
  timeout 150 python bench/topk_v3.py --shapes $S --cases $(echo $S | sed 's/,/:full,/g'):full \
    --variants v4,v4_triton --rounds 3 --rep-ms 20 --out $R/topk_rule_a_s53.json > $R/topk.log 2>&1
  echo "topk_v3 k 2048 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk.log >> $L; pack
  t0=$SECONDS
  timeout 60 python bench/topk_v3.py --k 512 --shapes 1x16880,8x16880,16x16880 \
    --cases 1x16880:full,8x16880:full,16x16880:full --variants v4,v4_triton \
    --rounds 3 --rep-ms 20 --out $R/topk_rule_k512_a_s53.json > $R/topk512.log 2>&1
  echo "topk_v3 k 512 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk512.log >> $L; pack
  layer decode_layer_rule_4k_a_s53_default "" --batches 64,128 --context 4096
  layer decode_layer_rule_4k_a_s53_c1 "DSATTN_TOPK_CTAS=1" --batches 64,128 --context 4096
  layer decode_layer_rule_8k_a_s53_default "" --batches 32,64,128 --context 8192 \
    --configs glm-5:8:fp8_ds_mla,deepseek-v3.2:8:fp8_ds_mla
  layer decode_layer_rule_8k_a_s53_c1 "DSATTN_TOPK_CTAS=1" --batches 32,64,128 --context 8192 \
    --configs glm-5:8:fp8_ds_mla,deepseek-v3.2:8:fp8_ds_mla
  ;;
c)
  tests c
  run_b
  ;;
b)
  run_b
  ;;
esac
# Call `d` (after `c`): 9-16 rows past 32768 columns, where the rule's 4 CTAs hold 16384 columns each (32 keys a
# thread) and 8 CTAs would hold 8192 (c: glm-5 TP8 from 32K contexts at 16 requests, select 23.4 us against 13.0 at 8
# requests over 8 CTAs): topk_v3 4 against 8 CTAs at 16 x 33728, 12 x 40000, 16 x 65536 (and 16 x 24576, where 4 CTAs
# hold 8192), and the glm-5 / deepseek-v3.2 TP8 layers from 32K at 12 / 16 requests with DSATTN_TOPK_CTAS=8.
# PREDICTION: 8 CTAs faster where 4 CTAs would hold 16384 columns (16 x 33728 ~20 -> ~15 us), not at 16 x 24576.
if [ "${1:-}" = d ]; then
  t0=$SECONDS
  S=16x33728,12x40000,16x65536,16x24576
  timeout 120 python bench/topk_v3.py --shapes $S --cases $(echo $S | sed 's/,/:full,/g'):full \
    --variants v4,v4_gluon_c4x,v4_gluon_c8x --rounds 3 --rep-ms 20 --out $R/topk_rows16_d_s53.json > $R/topk16.log 2>&1
  echo "topk_v3 rows16 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk16.log >> $L; pack
  for v in default c8; do
    E=""; [ $v = c8 ] && E="DSATTN_TOPK_CTAS=8"
    layer decode_layer_rule_32k_d_s53_$v "$E" --configs glm-5:8:fp8_ds_mla,deepseek-v3.2:8:fp8_ds_mla \
      --batches 12,16 --context 32768
  done
fi
# Call `e` (after `d`: at 12 rows 8 CTAs won, at 16 rows of 33728 they lost): 9-12 rows of 16385-32768 columns, 4
# against 8 CTAs (k 2048 12 x 24576, 12 x 32768; k 512 12 x 16880).
# PREDICTION: 8 CTAs no slower at 12 rows (as at 1-8).
if [ "${1:-}" = e ]; then
  t0=$SECONDS
  timeout 60 python bench/topk_v3.py --shapes 12x24576,12x32768 --cases 12x24576:full,12x32768:full \
    --variants v4_gluon_c4x,v4_gluon_c8x --rounds 3 --rep-ms 20 --out $R/topk_rows12_e_s53.json > $R/topk12.log 2>&1
  echo "topk_v3 rows12 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk12.log >> $L; pack
  timeout 60 python bench/topk_v3.py --k 512 --shapes 12x16880 --cases 12x16880:full \
    --variants v4_gluon_c4x,v4_gluon_c8x --rounds 3 --rep-ms 20 --out $R/topk_rows12_k512_e_s53.json > $R/topk12k.log 2>&1
  echo "topk_v3 rows12 k512 rc=$?" >> $L; grep -v -i warn $R/topk12k.log >> $L; pack
fi
# Call `f` (the rule after `d` and `e`: 8 CTAs at <= 12 rows past 16384 columns, 4 at 13-16): the top-k GPU tests of
# the indexer file, and the glm-5 / deepseek-v3.2 TP8 layers from 32K contexts at 12 / 16 requests by default.
# PREDICTION: tests pass; 12 requests as `d`'s DSATTN_TOPK_CTAS=8 (53.2 / 59.4 us), 16 as its default (67.0 / 76.5).
if [ "${1:-}" = f ]; then
  K=topk N=8 LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_f tests/gpu/test_indexer_gpu.py
  cat $R/tests_f/summary.log >> $L; rm -rf $R/tests_f; pack
  layer decode_layer_rule_32k_f_s53_default "" --configs glm-5:8:fp8_ds_mla,deepseek-v3.2:8:fp8_ds_mla \
    --batches 12,16 --context 32768
fi
# OUTCOME (session 53; logs bench/logs/s53/{a,c,d,e,f}, results bench/results/*_s53*.json):
# a (2d1e2ec): test_topk_signed_zeros_tie (8 x 65536 +-0 ties, now over 8-CTA clusters) hit an illegal instruction in
#   the four shards that ran it (the packed eq sum of the CTAs past 2^15; fixed in 5f823bd), and their later tests
#   errored on the dead context; all else passed, the new wide-row shapes included. Kernel timings held the
#   prediction (34x12288 17.7 against 26.2 us, 1x32768 14.0 / 23.4, 4x65536 18.3 / 24.1, ...; notes/indexer.md). 4K
#   layers at 128 requests as predicted (glm-5 133.7 / 138.8, deepseek TP8 163.4 / 169.3, TP1 312.0 / 319.3, flash
#   93.1 / 93.1); 8K at 64 requests -16.3 / -17.2 us (predicted -5 to -10), at 128 -4.6 / -3.5.
# c (5f823bd): 358 passed. 32K layers (default / cap 16384), glm-5 TP8 1 / 4 / 8 / 16 requests 28.9 / 35.4 / 44.0 /
#   68.5 against 35.0 / 42.8 / 55.4 / 73.2 us, deepseek-v3.2 TP8 31.1 / 42.1 / 50.7 / 76.7 against 39.1 / 48.4 / 63.6
#   / 81.3 (predicted -9 at 1 request: -6.1 / -8.0); glm-5.3-flash 64K 1 / 4 / 16 / 32 requests 28.2 / 34.8 / 57.0 /
#   90.4 against 28.2 / 40.3 / 58.1 / 90.9 (at 1 request its pooled rows fit 16384 under both: the prediction's -2
#   was wrong there; 4 requests -5.5, 16 -1.1, 32 the Triton paths both).
# d (fbc56ff): 4 / 8 CTAs, graph replays, us: 16x33728 27.2 / 29.3, 12x40000 31.5 / 19.4, 16x65536 35.0 / 32.2,
#   16x24576 18.0 / 18.9; layers from 32K at 12 requests default (4 CTAs) / DSATTN_TOPK_CTAS=8 glm-5 64.2 / 53.2,
#   deepseek 68.8 / 59.4; at 16 requests 67.0 / 69.3 and 76.5 / 79.2. Prediction half right: 8 CTAs won at 12 rows,
#   lost at 16 x 33728.
# e (a2e0ba0): 12 rows, 4 / 8 CTAs: 12x24576 17.9 / 15.6, 12x32768 17.5 / 15.1, k 512 12x16880 15.3 / 13.8 (held).
#   Hence the rule of 2bcb2c9: 8 CTAs while 8 x rows <= 3/4 of the SMs (<= 12 rows), 4 at 13-16.
# f (2bcb2c9): the indexer file's top-k tests, 231 passed; 32K layers at 12 / 16 requests glm-5 53.4 / 67.3,
#   deepseek 59.4 / 77.1 us (as predicted: d's 8-CTA 12 and default 16).
