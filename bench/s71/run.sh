#!/usr/bin/env bash
# Session 71 (carry [".peer"]). After two default changes (dispatch.PREFILL_CONVERT_RATIO 2 -> 1;
# DSAAttention.gathered_row_scratch on):
# PART t: the GPU tests they touch: the backend's steps over every path (the fp8_gathered steps now convert their
#   context rows; the keyed bf16 steps at 16 heads now convert), allocation-free at the predicted peak, the knob off,
#   the random steps; the prefill kernel's row_scratch / pair tests.
# PART h: issue 3's prefill table (bench/gpu_s16_table.sh PARTS=prefill, FlashMLA in the same process), tagged by card.
#   PART=t DSATTN_GIT_COMMIT=<sha> bash bench/s71/run.sh     ($OUT/s71_<part>.log)
set -u
FORCE_H=${FORCE_H:-0}
export PYTHONPATH=src:.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
P=${PART:-t}
L=$OUT/s71_$P.log
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$GPU tree ${DSATTN_GIT_COMMIT:-?} part $P" > $L
t0=$SECONDS
if [ "$P" = t ]; then
  timeout ${TEST_S:-400} python -m pytest -v -p no:cacheprovider -rfE --tb=short \
    tests/gpu/test_backend_gpu.py tests/gpu/test_sparse_mla_prefill_gpu.py \
    -k "${TESTS_K:-test_step_matches_reference or no_allocation or gathered_row_scratch or keyed_prefill or random_step or row_scratch or pair_over}" \
    > $OUT/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
  grep -E "(PASSED|FAILED|ERROR)" $OUT/tests.log | grep -vE "^(FAILED|ERROR)" \
    | sed -E 's/.*::(.*) (PASSED|FAILED|ERROR).*/\2 \1/' >> $L
  grep -E "^E " $OUT/tests.log | head -n 12 | cut -c1-300 >> $L
fi
if [ "$P" = h ]; then
  case "$GPU" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
  PARTS=prefill TABLE_TAG=s71_$tag bash bench/gpu_s16_table.sh > /dev/null 2>&1
  cp $OUT/r/*.json $OUT/ 2>/dev/null; rm -rf $OUT/r $OUT/r.tgz; cat $OUT/tb.log >> $L; rm -f $OUT/tb.log
fi
# PART v (session 71, after the host-work commit): f16_rows' GPU tests through the fast launch, the lone and in-table
# 16-head timings with host times (bench/s71/table16.py), bench/host_overhead.py on the GPU, then PART h's table
# on an H200 (FORCE_H=1: on any card).
if [ "$P" = v ]; then
  timeout 150 python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
    -k "row_scratch_bit_equal or pair_over" > $OUT/tests_v.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests_v.log)" >> $L
  timeout 120 python bench/s71/table16.py 8,16,32 >> $L 2>&1
  echo "table16 rc=$? $((SECONDS - t0)) s" >> $L
  timeout 90 python bench/host_overhead.py --breakdown >> $L 2>&1
  echo "host_overhead rc=$? $((SECONDS - t0)) s" >> $L
  case "$GPU$FORCE_H" in *H200*|*1)  # the table on an H200 (README's H200 rows are session 60's), or FORCE_H=1
    PART=h bash bench/s71/run.sh > /dev/null; cat $OUT/s71_h.log >> $L ;; esac
fi
cat $L
