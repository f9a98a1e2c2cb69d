#!/usr/bin/env bash
# Written in session 76 for the next device call (one GPU, no carry but .peer for part t; results under $OUT).
# (1) GPU tests of the pair after session 76 removed PrefillConfig.ring and pe (the default's PTX is the same as at
#     09992f9, but no GPU test ran after the removal): the pair's default-path tests and its options.
# (2) PART t: issue 3's prefill table as CUDA-graph replays (`--graph`): is the 32-head s_q 8192 row's eager time
#     (H200 3.275 ms, ~190 us above ten calls back to back, 3.082) host work that do_bench exposes?
#     PREDICTION: as replays the 32-head row at s_q 8192 reads >= 1.18x on the H200 (eager 1.131x).
#   DSATTN_GIT_COMMIT=<sha> bash bench/s77/run.sh              (tests)
#   PART=t DSATTN_GIT_COMMIT=<sha> bash bench/s77/run.sh       (the table as replays; carry .peer)
#   PART=both TEST_S=240 DSATTN_GIT_COMMIT=<sha> bash bench/s77/run.sh   (session 77: tests, then the table; carry .peer)
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
L=$OUT/s77.log
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
table() {
  PARTS=prefill TABLE_TAG=s77_graph TABLE_ARGS=--graph bash bench/gpu_s16_table.sh
  cat $OUT/tb.log >> $L; rm -rf $OUT/r $OUT/tb.log  # all of it is in r.tgz
}
if [ "${PART:-tests}" = t ]; then table; cat $L; exit 0; fi
timeout ${TEST_S:-300} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "pair" > $OUT/tests.log 2>&1
echo "tests pair rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 20 | cut -c1-300 >> $L
cat $L
if [ "${PART:-tests}" = both ]; then table; cat $L; fi
