#!/usr/bin/env bash
# Session 14, device call 5 (one H200): the indexer decode bench with CUDA-graph timings (top-k v4 is three launches:
# eager timings at 128 rows are host-bound, bench/results/topk_v3_split.json) and top-k v3 beside it; DeepGEMM and
# torch.topk in the same process.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s14_call5.sh      (log $OUT/c5.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c5.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 400 python -m dsattn.bench.kernels_indexer --op indexer_decode --out-dir $R > $R/idx_decode.log 2>&1
echo "indexer_decode rc=$?" >> $L; tail -n 12 $R/idx_decode.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
