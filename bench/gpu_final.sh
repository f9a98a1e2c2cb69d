#!/usr/bin/env bash
# The lead's last device call of session 9 (one H200): correctness of what changed, then timings.
# Usage on the device machine, from a copy of the tree: DSATTN_GIT_COMMIT=<sha> bash bench/gpu_final.sh
# (.peer beside or inside the tree for FlashMLA). Logs and JSON land in $OUT.
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
P="-q -p no:cacheprovider -rs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
# 1. correctness, side by side (compile-bound): the warp-specialized kernel (now auto's for fp8 <= 16 heads),
#    the backend through it, the TP test, top-k's new knobs; top-k caches warmed for step 2
(timeout 120 python -m pytest tests/gpu/test_sparse_mla_gpu.py $P -k "gluon_ws or unaligned" > $OUT/t_ws.log 2>&1; echo "rc=$?" >> $OUT/t_ws.log) &
(timeout 120 python -m pytest tests/gpu/test_backend_gpu.py tests/gpu/test_tp_gpu.py $P > $OUT/t_backend.log 2>&1; echo "rc=$?" >> $OUT/t_backend.log) &
V=v4,v4_early,v4_early_tau,v4_fuse,v4_fuse_early,v4_stop1_tau,v4_early_tau_stop1,v4_stop2_filter,v4_fuse_early_stop2
C=4096x65536:full,4096x65536:ragged,1024x131072:full
for i in v4_early v4_fuse_early_segs1; do (timeout 60 python -m pytest tests/gpu/test_indexer_gpu.py $P -k "topk_sets and $i" > $OUT/t_topk_$i.log 2>&1; echo "rc=$?" >> $OUT/t_topk_$i.log) & done
for i in 0 1 2 3 4 5; do timeout 50 python bench/topk_v3.py --warm $i/6 --variants $V > $OUT/warm$i.log 2>&1 & done
wait
# 2. timings, one at a time
timeout 34 python bench/topk_v3.py --variants $V --cases $C --rounds 3 --rep-ms 15 --out $OUT/topk_d2.json > $OUT/topk_bench.log 2>&1; echo "topk bench rc=$?"
timeout 60 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16 --tokens 512,2048 --impl auto,gluon --rep-ms 40 --out $OUT --name sparse_mla_ws > $OUT/mla_table.log 2>&1; echo "mla table rc=$?"
timeout 75 python -m dsattn.cli calibrate --rep-ms 10 --tokens 32 64 128 256 512 1024 --out $OUT/calibration_h200.json > $OUT/calibrate.log 2>&1; echo "calibrate rc=$?"
for f in $OUT/t_*.log; do echo "== $f"; grep -E "passed|failed|FAILED|rc=" $f | tail -n 4; done
grep -h "Error" $OUT/warm*.log | head -3; cut -c1-110 $OUT/topk_bench.log | tail -n 14; tail -n 12 $OUT/mla_table.log; tail -n 10 $OUT/calibrate.log
