#!/usr/bin/env bash
# Session 78, device call 3 (one GPU, no carry; results under $OUT, <= 8 files). The pair's program edges (call 2,
# bench/s78/edges.py, H100, 32 heads s_q 1024): entry -> first step ~8.5k cycles (q's load ~8k of it), last step ->
# stores issued 13.4k / 9.8k (warpgroup 0 / 1), of a ~176k-cycle program. Two options written for them:
# PrefillConfig.vst for the pair (out through each warpgroup's stage, 16-byte stores) and qld (q's loads before its
# stores). (1) GPU tests of both; (2) edges.py with both; (3) `dsattn bench ab` against the default.
# PREDICTION: the epilogue ~3-6k cycles shorter with vst, the prologue ~1-2k shorter with qld; 1.01-1.04x together at
# 32 heads s_q 1024 and 8192.
#   DSATTN_GIT_COMMIT=<sha> bash bench/s78/run3.sh
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK
L=$OUT/s78_call3.log
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
ab() {  # name h:s_q b
  local name=$1 c=$2 b=$3 h s
  h=${c%%:*}; s=${c##*:}
  timeout 150 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $s --heads $h --a "row_scratch=1" \
    --b "row_scratch=1,$b" --name ab_s78_${name}_${s}_h${h} --out $OUT > $OUT/ab.log 2>&1
  echo "ab $name $c rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
  grep -h "noisy machine" $OUT/ab.log | cut -c1-160 >> $L
  rm -f $OUT/ab.log
}
if [ "${PART:-t}" != nott ]; then
  timeout ${TEST_S:-180} python -m pytest -q -p no:cacheprovider -rfE --tb=short \
    tests/gpu/test_sparse_mla_prefill_gpu.py -k "pair_stamps or pair_split_options or (pair_options and (vst or qld))" \
    > $OUT/tests3.log 2>&1
  echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests3.log)" >> $L
  grep -E "^(FAILED|ERROR)|^E " $OUT/tests3.log | head -n 12 | cut -c1-300 >> $L
fi
timeout 120 python bench/s78/edges.py 32:1024 pair=1,lazy=1,vst=1,qld=1 2>&1 | grep -v -i warn >> $L
echo "edges rc=${PIPESTATUS[0]} $((SECONDS - t0)) s" >> $L
ab both 32:1024 "env:DSATTN_PF_CONFIG=pair=1;lazy=1;vst=1;qld=1"
ab vst 32:1024 "env:DSATTN_PF_CONFIG=pair=1;lazy=1;vst=1"
ab qld 32:1024 "env:DSATTN_PF_CONFIG=pair=1;lazy=1;qld=1"
ab both 32:8192 "env:DSATTN_PF_CONFIG=pair=1;lazy=1;vst=1;qld=1"
ab both 16:1024 "env:DSATTN_PF_CONFIG=pair=1;lazy=1;vst=1;qld=1"
cat $L
