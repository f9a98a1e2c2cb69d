#!/usr/bin/env bash
# Session 14, device call 8 (one H200): the prefill default with a token's head blocks as neighbouring programs (1-D
# launch; persist removed): hang guard + heads / overlap / chunks GPU tests, then issue 3's prefill table at s_q 1024
# (FlashMLA in the same process, 3 alternating rounds, eager).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s14_call8.sh      (log $OUT/c8.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/c8.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 100 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "hang_guard or heads or chunks" \
  > $R/t_pf.log 2>&1
echo "tests rc=$?" >> $L; tail -n 3 $R/t_pf.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
if grep -q "passed" $R/t_pf.log && ! grep -qE "failed|Timeout" $R/t_pf.log; then
  timeout 150 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 16,32,64,128 --tokens 1024 \
    --impl auto --rep-ms 20 --out $R --name sparse_mla_s14_prefill_1024_order > $R/pf.log 2>&1
  echo "prefill 1024 rc=$?" >> $L; grep -E "dsattn:native|flashmla:" $R/pf.log >> $L
fi
tar -czf $OUT/r.tgz -C $OUT r
