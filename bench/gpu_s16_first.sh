#!/usr/bin/env bash
# Written in session 15 for the next device session (NOT YET RUN): what session 15 changed after its device time
# ran out. The backend GPU tests in their final form (two eager calls must be bit-equal on every path: the ordered
# top-k), the top-k GPU tests with their column-order assertion, `dsattn bench serve` with prepare_batch_ms
# (RequestBatch on the GPU machine's host), then the indexer decode bench (logits + the ordered top-k against
# DeepGEMM + torch.topk, graph timings: the README row predates the order).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s16_first.sh      (log $OUT/f.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/f.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 170 python -m pytest tests/gpu/test_backend_gpu.py $P > $R/t_backend.log 2>&1
echo "backend GPU tests rc=$?" >> $L; grep -E "passed|failed|FAILED|Error" $R/t_backend.log | tail -n 12 >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 100 python -m pytest tests/gpu/test_indexer_gpu.py $P -k topk_sets > $R/t_topk.log 2>&1
echo "top-k GPU tests (sets, column order) rc=$?" >> $L; grep -E "passed|failed|FAILED" $R/t_topk.log | tail -n 8 >> $L
timeout 150 python -m dsattn.cli bench serve --out $R --name serve_s16 > $R/serve.log 2>&1
echo "bench serve rc=$?" >> $L; grep -E " ms/step|Error" $R/serve.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 250 python -m dsattn.bench.kernels_indexer --op indexer_decode --out-dir $R > $R/idx_decode.log 2>&1
echo "indexer_decode rc=$?" >> $L; tail -n 12 $R/idx_decode.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
