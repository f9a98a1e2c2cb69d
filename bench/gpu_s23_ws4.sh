#!/usr/bin/env bash
# Session 23, device call 4 (one H200): where the 32-head decode (gluon_ws, ahead 2 since call 1) now spends its time.
# (1) WsConfig ahead 3 / 4 (entries loaded three / four half-blocks before their gather; the producer at 152
# registers: at 128 they spill 12-20 B, sm_90a compile check), against the default: if the gathers still wait on
# their index loads, these are faster. (2) Timing builds at ahead 2 and 4: full, producer alone, gathers alone,
# gathers alone with computed entries (PROFILE 5: no index loads at all), consumer alone. Calls 1-2 found the gathers
# alone at ~0.24 ms whether 1, 2 or 3 units of rows fly (bench/logs/s23_ws*.log): PROFILE 5 tells whether the index
# loads are what holds them there. (3) Nsight Compute source counters of the default (bench/ncu_stalls.py).
# PREDICTION: ahead 3 / 4 within 1.00-1.03x of ahead 2; PROFILE 5 below 0.2 ms if the index loads bind the gathers.
# OUTCOME (bench/logs/s23_ws4.log): ahead 3 / 4 no faster (0.989x / 0.993x); the hashed-entries build was 0.69 ms
# (another access pattern: uninformative); ncu in bench/logs/s23_profile/. Needs a183326 (both were removed).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s23_ws4.sh   (log $OUT/ws4.log, results under $OUT/r, $OUT/r.tgz; ~6 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG DSATTN_G64_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/ws4.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
ab() {  # layout heads configB name [tokens]
  timeout 80 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${5:-512} --heads $2 --layout $1 \
    --b env:DSATTN_WS_CONFIG=$3 --name ab_s23_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab default vs $3 ($1, $2 heads, ${5:-512} tokens) rc=$?" >> $L; tail -n 3 $R/ab_$4.log | head -n 2 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab fp8_ds_mla 32 2/152/4/0/4 a4_fp8_h32
timeout 150 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE -k "ws_ahead" \
  > $R/t_ws4.log 2>&1
echo "ws ahead GPU tests rc=$?" >> $L; tail -n 4 $R/t_ws4.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
ab fp8_ds_mla 32 2/152/4/0/3 a3_fp8_h32
ab fp8_ds_mla 32 2/152/4/0/2 a2r152_fp8_h32
timeout 120 python - > $R/profiles4.log 2>&1 <<'PY'
import json, os, torch
from dsattn.bench.kernels_mla import decode_case
from dsattn.bench.common import time_ms
from dsattn.ops.sparse_mla import gluon_ws
case = decode_case(512, 32, "fp8_ds_mla", torch.device("cuda"))
flat = case.kv.flatten(0, 1)
out = torch.empty((512, 32, 512), dtype=torch.bfloat16, device="cuda")
lse = torch.empty((512, 32), dtype=torch.float32, device="cuda")
rows = []
for spec in ((2, 128, 4, 0, 2), (2, 152, 4, 0, 4)):
    cfg = gluon_ws.WsConfig(*spec)
    for prof, name in ((0, "full"), (1, "producer alone"), (3, "gathers alone"), (5, "gathers, computed entries"),
                       (2, "consumer alone")):
        fn = lambda: gluon_ws.run_attention_ws(case.q, flat, case.layout, case.indices, case.sm_scale, None, out, lse,
                                               config=cfg, profile=prof)
        fn(); torch.cuda.synchronize()
        ms = time_ms(fn, rep_ms=40)
        tag = "/".join(map(str, spec))
        rows.append({"config": tag, "build": name, "ms": ms})
        print(f"{tag} {name:26s} {ms:.4f} ms", flush=True)
json.dump({"rows": rows, "case": "decode fp8_ds_mla 512 tokens 32 heads, uniform, topk 2048"},
          open(os.environ["OUT"] + "/r/ws_profiles_s23_ahead.json", "w"), indent=1)
PY
echo "timing builds rc=$?" >> $L; cat $R/profiles4.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
command -v ncu > /dev/null || { echo "no ncu" >> $L; exit 0; }
n=dc32
timeout 150 ncu --clock-control none -k regex:"sparse_mla_ws_kernel" -s 1 -c 1 --section SourceCounters \
  --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section SpeedOfLight \
  -f -o $R/$n python bench/ncu_cases.py --case decode-fp8-32 > $R/ncu_$n.log 2>&1
echo "== ncu $n rc=$?" >> $L
ncu --import $R/$n.ncu-rep --page source --csv --print-source sass > $R/${n}_source.csv 2> $R/${n}_source.err
ncu --import $R/$n.ncu-rep --page details > $R/${n}_details.txt 2>&1
python bench/ncu_stalls.py $R/${n}_source.csv --top 40 > $R/${n}_stalls.txt 2>&1
head -n 60 $R/${n}_stalls.txt >> $L
grep -iE "Duration|Warp Cycles|Eligible|Issued Warp" $R/${n}_details.txt | head -12 >> $L
rm -f $R/$n.ncu-rep
gzip -f $R/${n}_source.csv
tar -czf $OUT/r.tgz -C $OUT r
