#!/usr/bin/env bash
# Written in session 79 for the next device call (one GPU, carry .peer; results under $OUT, <= 5 files).
# (1) The pair's GPU tests on the tree session 79 ended with. odd became the pair's default there; its own tests
#     (test_pair_odd, bit-equal to the pair without it) and the table ran on an H200 at d33fcee, whose default build's
#     sm_90a PTX differs from the final tree's only by pers's unused kernel parameter (bench/mla_gluon_check.py --dump). The default path's tests through rows_config did not run:
#     pair_over_converted_rows, pair_options, pair_split_options, pair_stamps, pair_other_paths, row_scratch_bit_equal.
# (2) Where the 32-head call's time goes now, torch.profiler (bench/s76/prof.py): the pair kernel, the union lists,
#     the row conversion, the duplicates pass, at s_q 1024 and 8192. On the H200 in session 79 the row read 1.249x /
#     1.282x as replays; 1.3x asks 4% / 1.4% less time. PREDICTION (H200): at 8192 the union lists ~80 us of ~3.1 ms.
#   DSATTN_GIT_COMMIT=<sha> bash bench/s80/run.sh
LOG=s80.log TAG=s80
source bench/gpu_lib.sh  # (the environment, $L with the GPU's name; $OUT/r)
unset DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
t0=$SECONDS
timeout ${TEST_S:-240} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "pair_over_converted_rows or pair_options or pair_split_options or pair_stamps or pair_other_paths or row_scratch_bit_equal" \
  > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 10 | cut -c1-300 >> $L
timeout 120 python bench/s76/prof.py 32 2>&1 | grep -v -i warn | tail -n 30 >> $L
echo "prof rc=${PIPESTATUS[0]} $((SECONDS - t0)) s" >> $L
cat $L
