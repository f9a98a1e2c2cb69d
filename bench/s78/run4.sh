#!/usr/bin/env bash
# Session 78, device call 4 (one GPU, carry .peer; results under $OUT, <= 8 files). PrefillConfig.vst is the pair's
# default now (call 3: 1.028x at 32 heads s_q 1024, 1.025x with qld at 8192; 16 heads read on a noisy machine).
# (1) the default path's pair tests (the default against pair=1,lazy=1,vst=1 bit for bit); (2) `dsattn bench ab`, vst 0
# (DSATTN_PF_CONFIG=pair=1;lazy=1) against the default at 16 heads s_q 1024 and 8 heads s_q 8192 (where the pair runs
# at 8 heads); (3) issue 3's prefill table as CUDA-graph replays beside FlashMLA (bench/gpu_s16_table.sh --graph).
# PREDICTION: 16 / 8 heads 1.01-1.03x; the table's 32-head row ~1.19x / ~1.28x on an H100 (1.159x / 1.249x in call 1).
#   DSATTN_GIT_COMMIT=<sha> bash bench/s78/run4.sh
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
L=$OUT/s78_call4.log
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
ab() {  # name h:s_q b
  local name=$1 c=$2 b=$3 h s
  h=${c%%:*}; s=${c##*:}
  timeout 150 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h --a "row_scratch=1,$b" \
    --b "row_scratch=1" --name ab_s78_${name}_${s}_h${h} --out $OUT > $OUT/ab.log 2>&1
  echo "ab $name $c rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  grep -h "noisy machine" $OUT/ab.log | cut -c1-160 >> $L
  rm -f $OUT/ab.log
}
timeout ${TEST_S:-120} python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "pair_over_converted_rows" > $OUT/tests4.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests4.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests4.log | head -n 12 | cut -c1-300 >> $L
ab vst0 16:1024 "env:DSATTN_PF_CONFIG=pair=1;lazy=1"
ab vst0 8:8192 "env:DSATTN_PF_CONFIG=pair=1;lazy=1"
PARTS=prefill TABLE_TAG=s78v_graph TABLE_ARGS=--graph bash bench/gpu_s16_table.sh
cat $OUT/tb.log >> $L; rm -rf $OUT/r $OUT/tb.log
cat $L
