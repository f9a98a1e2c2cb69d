#!/usr/bin/env bash
# Record of a session 26 call (bench/logs/s26_*.log). split 2 and its tests were removed afterwards (code at a7f7a6d),
# so this script only runs at its own commit.
# Session 26, call 1: gluon_prefill split 2, the staggered pair (_wg_pair; FlashMLA's sparse prefill schedule:
# notes/flashmla_sparse_prefill_study.md, proposal 1). Each consumer warpgroup computes S and the softmax of every
# other block and owns half of O's columns; the running max goes warpgroup 0 -> 1 -> 0 once a step, so warpgroup 0's
# softmax runs under warpgroup 1's S and warpgroup 1's under warpgroup 0's P V (session 13's paired consumer,
# bc4ff3d, ran both in lock step and was 30-40% slower). Compile check (sm_90a): 32-entry blocks x 4 stages spill
# nothing at 8 / 16 / 32 / 64 heads, 222,576 B of shared memory, no wgmma serialization; 64 x 2 spills 84-532 B.
# The mbarrier protocol is modelled in tests/test_prefill_protocol.py (test_pair_protocol).
# WHY: session 20's profile has split 1's warpgroup 1 idle ~2/3 of the time; per warpgroup the tensor work a 64-key
# block falls from 1664 (warpgroup 0) to 1088 clocks.
# PREDICTION (32 x 4): s_q 1024, 64 heads 0.71 -> 0.58-0.68 ms (1.05-1.2x), 32 heads 0.57 -> 0.47-0.55; the
# shared-memory bytes a 64-key block rise ~17% (q is re-read for every 32 keys), which caps it; 64 x 2 slower than
# 32 x 4 (one pair of stages: the next pair's gathers wait for the current pair's last P V).
#   LOG=s26_pair.log TAG=s26 bash bench/gpu_s26_pair.sh   (~7 min)
source bench/gpu_lib.sh
F=tests/gpu/test_sparse_mla_prefill_gpu.py
timeout 90 python -m pytest $F -q -p no:cacheprovider -rfE -k "hang_guard and (s32_4_4_80_0_1_2_1 or s64_2_4_80_0_1_2_1)" \
  > $R/t_guard.log 2>&1
rc=$?; echo "pair hang guard rc=$rc" >> $L; tail -n 3 $R/t_guard.log >> $L; pack
if [ $rc -ne 0 ]; then exit 0; fi
timeout 200 python -m pytest $F -q -p no:cacheprovider -rfE -k "pair or (peaked and s32_4_4_80_0_1_2_1)" \
  > $R/t_pair.log 2>&1
echo "pair GPU tests rc=$?" >> $L; tail -n 4 $R/t_pair.log >> $L; pack
abp() {  # heads configB name [s_q]
  timeout 75 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens ${4:-1024} --heads $1 \
    --b env:DSATTN_PF_CONFIG=$2 --name ab_${PFX}_$3 --out $R > $R/ab_$3.log 2>&1
  echo "ab default vs $2 ($1 heads, s_q ${4:-1024}) rc=$?" >> $L; tail -n 3 $R/ab_$3.log | head -n 2 >> $L; pack
}
abp 64 32/4/4/80/0/1/2/1 pair_h64
abp 32 32/4/4/80/0/1/2/1 pair_h32
abp 16 32/4/4/80/0/1/2/1 pair_h16
abp 128 32/4/4/80/0/1/2/1 pair_h128
abp 64 64/2/4/80/0/1/2/1 pair64_h64
# timing builds, no gathers (DSATTN_PF_PROFILE=1: the consumers alone), default against pair, 64 heads
timeout 75 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens 1024 --heads 64 \
  --a env:DSATTN_PF_PROFILE=1 --b env:DSATTN_PF_PROFILE=1,env:DSATTN_PF_CONFIG=32/4/4/80/0/1/2/1 \
  --name ab_${PFX}_pair_nogather_h64 --out $R > $R/ab_nogather.log 2>&1
echo "ab no-gather builds default vs pair (64 heads) rc=$?" >> $L; tail -n 3 $R/ab_nogather.log | head -n 2 >> $L
abp 32 32/4/4/80/0/1/2/1 pair_h32_8192 8192
pack
