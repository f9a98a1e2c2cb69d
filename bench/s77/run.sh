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
# (3) session 77, PART both: the repeated-slot kernel's blocks (grouping.dups_block): the grouping GPU tests, then
#     torch.profiler's kernel times of the 32 / 8-head call with one program a group (DSATTN_DUPS_BLOCK=1, as
#     before) and with the default, then `dsattn bench ab` at 8 heads s_q 8192.
#     PREDICTION: _group_union_dups_kernel 16.3 -> <= 4 us at s_q 8192 (128 programs, one load each, against 4096
#     programs in ~31 waves at one an SM), ~2.4 -> <= 2.5 at 1024; the 8-head s_q 8192 call ~1% faster.
# (4) session 77 ran PART both at ffb36b9 (H100, bench/results/s77/); it also A/B'd gluon_prefill.PIPE (chunks on two
#     streams), removed after that run, so those A/Bs are gone from this script (e2519b3 has them).
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
timeout ${TEST_S:-240} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "pair" > $OUT/tests.log 2>&1
echo "tests pair rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 20 | cut -c1-300 >> $L
cat $L
if [ "${PART:-tests}" = both ]; then
  timeout 150 python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_grouping_gpu.py > $OUT/tests_grouping.log 2>&1
  echo "tests grouping rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests_grouping.log)" >> $L
  grep -E "^(FAILED|ERROR)|^E " $OUT/tests_grouping.log | head -n 10 | cut -c1-300 >> $L
  for b in 1 0; do
    if [ $b = 1 ]; then export DSATTN_DUPS_BLOCK=1; else unset DSATTN_DUPS_BLOCK; fi
    echo "== prof DSATTN_DUPS_BLOCK=${DSATTN_DUPS_BLOCK:-default}" >> $L
    timeout 100 python bench/s76/prof.py 32 8 >> $L 2>&1
  done
  unset DSATTN_DUPS_BLOCK
  timeout 120 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens 8192 --heads 8 \
    --a "row_scratch=1,env:DSATTN_DUPS_BLOCK=1" --b "row_scratch=1" --name ab_s77_dups_8192_h8 --out $OUT >> $L 2>&1
  echo "ab rc=$? $((SECONDS - t0)) s" >> $L
  table; cat $L
fi
