#!/usr/bin/env bash
# Session 62's third device call (written in session 62, run in session 63 on an H100 at b628ca3: bench/results/gpu_s62b_script_s63_h100.log), carry
# [".peer"], after cvt_asm became the default of gluon_prefill and gluon_small (and sffma was removed):
# 1. the prefill GPU tests of the conversion (hang guard, test_pf_cvt_asm*, test_pf_bf16_p) and gluon_small's
#    (test_small_cvt_asm*);
# 2. `dsattn bench ab` of the bf16-cache decode at 8 / 16 heads: A the default (Triton below 17 heads:
#    launch.gluon_preferred) against B gluon_small (DSATTN_SPARSE_MLA_IMPL=gluon, now with cvt_asm);
# 2b. `dsattn bench ab` at 32 heads: A the default against B config plo 0 (bf16 P alone, FlashMLA's numerics, which
#    miss the tolerance on peaked softmaxes: what those numerics would buy the 32-head prefill row) at s_q 1024 / 8192,
#    and B the bf16 schedule with P_hi + P_lo at 1024;
# 3. issue 3's prefill rows beside FlashMLA (bench/gpu_s16_table.sh, PARTS=prefill, TABLE_TAG=s62);
# 4. more of the prefill GPU tests (heads, overlap, peaked, D 512, odd top-k, duplicates, pad64, configs).
# PREDICTION: prefill rows 1.02-1.04x session 60's on the same card kind (the A/Bs); bf16 decode: gluon_small
# within 0.9-1.1x of Triton at 8 / 16 heads (no earlier decode measurement at those head counts with cvt_asm); plo 0
# 1.00-1.15x the default at 32 heads (session 11's timing builds put bf16 P near FlashMLA's ~2.05 us a 64-head block
# against our ~2.95; the grouped kernel's union rows keep most of that gap), the bf16 split 0.95-1.0x.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s62b.sh      (everything in $OUT/s62b.tgz and $OUT/s62b.log)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG
L=$OUT/s62b.log; R=$OUT/q; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader > $L; echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
pack() { tar -czf $OUT/s62b.tgz -C $OUT q s62b.log; }
t0=$SECONDS
timeout 150 python -m pytest -q -p no:cacheprovider -rfE -s tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "hang_guard or cvt_asm or bf16_p" > $R/pf_tests1.log 2>&1
echo "prefill tests (guard, cvt_asm, bf16_p) rc=$? $((SECONDS - t0)) s" >> $L
grep -E "passed|failed|cvt_asm|bf16 P|Error" $R/pf_tests1.log | tail -n 24 >> $L
timeout 90 python -m pytest -q -p no:cacheprovider -rfE -s tests/gpu/test_sparse_mla_gpu.py \
  -k "small_cvt_asm and gluon and not gluon_ws and not gluon64" > $R/small_tests.log 2>&1
echo "small tests rc=$? $((SECONDS - t0)) s" >> $L
grep -E "passed|failed|cvt_asm|Error" $R/small_tests.log | tail -n 8 >> $L; pack
for c in "512 8" "512 16" "2048 8"; do
  set -- $c
  timeout 90 python -m dsattn.cli bench ab --op sparse_mla_decode --layout bf16 --tokens $1 --heads $2 \
    --b "env:DSATTN_SPARSE_MLA_IMPL=gluon" --name ab_s62_bf16dec_${1}_h$2 --out $R > $R/ab_bf16dec_${1}_h$2.log 2>&1
  echo "== ab bf16 decode $1 tokens $2 heads (A default, B gluon_small) rc=$? $((SECONDS - t0)) s" >> $L
  tail -n 4 $R/ab_bf16dec_${1}_h$2.log | cut -c1-200 >> $L
done; pack
for c in "1024 plo0 f16=0;cvt_pipe=0;producer_regs=56;plo=0" "8192 plo0 f16=0;cvt_pipe=0;producer_regs=56;plo=0" \
         "1024 split f16=0;cvt_pipe=0;producer_regs=56"; do
  set -- $c
  timeout 90 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $1 --heads 32 \
    --b "env:DSATTN_SPARSE_MLA_IMPL=gluon_prefill,env:DSATTN_PF_CONFIG=$3" --name ab_s62_$2_${1}_h32 --out $R \
    > $R/ab_$2_$1.log 2>&1
  echo "== ab prefill s_q $1, 32 heads (A default, B $3) rc=$? $((SECONDS - t0)) s" >> $L
  tail -n 4 $R/ab_$2_$1.log | cut -c1-200 >> $L
done; pack
OUT=$R PARTS=prefill TABLE_TAG=s62 bash bench/gpu_s16_table.sh
cat $R/tb.log >> $L; echo "table $((SECONDS - t0)) s" >> $L; pack
timeout 150 python -m pytest -q -p no:cacheprovider -rfE tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "heads or overlap or peaked or d512 or odd_topk or duplicates or pad64 or test_pf_configs" > $R/pf_tests2.log 2>&1
echo "prefill tests (more) rc=$? $((SECONDS - t0)) s" >> $L
grep -E "passed|failed|Error" $R/pf_tests2.log | tail -n 12 >> $L; pack
cat $L
