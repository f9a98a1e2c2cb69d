#!/usr/bin/env bash
# Session 10, device call 1 (one H200): first run of gluon64 (64-head warp-specialized kernel), gluon_ws after its
# timing-build refactor, then gluon64 vs Triton A/Bs and the gluon_ws sweep with its timing builds.
# Usage on the device machine, from a copy of the tree: DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s10_call1.sh
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
P="-q -p no:cacheprovider -rs -x"
L=$OUT/call1.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
# 1. hang guard: three small gluon64 cases
timeout 120 python -m pytest tests/gpu/test_sparse_mla_gpu.py $P -k "gluon64 and test_g64_odd_topk" >> $L 2>&1; echo "g64 guard rc=$?" >> $L
# 2. correctness (compile-bound, side by side)
(timeout 240 python -m pytest tests/gpu/test_sparse_mla_gpu.py $P -k "gluon64" > $OUT/t_g64.log 2>&1; echo "rc=$?" >> $OUT/t_g64.log) &
(timeout 200 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rs -k "gluon_ws" > $OUT/t_ws.log 2>&1; echo "rc=$?" >> $OUT/t_ws.log) &
wait
for f in $OUT/t_*.log; do echo "== $f" >> $L; grep -E "passed|failed|FAILED|Error|rc=" $f | tail -n 8 >> $L; done
# 3. timings, one at a time
for h in 64 128; do
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens 512 --heads $h \
    --a env:DSATTN_SPARSE_MLA_IMPL=triton --b env:DSATTN_SPARSE_MLA_IMPL=gluon64 --blocks 10 --out $OUT --name ab_g64_h$h >> $L 2>&1
  echo "ab h$h rc=$?" >> $L
done
timeout 120 python bench/mla_gluon_sweep.py --ws --profile --rep-ms 30 --out $OUT >> $L 2>&1; echo "ws sweep rc=$?" >> $L
