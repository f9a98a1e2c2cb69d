#!/usr/bin/env bash
# Session 57 moved gluon_select.default_ctas past 16384 columns to the driver's cluster counts (cluster_slots: 120 CTAs
# at 132 SMs): 8 CTAs while 8 x rows <= 120 (1-15 rows; was 1-12), then, up to 32768 columns only, 4 while
# 4 x rows <= 120 (16-30 rows; was 13-16 at any width), else the Triton paths. Evidence, H100 (session 57 calls 1-2,
# bench/logs/s57/): 15 x 33728 22.0 us over 8 against 33.2 over 4; 24 x 24576 20.8 over 4 against 27.2 on the Triton
# paths; glm-5 TP8 at 14 requests from 32K 83.6 -> 73.6 us with DSATTN_TOPK_CTAS=8.
# Call `a` (~3 min): the top-k GPU tests that cover the rule (test_topk_gluon_wide_rows' new shapes among them); topk_v3
# at the new bounds, the default against the old choice there; the glm-5 / deepseek-v3.2 TP8 decode layers at 15
# requests from 32K (default against DSATTN_TOPK_CTAS=4, the old rule) and at 24 and 30 requests from 24K (default
# against DSATTN_TOPK_CTAS=1).
# PREDICTION: tests pass; topk_v3's v4 equals the faster of the pair at every shape (15 x 33728 ~22 us, 13 x 24576
# ~18, 24 x 24576 ~21, 30 x 32768 ~22; 16 x 33728 and 31 x 32768 on the Triton paths, ~26-28); the layers: 15 requests
# ~10 us faster than CTAS=4 (the select 33 -> 22 us), 24 and 30 requests ~6-7 us faster than CTAS=1.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s57.sh a
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_TOPK_CTAS DSATTN_TOPK_CLUSTER_CAP DSATTN_TOPK_GLUON
R=$OUT/r; mkdir -p $R; L=$OUT/s57.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s57.log; }
layer() {  # name env args...: one decode_layer_kernels run into the log
  local n=$1 e=$2; shift 2; local t0=$SECONDS
  env $e timeout 150 python bench/decode_layer_kernels.py "$@" --out $R --name $n > $R/$n.log 2>&1
  echo "== $n ($e) rc=$? $((SECONDS - t0)) s" >> $L
  grep -v -i warn $R/$n.log | sed 's/kernels summing.*select_rows_kernel/.. select_rows_kernel/' >> $L; pack
}
case "${1:-}" in
a)
  t0=$SECONDS
  timeout 240 python -m pytest -q -p no:cacheprovider tests/gpu/test_indexer_gpu.py -k "topk_gluon" > $R/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s" >> $L; tail -3 $R/tests.log >> $L; pack
  t0=$SECONDS
  S=15x33728,13x24576,24x24576,30x32768,16x33728,31x32768
  timeout 150 python bench/topk_v3.py --shapes $S --cases $(echo $S | sed 's/,/:full,/g'):full \
    --variants v4,v4_gluon_c4x,v4_gluon_c8x,v4_triton --rounds 3 --rep-ms 20 --out $R/topk_rule_a_s57.json \
    > $R/topk.log 2>&1
  echo "topk_v3 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk.log >> $L; pack
  C=glm-5:8:fp8_ds_mla,deepseek-v3.2:8:fp8_ds_mla
  layer decode_layer_rule_15_s57_default "" --configs $C --batches 15 --context 32768
  layer decode_layer_rule_15_s57_c4 "DSATTN_TOPK_CTAS=4" --configs $C --batches 15 --context 32768
  layer decode_layer_rule_24k_s57_default "" --configs $C --batches 24,30 --context 24576
  layer decode_layer_rule_24k_s57_c1 "DSATTN_TOPK_CTAS=1" --configs $C --batches 24,30 --context 24576
  ;;
*)
  echo "usage: bash bench/gpu_s57.sh a" >&2; exit 2
  ;;
esac
