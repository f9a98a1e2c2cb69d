#!/usr/bin/env bash
# Record of a session 26 call (bench/logs/s26_*.log). split 2 and its tests were removed afterwards (code at a7f7a6d),
# so this script only runs at its own commit.
# Session 26, call 3: where the staggered pair's consumers spend their time. Call 2 (bench/logs/s26_ahead.log): the
# pair over 64-entry blocks is 0.845x of split 1 in the no-gather timing builds (64 heads, s_q 1024), 32 x 4 0.70x.
# Nsight Compute of both no-gather builds (DSATTN_PF_PROFILE=1: the consumers on whatever the stages hold), 64 heads.
#   LOG=s26_prof.log TAG=s26 bash bench/gpu_s26_profile.sh   (~4 min)
source bench/gpu_lib.sh
command -v ncu > /dev/null || { echo "no ncu" >> $L; exit 0; }
export DSATTN_PF_PROFILE=1
prof pf64_split1_nogather "sparse_mla_prefill_kernel" --case prefill-64
export DSATTN_PF_CONFIG=64/2/4/80/0/1/2/1
prof pf64_pair64_nogather "sparse_mla_prefill_kernel" --case prefill-64
