#!/usr/bin/env bash
# RAN in session 18 (bench/logs/s18_persist.log): right (60 GPU tests, bit-equal) but slower, 1-3%; config persist
# was REMOVED afterwards (its code: 49fb844), so this script no longer runs on the tree.
# Session 18: gluon_rx config persist (DSATTN_RX_PERSIST=1: at most one program an SM, each walking (token, head
# block, split) items along one ring, so an item's pipeline fill and epilogue overlap its neighbours' blocks).
# WHY: bench/decode_fixed_cost.py (H200, this session, CUDA graph replays) fits decode at 512 tokens as
# t = fixed + per-entry: 16 heads 0.0557 ms fixed of 0.243 (23%), 8 heads 0.0332 of 0.203 (16%), i.e. ~14 / ~9 us a
# program of ~63 / ~52. PREDICTION: persist recovers half to two thirds of it: 16 heads 0.243 -> 0.20-0.22 ms,
# 8 heads 0.203 -> 0.18-0.19; outputs bit-equal to the default (same blocks per consumer, same merge).
# Order: (1) the GPU tests of the default ping-pong path (refactored: _produce / _pp_blocks) and of persist (hang
# guard first); (2) only if they passed: A/B default vs persist at 8 / 16 heads, both layouts, 512 tokens, and 16
# heads at 2048; the fixed-cost fit under persist.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s18_persist.sh   (log $OUT/ps.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_F8S DSATTN_RX_PERSIST
R=$OUT/r; mkdir -p $R; L=$OUT/ps.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 330 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfEs \
  -k "c2 and (persist or configs_agree or rx_layouts_heads or rx_hang_guard or pingpong)" > $R/t_persist.log 2>&1
T=$?
echo "rx GPU tests (c2, default + persist) rc=$T" >> $L; tail -n 12 $R/t_persist.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
grep -q "FAILED.*persist" $R/t_persist.log && { echo "persist tests failed: no timings" >> $L; exit 0; }
ab() {  # layout heads tokens
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens $3 --heads $2 --layout $1 \
    --a env:DSATTN_RX_PERSIST=0 --b env:DSATTN_RX_PERSIST=1 --name ab_s18_persist_$1_h$2_$3 --out $R \
    > $R/ab_$1_h$2_$3.log 2>&1
  echo "ab persist $1 $2 heads $3 tokens rc=$?" >> $L; tail -n 3 $R/ab_$1_h$2_$3.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab fp8_ds_mla 16 512
ab fp8_ds_mla 8 512
ab fp8_ds_mla_nope 8 512
ab fp8_ds_mla_nope 16 512
ab fp8_ds_mla 16 2048
DSATTN_RX_PERSIST=1 timeout 60 python bench/decode_fixed_cost.py --tokens 512 --heads 8 16 --out $R/fixed_persist.json \
  >> $L 2>&1
tar -czf $OUT/r.tgz -C $OUT r
