#!/usr/bin/env bash
# Session 78, device call 6 (one GPU, no carry): call 5's A/B of DSATTN_PREFILL_PDL at 32 heads s_q 1024 read 1.001x on
# a noisy machine (blocks spread 23-26%); 8192 1.007x. Here the kernels' timeline of one call with PDL 0 / 1
# (bench/s78/pdl_trace.py: whether f16_rows now starts before the union lists end, the call's span, the replay), then
# the A/B again at s_q 1024.
# PREDICTION: f16_rows starts within ~2 us of the union kernel's start with PDL 1 (after it ends with 0); the span
# ~8-12 us shorter at s_q 1024.
#   DSATTN_GIT_COMMIT=<sha> bash bench/s78/run6.sh
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE DSATTN_DUPS_BLOCK DSATTN_PREFILL_PDL
L=$OUT/s78_call6.log
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
timeout 120 python bench/s78/pdl_trace.py 32:1024 32:8192 2>&1 | grep -v -i warn >> $L
echo "trace rc=${PIPESTATUS[0]} $((SECONDS - t0)) s" >> $L
timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens 1024 --heads 32 \
  --a "row_scratch=1,env:DSATTN_PREFILL_PDL=0" --b "row_scratch=1" --name ab_s78_pdl0b_1024_h32 --out $OUT > $OUT/ab.log 2>&1
echo "ab rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $OUT/ab.log | tail -n 3 | cut -c1-250 >> $L
grep -h "noisy machine" $OUT/ab.log | cut -c1-160 >> $L; rm -f $OUT/ab.log
cat $L
