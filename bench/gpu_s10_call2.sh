#!/usr/bin/env bash
# Session 10, device call 2 (one H200): first run of the grouped bf16 prefill kernel (gluon_prefill) and of the
# union lists (grouping.py); gluon_ws tests with the 8-warp producer default; L2-prefetch sweeps of gluon_ws and
# gluon64. Usage on the device machine, from a copy of the tree: DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s10_call2.sh
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
P="-q -p no:cacheprovider -rs"
R=$OUT/r; mkdir -p $R
L=$OUT/call2.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
# 1. gluon_ws tests (8-warp producer default) in the background, compile-bound, while helper P's prefill script
#    runs its hang guard and tests (bench/gpu_pf_call1.sh; the ws tests end before its timings start)
(timeout 150 python -m pytest tests/gpu/test_sparse_mla_gpu.py $P -k "gluon_ws" > $R/t_ws.log 2>&1; echo "rc=$?" >> $R/t_ws.log) &
OUT=$R bash bench/gpu_pf_call1.sh; echo "pf script rc=$?" >> $L
wait
echo "== t_ws" >> $L; grep -E "passed|failed|FAILED|Error|rc=" $R/t_ws.log | tail -n 12 >> $L
cat $R/pf1.log >> $L
# 2. timings, one at a time
timeout 60 python -m dsattn.ops.sparse_mla.grouping --bench >> $L 2>&1; echo "grouping bench rc=$?" >> $L
timeout 120 python bench/mla_gluon_sweep.py --ws --rep-ms 30 --out $R >> $L 2>&1; echo "ws sweep rc=$?" >> $L
timeout 90 python bench/mla_gluon_sweep.py --g64 --rep-ms 30 --out $R >> $L 2>&1; echo "g64 sweep rc=$?" >> $L
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $R
