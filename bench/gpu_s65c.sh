#!/usr/bin/env bash
# Session 65: why config pair's gathers stay exposed (2.68 us a block in full, 1.91 without gathers) while FlashMLA's
# kernel, with the same ring and release order, runs ~2.0 us a block in full. Nsight Compute (bench/gpu_lib.sh's prof:
# source counters, warp states, memory workload) of one launch each, s_q 1024: FlashMLA at 64 heads, and config pair at
# 32 heads (needs 9d66719's src/dsattn/ops/sparse_mla/gluon_prefill.py in the tree: the call ran it from an uncommitted
# copy of that file).
#   LOG=s65c.log TAG=s65c bash bench/gpu_s65c.sh      (~3 min)
source bench/gpu_lib.sh
command -v ncu > /dev/null || { echo "no ncu" >> $L; exit 0; }
prof fm64 sparse_attn_fwd_kernel --case prefill-64 --peer
export DSATTN_SPARSE_MLA_IMPL=gluon_prefill DSATTN_PF_CONFIG=f16=0,cvt_pipe=0,producer_regs=56,plo=0,pair=1
prof pf32_pair sparse_mla_prefill_kernel --case prefill-32
cat $L
