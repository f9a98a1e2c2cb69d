#!/usr/bin/env bash
# Session 12: which implementation failed the decode table's CUDA-graph replays in session 11
# (cudaErrorInvalidAddressSpace)? dsattn alone (--no-peer), then FlashMLA beside it at one head count.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s12_graph.sh     (results in $OUT/r.tgz, log $OUT/graph.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/graph.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 100 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16,32,64,128 --tokens 512 \
  --impl auto --rep-ms 10 --graph --no-peer --out $R --name sparse_mla_s12_decode_512_graph > $R/g_nopeer.log 2>&1
echo "no-peer rc=$?" >> $L; grep -E "^ *decode|Error|error" $R/g_nopeer.log | head -30 >> $L; tar -czf $OUT/r.tgz -C $OUT r
timeout 60 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8 --tokens 512 \
  --impl auto --rep-ms 10 --graph --out $R --name s12_decode_graph_peer > $R/g_peer.log 2>&1
echo "peer rc=$?" >> $L; grep -E "^ *decode|Error|error" $R/g_peer.log | head -20 >> $L; tar -czf $OUT/r.tgz -C $OUT r
