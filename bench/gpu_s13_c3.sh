#!/usr/bin/env bash
# Session 13, helper C3 (one H200): gluon_rx with three ping-pong consumers over 8-head programs (consumers 3) without
# spills in the consumers' loops (config spillfix 3; sm_90a compile check: bench/mla_gluon_check.py --kernel rx).
#   1. hang guard: one tiny three-consumer launch per layout in a child process (120 s); stops the script if it fails
#   2. GPU tests: test_rx_pingpong3 (producer warps 4 / 2 / 1, fp8_ds_mla and nope) and test_rx_pingpong2_spillfix
#   3. timings (bench/mla_rx_bench.py, 8 heads, fp8_ds_mla and nope, 512 and 2048 tokens, beside gluon_ws): the
#      default against four spill-free three-consumer configs, all spillfix 3 (the bench's labels show the first 10
#      fields only; rx_fit cuts fp8_ds_mla's 5 stages to 4)
#   bash bench/gpu_s13_c3.sh      (from the repo root; log $OUT/c3.log, everything else under $OUT/r)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/c3.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
git log -1 --format=%h >> $L 2>/dev/null

timeout 120 python - > $R/guard.log 2>&1 <<'EOF'
import os
os.environ["DSATTN_SPARSE_MLA_IMPL"] = "gluon_rx"
import torch
from dsattn.ops.sparse_mla import sparse_mla_decode
from dsattn.ops.sparse_mla.testing import check_close, make_case, poisoned_outputs
for layout, d, cfg in (("fp8_ds_mla", 576, "4/56/4/0/1/3/0/0/1/1/3"), ("fp8_ds_mla_nope", 512, "5/56/4/0/1/3/0/0/1/1/3")):
    os.environ["DSATTN_RX_CONFIG"] = cfg
    case = make_case(3, 8, d, num_slots=3000, topk=200, layout=layout, block_size=64, with_length=True, seed=1,
                     device="cuda")
    out, lse = poisoned_outputs(3, 8, "cuda")
    sparse_mla_decode(case.q, case.cache, case.indices, case.sm_scale, topk_length=case.topk_length, out=out,
                      lse=lse, variant="native")
    torch.cuda.synchronize()
    print(layout, cfg, check_close(out, lse, *case.reference()))
EOF
rc=$?; echo "guard rc=$rc" >> $L; tail -n 3 $R/guard.log >> $L
if [ $rc -ne 0 ]; then echo "hang guard failed: stopping" >> $L; exit 1; fi

timeout 200 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -s -k "pingpong3 or pingpong2_spillfix" \
  > $R/t_pp3.log 2>&1
echo "pp3 tests rc=$?" >> $L; grep -E "vs|passed|failed|error" $R/t_pp3.log | tail -n 40 >> $L

for n in 512 2048; do
  timeout 150 python bench/mla_rx_bench.py --heads 8 --layouts fp8_ds_mla,fp8_ds_mla_nope --tokens $n --rep-ms 20 \
    --configs default,5/56/4/0/1/3/0/0/1/1/3,5/48/4/0/1/3/0/0/1/1/3,5/56/4/0/0/3/0/0/1/1/3,5/64/2/0/1/3/0/0/1/1/3 \
    --out $R > $R/rx3_$n.log 2>&1
  echo "rx3 $n rc=$?" >> $L; grep -E " ms|FAILED" $R/rx3_$n.log >> $L
  [ -f $R/sparse_mla_rx_bench.json ] && mv $R/sparse_mla_rx_bench.json $R/s13_rx3_$n.json
done
