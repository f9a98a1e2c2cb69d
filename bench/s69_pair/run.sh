#!/usr/bin/env bash
# Session 69, call 1 (carry [".peer"]): 1. the GPU tests session 68 wrote and did not run (row_scratch over the split
# short prefill, D_qk 512, pad64) with the other row_scratch tests and the hang guard; 2. config pair over pre16's rows
# (bench/s69_pair/pair_pre16.py, its header has the prediction); 3. DSAAttention.bf16_row_scratch against off
# (bench/s69_serve_rows.py, prediction there).
#   DSATTN_GIT_COMMIT=<sha> bash bench/s69_pair/run.sh     ($OUT/s69a.log)
# (Never ran as written: the port, gluon_pair.py, came first and run2.sh measured it. It needs the measuring copy
# bench/s69_pair/gluon_prefill.py, not in the tree: pair_pre16.py's header says how to recreate it; and PAIR=copy.)
set -u
export PYTHONPATH=src:.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
L=$OUT/s69a.log
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
timeout ${TEST_S:-200} python -m pytest -q -p no:cacheprovider -rfE tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "row_scratch or hang_guard" > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
grep -E "^(FAILED|ERROR)" $OUT/tests.log >> $L
cp bench/s69_pair/gluon_prefill.py src/dsattn/ops/sparse_mla/gp_pair69.py
PAIR=copy timeout ${PAIR_S:-300} python bench/s69_pair/pair_pre16.py ${CASES:-32:1024,64:1024,16:1024,32:8192} >> $L 2>&1
echo "pair rc=$? $((SECONDS - t0)) s" >> $L
rm -f src/dsattn/ops/sparse_mla/gp_pair69.py
timeout ${SERVE_S:-170} python bench/s69_serve_rows.py ${SERVE_CASES:-} >> $L 2>&1
echo "serve rows rc=$? $((SECONDS - t0)) s" >> $L
cat $L
