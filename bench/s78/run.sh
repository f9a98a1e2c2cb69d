#!/usr/bin/env bash
# Written in session 77 for the next device call (one GPU, carry .peer; results under $OUT, 5 files).
# (1) The grouping GPU tests session 77's calls did not reach after dups_block (the repeated-slot kernel in one wave
#     of programs): tests/gpu/test_grouping_gpu.py's last 11 (key_slots, hash order, the long sources).
# (2) Issue 3's prefill table as CUDA-graph replays (`--graph`, FlashMLA in the same process). On an H200 this tests
#     session 76's prediction: the 32-head s_q 8192 row >= 1.18x as replays (eager 1.131x, session 76). (Session 77
#     ran it on an H100: 1.168x / 1.258x, within 1% of that card's eager table.)
#   DSATTN_GIT_COMMIT=<sha> bash bench/s78/run.sh
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
L=$OUT/s78.log
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
timeout ${TEST_S:-240} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_grouping_gpu.py \
  -k "key_slots or hash_order or long_source" > $OUT/tests.log 2>&1
echo "tests grouping rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 10 | cut -c1-300 >> $L
PARTS=prefill TABLE_TAG=s78_graph TABLE_ARGS=--graph bash bench/gpu_s16_table.sh
cat $OUT/tb.log >> $L; rm -rf $OUT/r $OUT/tb.log  # all of it is in r.tgz
cat $L
