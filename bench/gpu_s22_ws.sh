#!/usr/bin/env bash
# Session 22, device call 2 (one H200): gluon_ws (the 32-head decode kernel) fed by gluon64's register producers
# (WsConfig depth / unit, the 5th / 6th fields of DSATTN_WS_CONFIG). At 32 heads a program the two fp16 tiles leave
# room for 2 raw cp.async stages, so only ONE 21 KB half-block is in flight while another converts; session 10's
# timing builds: producer alone 0.272 ms, consumer alone 0.227, full 0.354. The register producers hold the rows in
# the producer's registers instead (8 warps x 128 registers: depth 3 units of 32 rows = 63 KB in flight), no raw
# stages, no cp.async write / shared-memory read of the latent. Compile check (sm_90a, 32 heads, fp8_ds_mla and nope):
# no spill at 8 warps / 128 registers for depth 2 / 3, units 16 / 32 (112 registers: 52 B), smem 231 -> 189 KB.
# PREDICTION: 32 heads fp8_ds_mla 512 tokens 0.352 -> 0.30-0.33 ms (1.07-1.17x; issue 3 asks <= 0.314); bit-equal.
# OUTCOME (bench/logs/s22_ws.log): bit-equal, and 0.944-0.986x at every shape; the config was removed, so this script
# needs the tree at a8df6ed.
#   bash bench/gpu_s22_ws.sh   (log $OUT/ws.log, results under $OUT/r, $OUT/r.tgz; ~6 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG DSATTN_G64_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/ws.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
ab() {  # layout heads config name [tokens]
  timeout 70 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${5:-512} --heads $2 --layout $1 \
    --b env:DSATTN_WS_CONFIG=$3 --name ab_s22_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab default vs $3 ($1, $2 heads, ${5:-512} tokens) rc=$?" >> $L; tail -n 3 $R/ab_$4.log | head -n 2 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
# first one A/B (a hang shows as its timeout, before the tests spend their time)
ab fp8_ds_mla 32 3/128/8/0/3/32 ws_d3u32_fp8_h32
timeout 240 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE \
  -k "register_producers and gluon_ws" > $R/t_ws.log 2>&1
echo "ws register producer GPU tests rc=$?" >> $L; tail -n 4 $R/t_ws.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
ab fp8_ds_mla 32 3/128/8/0/2/32 ws_d2u32_fp8_h32
ab fp8_ds_mla 32 3/128/8/0/3/16 ws_d3u16_fp8_h32
ab fp8_ds_mla 32 3/128/4/0/2/16 ws_d2u16w4_fp8_h32
BEST=$(python - "$R" <<'PY'
import glob, json, sys
rows = [json.load(open(f))["rows"][0] for f in glob.glob(sys.argv[1] + "/ab_s22_ws_*_fp8_h32.json")]
rows = [r for r in rows if r["max_abs_out_diff"] == 0 and r["max_rel_lse_diff"] == 0]
if rows:
    print(max(rows, key=lambda r: r["ratio_a_over_b"])["b"].split("=", 1)[1])
PY
)
echo "best at fp8 32 heads 512: ${BEST:-none}" >> $L
[ -n "$BEST" ] && ab fp8_ds_mla_nope 32 $BEST ws_best_nope_h32
[ -n "$BEST" ] && ab fp8_ds_mla 32 $BEST ws_best_fp8_h32_2048 2048
tar -czf $OUT/r.tgz -C $OUT r
