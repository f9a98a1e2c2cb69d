#!/usr/bin/env bash
# Session 78, device call 2 (one GPU, no carry; results under $OUT): what a gluon_pair program spends outside its
# steps. test_pair_stamps (the program slot's stamps in order, outputs bit-equal), then bench/s78/edges.py at 32 heads
# s_q 1024 / 8192 and 16 heads s_q 1024 (program prologue, epilogue, the SM's gap between programs, the tail).
#   DSATTN_GIT_COMMIT=<sha> bash bench/s78/run2.sh
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
L=$OUT/s78_edges.log
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
timeout ${TEST_S:-200} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "pair_stamps" > $OUT/tests2.log 2>&1
echo "tests pair_stamps rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests2.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests2.log | head -n 10 | cut -c1-300 >> $L
timeout ${EDGE_S:-240} python bench/s78/edges.py ${EDGE_CASES:-32:1024,32:8192,16:1024} >> $L 2>&1
echo "edges rc=$? $((SECONDS - t0)) s" >> $L
cat $L
