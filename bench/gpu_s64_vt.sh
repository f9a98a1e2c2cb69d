#!/usr/bin/env bash
# Session 64: config vt of gluon_prefill (fp16 P without the producer's conversion pass: O^T += V^T P^T with V^T
# converted in registers; PrefillConfig.vt) on the GPU. 1. a tiny case under a timeout (hang guard), then the prefill
# GPU tests that take DSATTN_PF_CONFIG (heads, overlap, D 512) under vt; 2. `dsattn bench ab`, A the
# default, B vt: 32 heads s_q 1024 / 8192, 64 heads s_q 1024 (vst 1 at 64 as the default there);
# 3. the 32-head timing build without gathers under vt (bench/prefill_kernel_probe.py, DSATTN_PF_PROFILE=1).
# PREDICTION (H100): the consumers alone at 32 heads move from the default's 2.70 us a block toward bf16 P's 2.36
# (session 64's probe), less the conversion now on the consumers' path: vt 1.03-1.10x the default at 32 / 64 heads.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s64_vt.sh      ($OUT/s64.log, $OUT/s64.tgz)
# RAN at f3ae6df on an H100 (bench/results/gpu_s64_vt_script_h100.log): right, and slower (0.878-0.912x); config vt
# was removed afterwards, so this script needs f3ae6df's src/ to run again.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
VT="vt=1,cvt_pipe=0,producer_regs=56"
L=$OUT/s64.log; R=$OUT/q; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader > $L; echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
pack() { tar -czf $OUT/s64.tgz -C $OUT q s64.log; }
t0=$SECONDS
DSATTN_PF_CONFIG=$VT timeout 60 python - > $R/guard.log 2>&1 <<'PY'
import torch
from dsattn.ops.sparse_mla import sparse_mla_prefill
from dsattn.ops.sparse_mla.testing import check_close, make_case, poisoned_outputs
import os
os.environ["DSATTN_SPARSE_MLA_IMPL"] = "gluon_prefill"
for h in (8, 32, 64):
    case = make_case(9, h, 576, num_slots=2048, topk=200, layout="bf16", block_size=1, device="cuda", seed=h)
    out, lse = poisoned_outputs(9, h, "cuda", 0)
    sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, out=out, lse=lse)
    torch.cuda.synchronize()
    print(h, check_close(out, lse, *case.reference()))
PY
echo "guard rc=$? $((SECONDS - t0)) s" >> $L; tail -n 6 $R/guard.log >> $L; pack
if grep -q "^64 " $R/guard.log; then
  DSATTN_PF_CONFIG=$VT timeout 90 python -m pytest -q -p no:cacheprovider -rfE -s \
    tests/gpu/test_sparse_mla_prefill_gpu.py -k "heads or overlap or d512" \
    > $R/pf_tests.log 2>&1
  echo "prefill tests under vt rc=$? $((SECONDS - t0)) s" >> $L
  grep -E "passed|failed|Error" $R/pf_tests.log | tail -n 12 >> $L; pack
  for c in "1024 32 " "1024 64 ,vst=1" "8192 32 "; do
    set -- $c; extra=${3:-}
    timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $1 --heads $2 \
      --b "env:DSATTN_SPARSE_MLA_IMPL=gluon_prefill,env:DSATTN_PF_CONFIG=${VT//,/;}${extra//,/;}" \
      --name ab_s64_vt_${1}_h$2 --out $R > $R/ab_vt_$1_$2.log 2>&1
    echo "== ab prefill s_q $1, $2 heads (A default, B $VT$extra) rc=$? $((SECONDS - t0)) s" >> $L
    tail -n 4 $R/ab_vt_$1_$2.log | cut -c1-200 >> $L; pack
  done
  for p in 0 1; do
    echo "== vt probe h 32 profile $p" >> $L
    DSATTN_PF_CONFIG=$VT DSATTN_PF_PROFILE=$p timeout 60 python bench/prefill_kernel_probe.py 32 2>&1 \
      | grep -v -i warn | head -n 3 >> $L
  done
fi
pack; cat $L
