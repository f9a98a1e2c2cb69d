#!/usr/bin/env bash
# Session 78, device call 5 (one GPU, carry .peer; results under $OUT, <= 8 files). The grouped prefill's row
# conversion (kernels.f16_rows, ~10.5 us at 32 heads s_q 1024) launched right behind the first union lists (~13 us)
# with programmatic dependent launch (DSATTN_PREFILL_PDL, default 1), so the two run side by side instead of one after
# the other. (1) tests/gpu test_prefill_pdl (bit-equal to the serial order, reference, chunks, CUDA-graph capture);
# (2) `dsattn bench ab` PDL 0 against the default at 32 heads s_q 1024 / 8192; (3) issue 3's prefill table as CUDA-graph
# replays beside FlashMLA (bench/gpu_s16_table.sh --graph). Steps 2-3 only when the tests pass.
# PREDICTION: 1.02-1.03x at s_q 1024 (the pre-passes ~25 -> ~14 us of ~416), ~1.00x at 8192.
#   DSATTN_GIT_COMMIT=<sha> bash bench/s78/run5.sh
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK DSATTN_PREFILL_PDL
L=$OUT/s78_call5.log
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
ab() {  # name h:s_q a
  local name=$1 c=$2 a=$3 h s
  h=${c%%:*}; s=${c##*:}
  timeout 150 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h --a "row_scratch=1,$a" \
    --b "row_scratch=1" --name ab_s78_${name}_${s}_h${h} --out $OUT > $OUT/ab.log 2>&1
  echo "ab $name $c rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  grep -h "noisy machine" $OUT/ab.log | cut -c1-160 >> $L
  rm -f $OUT/ab.log
}
timeout ${TEST_S:-150} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "prefill_pdl" > $OUT/tests5.log 2>&1
rc=$?
echo "tests rc=$rc $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests5.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests5.log | head -n 12 | cut -c1-300 >> $L
if [ $rc = 0 ]; then
  ab pdl0 32:1024 "env:DSATTN_PREFILL_PDL=0"
  ab pdl0 32:8192 "env:DSATTN_PREFILL_PDL=0"
  PARTS=prefill TABLE_TAG=s78p_graph TABLE_ARGS=--graph bash bench/gpu_s16_table.sh
  cat $OUT/tb.log >> $L; rm -rf $OUT/r $OUT/tb.log
fi
cat $L
