#!/usr/bin/env bash
# Session 73 (PART a needs no carry: dsattn bench ab runs no peer).
# PART a: (1) gluon_pair's fq 1 (each half of a stage in two parts with their own full mbarriers; S starts on the
#   first 128 columns) in the GPU test test_pair_options (bit-equal to the pair, right against the reference);
#   (2) session 72's shared-memory probe: `dsattn bench ab` of the pair against DSATTN_PF_PROFILE=4 (the producer
#   reads both stages' latent parts once more after issuing L(1): +64 KB a block on ~293 KB; outputs unchanged;
#   moved there from after R(1) this session, where it would have delayed L(1)'s refill);
#   (3) `dsattn bench ab` pair=1 against pair=1;fq=1, then against pair=1;qreg=1 (q's RoPE part as S's register
#   operand: 8 KB fewer shared-memory reads a block's S, ~3% of the block's ~293 KB).
#   PREDICTIONS (before the run): probe 0.80-0.88x if shared-memory bandwidth bounds the pair's blocks, 0.97-1.00x
#   if not. fq: stage 1 is released last in a step and WG1's S waits for all of its 72 KB; with parts its first
#   product starts after 16 KB: 1.02-1.05x at 32 heads if that refill is exposed, 0.99-1.01x if not. qreg: <= 1.03x
#   if the probe reads shared memory as the bound, 0.99-1.01x if not.
# PART h (carry [".peer"]): issue 3's prefill table (bench/gpu_s16_table.sh PARTS=prefill, FlashMLA in the same
#   process), tagged by card.
#   PART=a DSATTN_GIT_COMMIT=<sha> bash bench/s73/run.sh     ($OUT/s73_<part>.log; PART a's eight A/B files and
#   its log are one more than a call brings back, so its log came back only as the reply's text)
set -u
export PYTHONPATH=src:.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
P=${PART:-a}
L=$OUT/s73_$P.log
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$GPU" in *H200*) tag=h200 ;; *) tag=h100 ;; esac
echo "$GPU tree ${DSATTN_GIT_COMMIT:-?} part $P" > $L
t0=$SECONDS
ab() {  # name cases a b
  local name=$1 cases=$2 a=$3 b=$4 c h s
  for c in $cases; do
    h=${c%%:*}; s=${c##*:}
    timeout 150 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h --a "$a" --b "$b" \
      --name ab_s73_${name}_${s}_h${h}_$tag --out $OUT > $OUT/ab.log 2>&1
    echo "ab $name $c rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  done
  rm -f $OUT/ab.log
}
if [ "$P" = a ]; then
  timeout ${TEST_S:-200} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
    -k "${TESTS_K:-pair_options and (fq or qreg)}" > $OUT/tests.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)" >> $L
  grep -E "^(FAILED|ERROR)|^E " $OUT/tests.log | head -n 12 | cut -c1-300 >> $L
  rm -f $OUT/tests.log  # (at most 8 files come back)
  # per-kernel times (bench/s72/kprof.py), 32 heads s_q 1024: the pair, consumers alone (PROFILE 1: no copies),
  # ring alone (PROFILE 2: no products), the probe (4), fq, qreg, fq + qreg
  for arm in "pair=1|" "pair=1|1" "pair=1|2" "pair=1|4" "pair=1;fq=1|" "pair=1;qreg=1|" "pair=1;fq=1;qreg=1|" \
             "pair=1;fq=1|2"; do
    cfg=${arm%%|*}; pf=${arm##*|}
    echo "kprof ${cfg//;/,} profile ${pf:-0}: $(DSATTN_PF_CONFIG=${cfg//;/,} DSATTN_PF_PROFILE=$pf timeout 60 \
      python bench/s72/kprof.py ${KPROF_CASES:-32:1024} 2>&1 | grep -v -i warn | tail -n 2 | cut -c1-300)" >> $L
  done
  # the A/Bs, most wanted first (a call cut short keeps what ran: each appends to $L)
  A=row_scratch=1,env:DSATTN_PF_CONFIG=pair=1
  for job in ${AB_JOBS:-smem_probe:32:1024 fq:32:1024 qreg:32:1024 smem_probe:32:8192 fq:16:1024 fq:32:8192 \
                         smem_probe:16:1024 qreg:16:1024}; do
    name=${job%%:*}
    case $name in
      smem_probe) ab $name ${job#*:} row_scratch=1 row_scratch=1,env:DSATTN_PF_PROFILE=4 ;;
      fq) ab $name ${job#*:} $A "$A;fq=1" ;;
      qreg) ab $name ${job#*:} $A "$A;qreg=1" ;;
    esac
  done
fi
# PART b (after PART a): where the consumers' own time goes, per-kernel times at 32 heads s_q 1024 (bench/s72/kprof.py):
#   consumers alone (PROFILE 1) against no S products (9), no P V products (17), and the probe's reads (5); the pair
#   again (0); then `dsattn bench ab` pair=1 against pair=1;fq=1 at 8 heads.
#   (PROFILE 25, neither product, is not timed: its build drops the stages' allocation, 99.7 KB of shared memory, so
#   two programs fit an SM.)
#   PREDICTION: if S's shared-memory operands bound the consumers, 9 (no S) takes most of 1's time off (S is 53% of
#   the products), 17 (no P V) less than its 47% share; 5 slower than 1 by about the probe's 7% or more.
if [ "$P" = b ]; then
  for arm in ${B_ARMS:-"pair=1|1" "pair=1|9" "pair=1|17" "pair=1|5" "pair=1|" "pair=1;fq=1|1"}; do
    cfg=${arm%%|*}; pf=${arm##*|}
    echo "kprof ${cfg//;/,} profile ${pf:-0}: $(DSATTN_PF_CONFIG=${cfg//;/,} DSATTN_PF_PROFILE=$pf timeout 60 \
      python bench/s72/kprof.py ${KPROF_CASES:-32:1024} 2>&1 | grep -v -i warn | tail -n 2 | cut -c1-300)" >> $L
  done
  ab fq "${FQ_CASES:-8:1024 8:8192}" row_scratch=1,env:DSATTN_PF_CONFIG=pair=1 \
    "row_scratch=1,env:DSATTN_PF_CONFIG=pair=1;fq=1"
fi
if [ "$P" = h ]; then
  PARTS=prefill TABLE_TAG=${TABLE_TAG:-s73_$tag} bash bench/gpu_s16_table.sh > /dev/null 2>&1
  cp $OUT/r/*.json $OUT/ 2>/dev/null; rm -rf $OUT/r $OUT/r.tgz; cat $OUT/tb.log >> $L; rm -f $OUT/tb.log
fi
cat $L
