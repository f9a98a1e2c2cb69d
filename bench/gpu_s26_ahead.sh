#!/usr/bin/env bash
# Record of a session 26 call (bench/logs/s26_*.log). split 2 and its tests were removed afterwards (code at a7f7a6d),
# so this script only runs at its own commit.
# Session 26, call 2. Call 1 (bench/gpu_s26_pair.sh, bench/logs/s26_pair.log): the staggered pair (split 2) right in 18
# GPU tests and much slower: s_q 1024, 64 heads 0.661x, 32 heads 0.738x, 16 heads 0.747x, 128 heads 0.666x, 64 x 2
# 0.747x; the no-gather builds 0.705x (0.690 vs 0.978 ms at 64 heads): the consumers themselves are slower.
# Now: overlap 1 for split 2 (warpgroup 0 issues S(b + 2) behind its last P V of a step and retires that P V with
# wait(1), FlashMLA's order; warpgroup 0 releases its own block's stage once its P V retired, which overlap 1 needs:
# test_pair_protocol deadlocked without it). Compile check: no spill, no wgmma serialization.
# PREDICTION: overlap 1 0.70-0.85x of the default at 64 heads (better than 0.661x, not a win). The no-gather build of
# 64 x 2 (no bubble there) says whether the schedule at 64-entry blocks beats split 1's consumers: if it does, the
# half-stage refills of the study's proposal 3 are the next step; if not, the pair schedule is dropped.
#   LOG=s26_ahead.log TAG=s26 bash bench/gpu_s26_ahead.sh   (~6 min)
source bench/gpu_lib.sh
F=tests/gpu/test_sparse_mla_prefill_gpu.py
timeout 90 python -m pytest $F -q -p no:cacheprovider -rfE -k "hang_guard and s32_4_4_80_1_1_2_1" > $R/t_guard.log 2>&1
rc=$?; echo "ahead hang guard rc=$rc" >> $L; tail -n 3 $R/t_guard.log >> $L; pack
if [ $rc -ne 0 ]; then exit 0; fi
K="pair or (peaked and s32_4_4_80)" N=10 LIMIT=200 bash bench/gpu_tests_sharded.sh $R/t_pair $F
echo "pair GPU tests (sharded):" >> $L; cat $R/t_pair/summary.log >> $L; pack
abp() {  # heads name [arm A] [arm B] [s_q]
  timeout 75 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens ${5:-1024} --heads $1 --a "$3" --b "$4" \
    --name ab_${PFX}_$2 --out $R > $R/ab_$2.log 2>&1
  echo "ab [$3] vs [$4] ($1 heads, s_q ${5:-1024}) rc=$?" >> $L; tail -n 3 $R/ab_$2.log | head -n 2 >> $L; pack
}
abp 64 ahead_h64 "" env:DSATTN_PF_CONFIG=32/4/4/80/1/1/2/1
abp 32 ahead_h32 "" env:DSATTN_PF_CONFIG=32/4/4/80/1/1/2/1
abp 64 pair_vs_ahead_h64 env:DSATTN_PF_CONFIG=32/4/4/80/0/1/2/1 env:DSATTN_PF_CONFIG=32/4/4/80/1/1/2/1
abp 64 ahead_nogather_h64 env:DSATTN_PF_PROFILE=1 env:DSATTN_PF_PROFILE=1,env:DSATTN_PF_CONFIG=32/4/4/80/1/1/2/1
abp 64 pair64_nogather_h64 env:DSATTN_PF_PROFILE=1 env:DSATTN_PF_PROFILE=1,env:DSATTN_PF_CONFIG=64/2/4/80/0/1/2/1
abp 32 pair64_nogather_h32 env:DSATTN_PF_PROFILE=1 env:DSATTN_PF_PROFILE=1,env:DSATTN_PF_CONFIG=64/2/4/80/0/1/2/1
