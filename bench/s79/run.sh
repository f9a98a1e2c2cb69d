#!/usr/bin/env bash
# Written in session 78 for the next device call (one GPU, carry .peer; results under $OUT, <= 5 files).
# (1) The pair's GPU tests on the tree session 78 ended with (vst the pair's default; session 78's last calls ran them
#     at b1ec4ce, whose src/ and tests/ the final tree shares but for a comment): pair_over_converted_rows,
#     pair_options, pair_split_options, pair_stamps, pair_other_paths, row_scratch_bit_equal.
# (2) Issue 3's prefill table as CUDA-graph replays beside FlashMLA. On an H200 (none came in sessions 77-78) this is
#     the issue's own card: session 76's eager table there read 1.176x / 1.131x at 32 heads, before vst (1.028x at 32
#     heads s_q 1024 on an H100). PREDICTION on an H200: 32 heads >= 1.20x at s_q 1024 and >= 1.16x at 8192.
#   DSATTN_GIT_COMMIT=<sha> bash bench/s79/run.sh
LOG=s79.log TAG=s79
source bench/gpu_lib.sh  # (the environment, $L with the GPU's name; $OUT/r, which the table below also fills)
unset DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
t0=$SECONDS
timeout ${TEST_S:-240} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "pair_over_converted_rows or pair_options or pair_split_options or pair_stamps or pair_other_paths or row_scratch_bit_equal" \
  > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 10 | cut -c1-300 >> $L
PARTS=prefill TABLE_TAG=s79_graph TABLE_ARGS=--graph bash bench/gpu_s16_table.sh
cat $OUT/tb.log >> $L; rm -rf $OUT/r $OUT/tb.log  # all of it is in r.tgz
cat $L
