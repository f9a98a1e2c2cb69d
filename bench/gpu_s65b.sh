#!/usr/bin/env bash
# Session 65: config pair of gluon_prefill (FlashMLA's numerics, bf16 P alone, AND its staggered pair schedule:
# _wg_pair; PrefillConfig.pair) on the GPU. PART=a: 1. the hang guard of its tiny cases, then its GPU tests
# (test_pf_pair*, against the bf16-P split schedule plo 0 and the P_hi + P_lo one); 2. `dsattn bench ab` at 32 heads
# s_q 1024, A plo 0 (the same numerics on the default schedule), B pair, and A the default, B pair; 3. the kernels a
# call launches (bench/prefill_kernel_probe.py) at 32 heads for plo 0 and pair, full and without gathers
# (DSATTN_PF_PROFILE=1). PART=b: A/Bs at 32 heads s_q 8192 and 64 heads s_q 1024 (A plo 0, B pair), and issue 3's
# 32-head prefill rows beside FlashMLA under pair (carry [".peer"]).
# PREDICTION (H100), first run (da491e2, whole stages): session 26's fp16 pair lost 0.63-0.75x, with the producer's
# conversion pass between pairs and spills at 64 x 2; here neither is there, and the hand-offs cost ~100 cycles each
# (handoff_probe). FlashMLA's own kernel runs ~2.0 us a 64-row block with this schedule; plo 0 runs ~2.5 (session
# 64's probe). Prediction: pair 0.95-1.15x plo 0 at 32 heads. OUTCOME: 0.922x plo 0; its consumers alone (no
# gathers) 349.5 us against plo 0's 413.6 (1.98 against 2.34 us a block), the full kernel 483.7 against 441.3: with
# whole stages the next pair's gathers start only when a step ends. Second run (half stages, FlashMLA's L / R
# halves refilled as their one releasing warpgroup is done, cp.async arrives per thread; no spill at 8..64 heads):
# PREDICTION the full kernel toward its consumers' ~350 us, 1.05-1.2x plo 0, ~1.1-1.25x FlashMLA's best.
#   PART=a|b DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s65b.sh      ($OUT/s65b.log, $OUT/s65b.tgz)
# RAN (PART a only) at da491e2 (whole stages, PAIR with producer_regs=48, that commit's copy of this script) and
# 3160293 (half stages, producer_regs=56) on an H100 (bench/results/gpu_s65b_*_h100.log): right, and 0.922x / 0.937x
# plo 0; PART b did not run. Config pair was removed afterwards, so this script needs 9d66719's src/ to run again.
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
PAIR="f16=0,cvt_pipe=0,producer_regs=56,plo=0,pair=1"
PLO0="f16=0,cvt_pipe=0,producer_regs=56,plo=0"
L=$OUT/s65b.log; R=$OUT/q; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader > $L; echo "tree ${DSATTN_GIT_COMMIT:-?} part ${PART:-a}" >> $L
pack() { tar -czf $OUT/s65b.tgz -C $OUT q s65b.log; }
t0=$SECONDS
ab() {  # s_q heads A-spec B-spec name
  local A=""; [ -n "$3" ] && A="env:DSATTN_SPARSE_MLA_IMPL=gluon_prefill,env:DSATTN_PF_CONFIG=${3//,/;}"
  timeout 110 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $1 --heads $2 ${A:+--a "$A"} \
    --b "env:DSATTN_SPARSE_MLA_IMPL=gluon_prefill,env:DSATTN_PF_CONFIG=${4//,/;}" \
    --name $5 --out $R > $R/$5.log 2>&1
  echo "== ab $5: s_q $1, $2 heads, A ${3:-default}, B $4: rc=$? $((SECONDS - t0)) s" >> $L
  tail -n 4 $R/$5.log | cut -c1-220 >> $L; pack
}
if [ "${PART:-a}" = a ]; then
  timeout 120 python -m pytest -q -p no:cacheprovider -rfE -s tests/gpu/test_sparse_mla_prefill_gpu.py \
    -k "hang_guard and pair_1" > $R/guard.log 2>&1
  echo "guard rc=$? $((SECONDS - t0)) s" >> $L; grep -E "passed|failed|rror" $R/guard.log | tail -n 5 >> $L; pack
  if grep -q " passed" $R/guard.log && ! grep -q "failed" $R/guard.log; then
    timeout 150 python -m pytest -q -p no:cacheprovider -rfE -s tests/gpu/test_sparse_mla_prefill_gpu.py \
      -k "pf_pair" > $R/tests.log 2>&1
    echo "pair tests rc=$? $((SECONDS - t0)) s" >> $L
    grep -E "^pair|passed|failed|rror" $R/tests.log | tail -n 14 >> $L; pack
    ab 1024 32 "$PLO0" "$PAIR" ab_s65_pair_vs_plo0_1024_h32
    ab 1024 32 "" "$PAIR" ab_s65_pair_vs_default_1024_h32
    for spec in "$PLO0" "$PAIR"; do for p in 0 1; do
      echo "== probe h 32 $spec profile $p" >> $L
      DSATTN_SPARSE_MLA_IMPL=gluon_prefill DSATTN_PF_CONFIG=$spec DSATTN_PF_PROFILE=$p timeout 60 \
        python bench/prefill_kernel_probe.py 32 2>&1 | grep -v -i warn | head -n 3 >> $L
    done; done
  fi
else
  ab 8192 32 "$PLO0" "$PAIR" ab_s65_pair_vs_plo0_8192_h32
  ab 1024 64 "$PLO0" "$PAIR" ab_s65_pair_vs_plo0_1024_h64
  for n in 1024 8192; do
    DSATTN_PF_CONFIG=$PAIR timeout 130 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 32 \
      --tokens $n --impl auto --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s65_pair_prefill_$n > $R/tb_$n.log 2>&1
    echo "== table under pair, s_q $n, 32 heads rc=$? $((SECONDS - t0)) s" >> $L
    grep -E "dsattn:|flashmla:" $R/tb_$n.log | cut -c1-220 >> $L; pack
  done
fi
pack; cat $L
