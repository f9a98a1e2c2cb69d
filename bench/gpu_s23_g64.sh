#!/usr/bin/env bash
# Session 23, device call 6 (one H200): gluon64 (64 / 128-head decode) with G64Config ahead 1 (the 7th field of
# DSATTN_G64_CONFIG): the ring producer loads a unit's group scales with its rows and its entries a unit earlier.
# Why: in the default ring (2 units of 16 rows) the scales are loaded when a unit is stored, right before its
# conversion, and the next unit's row loads take their addresses from entries loaded one unit before (sm_90a SASS,
# the same pattern that held the 32-head gluon_ws producer, fixed there by WsConfig ahead: 1.04-1.07x this session).
# Compile check: the producer spills 12 B at 120 registers over fp8_ds_mla (20 B at 112), none over nope at 112.
# PREDICTION: 64 / 128 heads 1.00-1.05x; bit-equal.
# OUTCOME (bench/logs/s23_g64.log): bit-equal and slower over fp8_ds_mla (0.90-0.93x), nope 1.005x; removed (needs
# 09d2c05).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s23_g64.sh   (log $OUT/g64.log, results under $OUT/r, $OUT/r.tgz; ~6 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG DSATTN_G64_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/g64.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
ab() {  # layout heads configB name [tokens]
  timeout 80 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${5:-512} --heads $2 --layout $1 \
    --b env:DSATTN_G64_CONFIG=$3 --name ab_s23_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab default vs $3 ($1, $2 heads, ${5:-512} tokens) rc=$?" >> $L; tail -n 3 $R/ab_$4.log | head -n 2 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab fp8_ds_mla 64 4/120/16/2/0/1/1 g64a120_fp8_h64
timeout 150 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE -k "g64_ahead" \
  > $R/t_g64.log 2>&1
echo "g64 ahead GPU tests rc=$?" >> $L; tail -n 4 $R/t_g64.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
ab fp8_ds_mla 64 4/112/16/2/0/1/1 g64a112_fp8_h64
ab fp8_ds_mla 128 4/120/16/2/0/1/1 g64a120_fp8_h128
ab fp8_ds_mla_nope 64 4/112/16/2/0/1/1 g64a112_nope_h64
ab fp8_ds_mla 64 4/120/16/2/0/1/1 g64a120_fp8_h64_2048 2048
