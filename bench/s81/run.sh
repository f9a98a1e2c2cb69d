#!/usr/bin/env bash
# Written in session 80 for the next device call (an H200 if one comes; carry .peer; results under $OUT).
#   DSATTN_GIT_COMMIT=<sha> bash bench/s81/run.sh
# (1) Issue 3's prefill table as CUDA-graph replays beside FlashMLA (the same as session 79's call 3), with session
#     80's union kernel (the copy bound from a shared word). PREDICTION (H200): 32 heads ~1.253x / ~1.287x at s_q 1024
#     / 8192 (session 79: 1.249x / 1.282x, 0.407 / 3.149 ms, less ~1.5 / ~13 us of union lists).
# (2) The fused union kernel's GPU tests that session 80's calls did not reach: test_dense_fused_limit,
#     test_dense_fused_prefill_over_a_long_source.
PARTS=prefill TABLE_TAG=s81_graph TABLE_ARGS=--graph bash bench/gpu_s16_table.sh
export PYTHONPATH=$PWD/src:$PWD/.peer
timeout 150 python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_grouping_gpu.py \
  -k "dense_fused_limit or long_source" > $OUT/tests.log 2>&1
echo "tests rc=$?: $(tail -n 1 $OUT/tests.log)" >> $OUT/tb.log
grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 10 | cut -c1-300 >> $OUT/tb.log
cat $OUT/tb.log
