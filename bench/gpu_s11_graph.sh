#!/usr/bin/env bash
# Session 11, last device call (one H200): issue 3's 8 / 16-head rows with CUDA-graph replays of both dsattn and
# FlashMLA (GPU time; eager dsattn calls at 8 heads are host-bound: bench/graph_check.py, 0.284 ms graph vs 0.39-0.48
# eager for the 8-head prefill).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s11_graph.sh     (results in $OUT/r.tgz, log $OUT/graph.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/graph.log
timeout 80 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32,64,128 --tokens 1024 \
  --impl auto --rep-ms 10 --graph --out $R --name sparse_mla_s11_prefill_1024_graph > $R/prefill.log 2>&1
echo "prefill rc=$?" >> $L; grep -E "^ *prefill|FlashMLA" $R/prefill.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
timeout 60 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16 --tokens 512,2048 \
  --impl auto --rep-ms 10 --graph --out $R --name sparse_mla_s11_decode_graph > $R/decode.log 2>&1
echo "decode rc=$?" >> $L; grep -E "^ *decode|FlashMLA" $R/decode.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
