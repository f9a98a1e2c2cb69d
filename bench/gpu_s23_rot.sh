#!/usr/bin/env bash
# Session 23, device call 8 (one H200): gluon_ws config rot (6th field of DSATTN_WS_CONFIG): each latent row lands
# rotated in its stage so that it keeps its global 128-byte phase, and the conversion rotates the words back (two
# shuffles a word pair). Why: call 4's profile (bench/logs/s23_profile/) counted 10.5 shared-memory wavefronts a latent
# copy instruction for 4 ideal (6.8 M of the kernel's 7.0 M excess): 656-byte rows start 16 (slot mod 8) bytes into
# their first 128-byte line while the stage rows are 128-aligned; each 4-lane quarter of a copy then also reads a
# misaligned 64 bytes (3 sectors for 2). Session 19's padded 768-byte rows were 5.7% faster at 32 heads: the bound.
# Compile check: no spill, copies still 16 bytes, 64 SHFL.IDX a block in the producer.
# PREDICTION: 32 heads fp8_ds_mla 512 tokens 1.00-1.05x against the default; bit-equal.
# OUTCOME (bench/logs/s23_rot.log): bit-equal and slower, 0.843x, nope 0.846x; removed (needs 620a969).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s23_rot.sh   (log $OUT/rot.log, results under $OUT/r, $OUT/r.tgz; ~3 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG DSATTN_G64_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/rot.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
ab() {  # layout heads configB name [tokens]
  timeout 70 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${5:-512} --heads $2 --layout $1 \
    --b env:DSATTN_WS_CONFIG=$3 --name ab_s23_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab default vs $3 ($1, $2 heads, ${5:-512} tokens) rc=$?" >> $L; tail -n 3 $R/ab_$4.log | head -n 2 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab fp8_ds_mla 32 2/128/4/0/2/1 rot_fp8_h32
timeout 100 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE -k "ws_ahead" \
  > $R/t_rot.log 2>&1
echo "ws ahead / rot GPU tests rc=$?" >> $L; tail -n 4 $R/t_rot.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
ab fp8_ds_mla_nope 32 3/128/4/0/2/1 rot_nope_h32
