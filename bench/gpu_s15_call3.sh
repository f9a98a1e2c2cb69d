#!/usr/bin/env bash
# Session 15, device call 3: the backend GPU tests (the CUDA-graph decode test as fixed after call 2), `dsattn bench
# serve --graph` (eager vs replay: selections, outputs, determinism of two eager calls), then the public sparse MLA
# and indexer GPU tests at HEAD (the ops' eager path through ops/_eager.op_or_body since session 14), then the demo.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s15_call3.sh      (log $OUT/c3.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/c3.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 150 python -m pytest tests/gpu/test_backend_gpu.py $P > $R/t_backend.log 2>&1
echo "backend GPU tests rc=$?" >> $L; grep -E "passed|failed|FAILED|Error" $R/t_backend.log | tail -n 12 >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 150 python -m dsattn.cli bench serve --graph --rep-ms 100 --out $R --name serve_s15_graph > $R/serve_graph.log 2>&1
echo "bench serve --graph rc=$?" >> $L; grep -E " ms/step|Error" $R/serve_graph.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 170 python -m pytest tests/gpu/test_sparse_mla_gpu.py $P -k "prefill_heads or decode_layouts or decode_page_sizes \
  or decode_heads_fp8 or decode_split_k or repeated or every_small or odd_topk or unaligned" > $R/t_mla.log 2>&1
echo "sparse MLA public GPU tests rc=$?" >> $L; grep -E "passed|failed|FAILED" $R/t_mla.log | tail -n 8 >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 100 python -m pytest tests/gpu/test_indexer_gpu.py $P > $R/t_indexer.log 2>&1
echo "indexer GPU tests rc=$?" >> $L; grep -E "passed|failed|FAILED" $R/t_indexer.log | tail -n 8 >> $L
timeout 40 python -m dsattn.cli demo > $R/demo.log 2>&1
echo "demo rc=$?" >> $L; tail -n 5 $R/demo.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
