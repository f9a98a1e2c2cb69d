#!/usr/bin/env bash
# Session 70 (carry [".peer"]). PART a: 1. GPU tests: the pair's kernel tests (keyed at 8 / 16 heads added), the
# backend's bf16 / keyed steps (allocating_attention now passes a row_scratch where the backend does: session 69's
# call t failed two of them), the new gathered_row_scratch step; 2. bench/s70/convert_ratio.py.
# PART g: DSAAttention.gathered_row_scratch on against off (bench/s69_serve_rows.py, fp8_ds_mla).
# PART r: bench/s70/convert_ratio.py as CUDA-graph replays (GRAPH=1; call 2's eager arms may have been host-bound).
# PART p: bench/s70/host_profile.py (the host work of one eager prefill call against its GPU time).
# PART h: issue 3's whole table (bench/gpu_s16_table.sh, decode and prefill, FlashMLA in the same process), tagged by
# the card (README's H200 rows are session 60's).
#   PART=a DSATTN_GIT_COMMIT=<sha> bash bench/s70/run.sh     ($OUT/s70_<part>.log)
set -u
export PYTHONPATH=src:.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
P=${PART:-a}
L=$OUT/s70_$P.log
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?} part $P" > $L
t0=$SECONDS
if [ "$P" = a ]; then
  timeout ${TEST_S:-260} python -m pytest -v -p no:cacheprovider -rfE --tb=short \
    tests/gpu/test_sparse_mla_prefill_gpu.py tests/gpu/test_backend_gpu.py \
    -k "pair_over or (test_step_matches_reference and bf16) or keyed_prefill or gathered_row_scratch or (no_allocation and bf16)" \
    > $OUT/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
  grep -E "(PASSED|FAILED|ERROR)" $OUT/tests.log | grep -v "^(FAILED|ERROR)" | sed -E 's/.*::(.*) (PASSED|FAILED|ERROR).*/\2 \1/' >> $L
  grep -E "^E " $OUT/tests.log | head -n 12 | cut -c1-300 >> $L
  timeout ${RATIO_S:-200} python bench/s70/convert_ratio.py ${CASES:-} >> $L 2>&1
  echo "ratio rc=$? $((SECONDS - t0)) s" >> $L
fi
if [ "$P" = g ]; then  # DSAAttention.gathered_row_scratch on against off (fp8_gathered path: 32 / 64 / 128 heads)
  # PREDICTION: the layer 1.03-1.10x at 32 heads (gluon_pair over the converted context), 1.05-1.12x at 64 / 128 heads
  # (session 68's bench ab over converted rows: 1.14x / 1.17x for the prefill call alone)
  timeout ${SERVE_S:-400} python bench/s69_serve_rows.py ${SERVE_CASES:-deepseek-v3.2:4,deepseek-v3.2:2,deepseek-v3.2:1 prefill,mixed} \
    --layout fp8_ds_mla >> $L 2>&1
  echo "serve gathered rows rc=$? $((SECONDS - t0)) s" >> $L
fi
if [ "$P" = r ]; then
  GRAPH=1 timeout ${RATIO_S:-200} python bench/s70/convert_ratio.py ${CASES:-16:1024,8:1024,32:512,8:2048} >> $L 2>&1
  echo "ratio (graph replays) rc=$? $((SECONDS - t0)) s" >> $L
fi
if [ "$P" = p ]; then
  timeout ${HOST_S:-150} python bench/s70/host_profile.py ${CASES:-} >> $L 2>&1
  echo "host profile rc=$? $((SECONDS - t0)) s" >> $L
fi
if [ "$P" = h ]; then
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
  case "$GPU" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
  PARTS=${PARTS:-"decode prefill"} TABLE_TAG=s70_$tag bash bench/gpu_s16_table.sh > /dev/null 2>&1
  rm -rf $OUT/r; cat $OUT/tb.log >> $L
fi
cat $L
