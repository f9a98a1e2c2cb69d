#!/usr/bin/env bash
# Session 23, device call 5 (one H200): gluon_ws config lazy (6th field of DSATTN_WS_CONFIG): the running max of each
# head moves only in a block whose scores pass it by more than 8 (base 2); elsewhere the max over the keys (a reduction
# across the four consumer warps) and the rescale of O^T and l are skipped for one warpgroup-wide "any". Why: call 4's
# profile at ahead 2 (bench/logs/s23_profile/) has the consumer setting the pace, with FMNMX 6.5% and SHFL 3.9% of all
# samples in its softmax reductions and FMUL 2.8% (the rescale). Compile check: no spill, no wgmma serialization.
# Not bit-equal (the same softmax rounded another way): GPU tests against the reference at q x 1 / 6 / 0.02.
# PREDICTION: 32 heads fp8_ds_mla 512 tokens 1.02-1.06x against the default; issue 3 asks <= 0.314 ms.
# OUTCOME (bench/logs/s23_ws5.log): within tolerance but slower, 0.981x / 0.977x, nope 0.914x; removed (needs 50624e3).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s23_ws5.sh   (log $OUT/ws5.log, results under $OUT/r, $OUT/r.tgz; ~6 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG DSATTN_G64_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/ws5.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
ab() {  # layout heads configB name [tokens]
  timeout 80 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${5:-512} --heads $2 --layout $1 \
    --b env:DSATTN_WS_CONFIG=$3 --name ab_s23_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab default vs $3 ($1, $2 heads, ${5:-512} tokens) rc=$?" >> $L; tail -n 3 $R/ab_$4.log | head -n 2 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
rows() {  # tokens name
  timeout 100 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 32 --tokens $1 \
    --impl auto --rounds 3 --rep-ms 20 --out $R --name $2 > $R/$2.log 2>&1
  echo "decode rows $1 ($2) rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/$2.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab fp8_ds_mla 32 2/128/4/0/2/1 lazy_fp8_h32
timeout 200 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE -k "ws_lazy" \
  > $R/t_ws5.log 2>&1
echo "ws lazy GPU tests rc=$?" >> $L; tail -n 6 $R/t_ws5.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
ab fp8_ds_mla_nope 32 3/128/4/0/2/1 lazy_nope_h32
ab fp8_ds_mla 32 2/128/4/0/2/1 lazy_fp8_h32_2048 2048
export DSATTN_WS_CONFIG=2/128/4/0/2/1
rows 512 sparse_mla_s23_decode32_lazy_512
rows 2048 sparse_mla_s23_decode32_lazy_2048
