#!/usr/bin/env bash
# Session 15, device call 2: the backend GPU tests (with the new CUDA-graph decode test), then `dsattn bench serve`
# eager (step, prepare, layer) and, in a process of its own, with --graph (the layer as CUDA-graph replays).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s15_call2.sh      (log $OUT/c2.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/c2.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 200 python -m pytest tests/gpu/test_backend_gpu.py $P > $R/t_backend.log 2>&1
echo "backend GPU tests rc=$?" >> $L; grep -E "passed|failed|FAILED|Error" $R/t_backend.log | tail -n 12 >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 200 python -m dsattn.cli bench serve --out $R --name serve_s15 > $R/serve.log 2>&1
echo "bench serve rc=$?" >> $L; grep -E " ms/step|Error" $R/serve.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 170 python -m dsattn.cli bench serve --graph --rep-ms 100 --out $R --name serve_s15_graph > $R/serve_graph.log 2>&1
echo "bench serve --graph rc=$?" >> $L; grep -E " ms/step|Error" $R/serve_graph.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
