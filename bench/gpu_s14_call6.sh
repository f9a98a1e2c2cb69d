#!/usr/bin/env bash
# Session 14, device call 6 (one H200): issue 3's prefill table at s_q 1024 (8..128 heads, FlashMLA native / padded in
# the same process, 3 alternating rounds), eager and as CUDA-graph replays, with the current default (the last
# full prefill tables are session 12's, c325c6d; the kernel timed alone reads 0.730 ms at 64 heads this session,
# sparse_mla_s14_pf_ahead.json, against 0.759 in session 12's table).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s14_call6.sh      (log $OUT/c6.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/c6.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
for mode in eager graph; do
  G=""; [ $mode = graph ] && G="--graph"
  timeout 270 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32,64,128 --tokens 1024 \
    --impl auto --rep-ms 20 $G --out $R --name sparse_mla_s14_prefill_1024_$mode > $R/pf_$mode.log 2>&1
  echo "prefill 1024 $mode rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/pf_$mode.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
done
