#!/usr/bin/env bash
# Session 56 asked the driver (bench/cluster_occupancy.py, on an H100: bench/results/cluster_occupancy_h100_s56.json)
# how many top-k select clusters run at once past 32768 columns (cap 65536): 15 of 8 CTAs, 30 of 4. gluon_select's
# default_ctas sends rows there over 8 CTAs at 1-12 rows, 4 at 13-16 and the Triton paths (1) from 17: its bounds are
# fractions of the SMs from session 53's H200 timings (16 x 33728: 27.2 us over 4 against 29.3 over 8; 12 x 40000:
# 19.4 over 8 against 31.5 over 4). If the counts are the bound, 13-15 rows want 8 CTAs and 17-30 rows 4.
# Call `a` (H200; ~3 min): the H200's own counts; topk_v3 at 13 / 15 x 33728 (8 against 4 CTAs), 20 / 24 / 30 x 33728
# and 24 x 65536 (4 CTAs against the default, the Triton paths there); then the glm-5 / deepseek-v3.2 TP8 decode layers
# from 32K contexts at 14 and 24 requests, the default against DSATTN_TOPK_CTAS=8 (14) and 4 (24).
# PREDICTION: the H200's counts equal the H100's (the same GH100 die, 132 SMs). 13-15 x 33728: 8 CTAs faster than 4
# (~20 against ~25 us: each CTA's tile halves, and all clusters still fit one wave); 20-30 x 33728: 4 CTAs faster than
# the Triton paths (~28-30 us against ~35-40), 24 x 65536 likewise; the layers follow the top-k by the same margins.
# If all that holds, default_ctas past 16384 columns becomes "8 while rows <= 15, 4 while rows <= 30" (or asks the
# driver's count), with test_topk_gluon_wide_rows' shapes moved to the new bounds.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s56.sh a
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_TOPK_CTAS DSATTN_TOPK_CLUSTER_CAP DSATTN_TOPK_GLUON
R=$OUT/r; mkdir -p $R; L=$OUT/s56.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s56.log; }
layer() {  # name env args...: one decode_layer_kernels run into the log
  local n=$1 e=$2; shift 2; local t0=$SECONDS
  env $e timeout 150 python bench/decode_layer_kernels.py "$@" --out $R --name $n > $R/$n.log 2>&1
  echo "== $n ($e) rc=$? $((SECONDS - t0)) s" >> $L
  grep -v -i warn $R/$n.log | sed 's/kernels summing.*select_rows_kernel/.. select_rows_kernel/' >> $L; pack
}
case "${1:-}" in
a)
  t0=$SECONDS
  timeout 120 python bench/cluster_occupancy.py --json $R/cluster_occupancy_h200_s56.json > $R/occ.log 2>&1
  echo "cluster_occupancy rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/occ.log >> $L; pack
  t0=$SECONDS
  S=13x33728,15x33728,20x33728,24x33728,30x33728,24x65536
  timeout 150 python bench/topk_v3.py --shapes $S --cases $(echo $S | sed 's/,/:full,/g'):full \
    --variants v4,v4_gluon_c4x,v4_gluon_c8x,v4_triton --rounds 3 --rep-ms 20 --out $R/topk_counts_a_s56.json \
    > $R/topk.log 2>&1
  echo "topk_v3 rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/topk.log >> $L; pack
  for v in default c8; do
    E=""; [ $v = c8 ] && E="DSATTN_TOPK_CTAS=8"
    layer decode_layer_counts_14_s56_$v "$E" --configs glm-5:8:fp8_ds_mla,deepseek-v3.2:8:fp8_ds_mla \
      --batches 14 --context 32768
  done
  for v in default c4; do
    E=""; [ $v = c4 ] && E="DSATTN_TOPK_CTAS=4"
    layer decode_layer_counts_24_s56_$v "$E" --configs glm-5:8:fp8_ds_mla,deepseek-v3.2:8:fp8_ds_mla \
      --batches 24 --context 32768
  done
  ;;
*)
  echo "usage: bash bench/gpu_s56.sh a" >&2; exit 2
  ;;
esac
