#!/usr/bin/env bash
# Session 74 (no carry: dsattn bench ab runs no peer). One call, most wanted first (a call cut short keeps what ran:
# each step appends to $OUT/s74_a.log).
# (1) session 73's PART b: per-kernel times (bench/s72/kprof.py) at 32 heads s_q 1024 of gluon_pair's consumers alone
#     (PROFILE 1) against no S products (9), no P V products (17), the probe's reads (5), the pair (0), fq's consumers
#     alone. PREDICTION (session 73): if S's shared-memory operands bound the consumers, 9 takes most of 1's time off
#     (S is 53% of the products), 17 less than its 47% share; 5 slower than 1 by about the probe's 7% or more.
# (2) PrefillConfig.lazy (O rescaled only when a row's max rises more than 2^8): GPU tests (test_pair_options -k lazy),
#     kprof of lazy 1 and of its consumers alone, then `dsattn bench ab` pair=1 against pair=1;lazy=1.
#     PREDICTION: the consumers issue 3 x 128 FMULs a thread a step for O's rescales (warpgroup 0 two, warpgroup 1
#     one); skipped, less 3 reductions across a warpgroup's warps: consumers alone 1-3% faster (344 -> 335-341 us),
#     the pair 1.00-1.02x (the consumers are most of the block, session 73).
# (3) bench/s74/clocks.py (needs carry [".peer"]; skipped without it): SM clock and board power while the pair at 32
#     heads, FlashMLA padded to 64 heads (zero rows: issue 3's comparator there) and FlashMLA at 64 heads over
#     non-zero rows each run ~1 s back to back. PREDICTION: if the zero rows are why FlashMLA's padded prefill runs a
#     64-key block in ~2.0 us against 2.19 us at 64 real heads (s72_table2_h100.log: 0.496 against 0.542 ms), fm_pad
#     holds a higher clock or lower power than fm_full at the same clock cap; if not, the two read alike.
# (4) fq's A/B at 8 heads (session 73's open question before fq becomes the pair's default).
#   DSATTN_GIT_COMMIT=<sha> bash bench/s74/run.sh     ($OUT/s74_a.log and one JSON an A/B)
#   PART=stamps DSATTN_GIT_COMMIT=<sha> bash bench/s74/run.sh     (below: gluon_pair's clock stamps; not run yet)
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
L=$OUT/s74_a.log
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$GPU" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
echo "$GPU tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
if [ "${PART:-a}" = stamps ]; then
  # (for the next session, written in session 74 and not run) gluon_pair's clock stamps (DSATTN_PF_PROFILE=32):
  # the GPU tests first (stamps: outputs bit-equal to the plain build, stamps in order; with the default path's pair
  # tests, which session 74's last call cut at 90 s after 4 passed: lazy is the pair's default since), then
  # bench/s74/stamps.py at 32 / 16 / 8 heads s_q 1024. PREDICTION: half the consumers' time is outside the products
  # (session 74's PART b), so a warpgroup's step (~8800 cycles for two blocks at ~1.9 GHz) shows >= 1500 cycles in
  # waits that are not S or P V: the maxima's exchange (m0 -> mc -> warpgroup 0) and the P hand-offs, or the stages'
  # landing (points 8 / 9).
  timeout ${TEST_S:-300} python -m pytest -q -p no:cacheprovider -rfE --tb=short \
    tests/gpu/test_sparse_mla_prefill_gpu.py \
    -k "${TESTS_K:-pair_stamps or pair_over_converted or pair_other_paths}" > $OUT/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
  grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 12 | cut -c1-300 >> $L
  rm -f $OUT/tests.log
  timeout 240 python bench/s74/stamps.py ${STAMP_CASES:-32:1024,16:1024,8:1024} 2>&1 | grep -v -i warn >> $L
  echo "stamps rc=${PIPESTATUS[0]} $((SECONDS - t0)) s" >> $L
  cat $L
  exit 0
fi
kprof() {  # cfg|profile ...
  local arm cfg pf
  for arm in "$@"; do
    cfg=${arm%%|*}; pf=${arm##*|}
    echo "kprof ${cfg//;/,} profile ${pf:-0}: $(DSATTN_PF_CONFIG=${cfg//;/,} DSATTN_PF_PROFILE=$pf timeout 60 \
      python bench/s72/kprof.py ${KPROF_CASES:-32:1024} 2>&1 | grep -v -i warn | tail -n 2 | cut -c1-300)" >> $L
  done
  echo "kprof done $((SECONDS - t0)) s" >> $L
}
ab() {  # name h:s_q a b
  local name=$1 c=$2 a=$3 b=$4 h s
  h=${c%%:*}; s=${c##*:}
  timeout 150 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h --a "$a" --b "$b" \
    --name ab_s74_${name}_${s}_h${h}_$tag --out $OUT > $OUT/ab.log 2>&1
  echo "ab $name $c rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  rm -f $OUT/ab.log
}
kprof "pair=1|1" "pair=1|9" "pair=1|17" "pair=1|5" "pair=1|" "pair=1;fq=1|1"
timeout ${TEST_S:-240} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "${TESTS_K:-pair_options and lazy}" > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 12 | cut -c1-300 >> $L
rm -f $OUT/tests.log  # (at most 8 files come back)
kprof "pair=1;lazy=1|" "pair=1;lazy=1|1"
A=row_scratch=1,env:DSATTN_PF_CONFIG=pair=1
for job in ${AB_JOBS:-lazy:32:1024 clocks fq:8:1024 lazy:16:1024 lazy:8:1024 fq:8:8192 lazy:32:8192}; do
  name=${job%%:*}
  case $name in
    clocks) if [ -f .peer/peers.py ]; then
        PYTHONPATH=src:.peer timeout 90 python bench/s74/clocks.py 1024 2 2>&1 | grep -v -i warn | tail -n 8 >> $L; rc=${PIPESTATUS[0]}
        echo "clocks rc=$rc $((SECONDS - t0)) s" >> $L
      fi ;;
    lazy) ab $name ${job#*:} $A "$A;lazy=1" ;;
    fq) ab $name ${job#*:} $A "$A;fq=1" ;;
  esac
done
cat $L
