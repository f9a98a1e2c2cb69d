#!/usr/bin/env bash
# Session 63's second device call, after 'auto' moved the bf16 decode below 17 heads a program from the Triton kernel
# to gluon_small (launch.gluon_preferred; gpu_s62b.sh's A/Bs: 1.033-1.057x at 512 / 2048 tokens, bit-equal):
# 1. test_pf_bf16_p with its elementwise bound (it failed in gpu_s62b.sh at 64 heads: 0.0156, one bf16 ulp at |out|
#    2..4, against a flat 1e-2);
# 2. the bf16 decode GPU tests (every kernel param, 'gluon' = gluon_small at 8 / 16 / 32 heads);
# 3. `dsattn bench ab` of the bf16 decode where gpu_s62b.sh did not look: small batches (1 / 16 / 64 tokens), A the
#    Triton kernel (DSATTN_SPARSE_MLA_IMPL=triton), B the new default;
# 4. on an H200 only: issue 3's prefill rows beside FlashMLA (bench/gpu_s16_table.sh, TABLE_TAG=s63) for README's rows.
# PREDICTION: tests pass; small batches 0.95-1.10x (the split-K plan is the same for both kernels).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s63.sh      (everything in $OUT/s63.tgz and $OUT/s63.log)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG
L=$OUT/s63.log; R=$OUT/q; mkdir -p $R
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU" > $L; echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
pack() { tar -czf $OUT/s63.tgz -C $OUT q s63.log; }
t0=$SECONDS
timeout 100 python -m pytest -q -p no:cacheprovider -rfE -s tests/gpu/test_sparse_mla_prefill_gpu.py -k "bf16_p" \
  > $R/pf_bf16p.log 2>&1
echo "test_pf_bf16_p rc=$? $((SECONDS - t0)) s" >> $L
grep -E "passed|failed|bf16 P|Error" $R/pf_bf16p.log | tail -n 8 >> $L; pack
timeout 240 python -m pytest -q -p no:cacheprovider -rfE tests/gpu/test_sparse_mla_gpu.py -k "bf16" > $R/dec_bf16.log 2>&1
echo "bf16 decode tests rc=$? $((SECONDS - t0)) s" >> $L
grep -E "passed|failed|Error" $R/dec_bf16.log | tail -n 12 >> $L; pack
for c in "1 8" "16 8" "64 16" "64 8"; do
  set -- $c
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --layout bf16 --tokens $1 --heads $2 \
    --a "env:DSATTN_SPARSE_MLA_IMPL=triton" --name ab_s63_bf16dec_${1}_h$2 --out $R > $R/ab_${1}_h$2.log 2>&1
  echo "== ab bf16 decode $1 tokens $2 heads (A Triton, B default = gluon_small) rc=$? $((SECONDS - t0)) s" >> $L
  tail -n 4 $R/ab_${1}_h$2.log | cut -c1-200 >> $L
done; pack
case "$GPU" in *H200*)
  OUT=$R PARTS=prefill TABLE_TAG=s63 bash bench/gpu_s16_table.sh
  cat $R/tb.log >> $L; echo "table $((SECONDS - t0)) s" >> $L; pack ;;
esac
cat $L
