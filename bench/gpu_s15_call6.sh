#!/usr/bin/env bash
# Session 15, device call 6: top-k v4 with the ordered output as packed per-segment ranks (2 segments an int32
# scan; call 5: one scan a segment, +15 us at 128 x 65536; call 4: a row sort, +22 us) against the same launch
# without it; `bench serve --graph` on the two presets whose layers differed run to run in call 3; the top-k GPU
# tests as time allows.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s15_call6.sh      (log $OUT/c6.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/c6.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 80 python bench/topk_v3.py --variants v4_fuse_early,v4_fuse_early_nosort --rounds 3 --rep-ms 30 \
  --cases 128x65536:full,1024x131072:full,4096x65536:full --out $R/topk_packed_s15.json > $R/topk.log 2>&1
echo "topk bench rc=$?" >> $L; grep -E " ms |Error" $R/topk.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 70 python -m dsattn.cli bench serve --graph --rep-ms 50 --configs glm-5:8:fp8_ds_mla deepseek-v3.2:1:fp8_ds_mla \
  --out $R --name serve_s15_graph_packed > $R/serve_graph.log 2>&1
echo "bench serve --graph rc=$?" >> $L; grep -E " ms/step|Error" $R/serve_graph.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 90 python -m pytest tests/gpu/test_indexer_gpu.py $P -k "topk_sets" > $R/t_topk.log 2>&1
echo "top-k GPU tests rc=$?" >> $L; grep -E "passed|failed|FAILED" $R/t_topk.log | tail -n 8 >> $L
tar -czf $OUT/r.tgz -C $OUT r
