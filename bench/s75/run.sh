#!/usr/bin/env bash
# Session 75, one call (a call cut short keeps what ran: each step appends to $OUT/s75.log). No carry.
# (1) GPU tests of PrefillConfig.pe (test_pair_options -k pe: warpgroup 0's P handed over before the common max
#     returns; q x 6 makes warpgroup 1's in-place rescale run).
# (2) session 74's clock stamps (bench/s74/stamps.py, DSATTN_PF_PROFILE=32) at 32 / 16 / 8 heads s_q 1024 over the
#     default (pair, lazy), and at 32 heads with pe 1. PREDICTION (session 74): a warpgroup's step (~8800 cycles)
#     shows >= 1500 cycles of waits that are neither S nor P V; with pe 1 "warpgroup 0's P stored -> warpgroup 1
#     issued the other P V" and warpgroup 0's wait for R(0) (point 9) both shorter.
# (3) `dsattn bench ab` default (pair=1;lazy=1) against pe 1 and pe 2 at 32 heads s_q 1024, then pe 1 at 32 heads
#     s_q 8192, 16 and 8 heads s_q 1024. PREDICTION: pe takes the maxima's round trip (~200-400 cycles) off R(0)'s
#     path once a step: 1.00-1.04x at 32 heads.
# (4) the default path's pair tests (session 74's last call cut them after 4 passed).
#   DSATTN_GIT_COMMIT=<sha> bash bench/s75/run.sh     (PART=b: the second call, PrefillConfig.ring; there STAMPS=0
#   and REST=0 leave out the stamps and the last tests, AB_JOBS2=" " the A/Bs past 32 heads)
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
L=$OUT/s75.log
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$GPU" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
echo "$GPU tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
tests() {  # name limit -k
  timeout $2 python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
    -k "$3" > $OUT/tests.log 2>&1
  echo "tests $1 rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
  grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 12 | cut -c1-300 >> $L
  rm -f $OUT/tests.log  # (at most 8 files come back)
}
stamps() {  # cases config
  timeout 120 python bench/s74/stamps.py $1 $2 2>&1 | grep -v -i warn >> $L
  echo "stamps $1 $2 rc=${PIPESTATUS[0]} $((SECONDS - t0)) s" >> $L
}
ab() {  # name h:s_q a b
  local name=$1 c=$2 a=$3 b=$4 h s
  h=${c%%:*}; s=${c##*:}
  timeout 120 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h --a "$a" --b "$b" \
    --name ab_s75_${name}_${s}_h${h}_$tag --out $OUT > $OUT/ab.log 2>&1
  echo "ab $name $c rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  grep -h "noisy machine" $OUT/ab.log | cut -c1-160 >> $L
  rm -f $OUT/ab.log
}
if [ "${PART:-a}" = b ]; then
  # (second call: run in session 76 on an H200 at 09992f9, bench/results/s76/; PrefillConfig.ring was removed after it,
  # so this part runs only at that tree) PrefillConfig.ring 1 / 2 against the default (ring 0).
  # The first call's stamps (32 heads s_q 1024, H100): warpgroup 1 waits 1851 cycles a step for R(1), warpgroup 0 2370
  # for the common max; stage 1 is released at the step's end (L(1) ~390 cycles before R(1), refilled after it).
  # ring 1: L(1) refilled and read first; ring 2: warpgroup 1's own P V first (R(1) released a P V earlier) and the
  # producer in the order L(0), R(1), L(1), R(0). PREDICTION: warpgroup 1's first wait and warpgroup 0's wait for mc
  # each drop by several hundred cycles; `dsattn bench ab` 1.03-1.10x at 32 heads for the better of the two.
  tests ring ${TEST_S:-120} "${TESTS_K:-pair_options and ring and not fq and not pe}"
  A="row_scratch=1,env:DSATTN_PF_CONFIG=pair=1;lazy=1"
  for job in ${AB_JOBS:-1:32:1024 2:32:1024 1:32:8192 2:32:8192}; do
    ab ring${job%%:*} ${job#*:} "$A" "$A;ring=${job%%:*}"
  done
  if [ "${STAMPS:-1}" = 1 ]; then
    stamps 32:1024 pair=1,lazy=1,ring=1
    stamps 32:1024 pair=1,lazy=1,ring=2
  fi
  # (8 heads at s_q 8192: at s_q 1024 no rows are converted, so no pair runs there)
  for job in ${AB_JOBS2:-1:16:1024 2:16:1024 1:8:8192 2:8:8192}; do
    ab ring${job%%:*} ${job#*:} "$A" "$A;ring=${job%%:*}"
  done
  [ "${REST:-1}" = 1 ] && tests ring_rest ${TEST_S:-120} "pair_options and ring and (fq or pe)"
  cat $L
  exit 0
fi
tests pe ${TEST_S:-150} "pair_options and pe"
stamps 32:1024,16:1024,8:1024 pair=1,lazy=1
stamps 32:1024 pair=1,lazy=1,pe=1
A="row_scratch=1,env:DSATTN_PF_CONFIG=pair=1;lazy=1"
for job in ${AB_JOBS:-pe1:32:1024 pe2:32:1024 pe1:32:8192 pe1:16:1024 pe1:8:1024}; do
  name=${job%%:*}
  ab $name ${job#*:} "$A" "$A;pe=${name#pe}"
done
left=$((${RUN_S:-450} - (SECONDS - t0)))
[ $left -gt 40 ] && tests default $left "pair_stamps or pair_over_converted or pair_other_paths"
cat $L
