#!/usr/bin/env bash
# Session 68, call 4 (the pair file first, as in bench/gpu_s68b.sh, from bench/results/s68/pair_s68.patch): where the
# fp16 pair's time goes. Call 2: 'pairs' (bit 512) runs 584 us at 32 heads, its producer alone 371 and its consumers
# alone 343, so the two overlap by under 1 us a block where the bf16 pair (no conversion) runs 401.6. Timing bits of
# _convert_half (wrong outputs): 2048 no conversion (each half's wait_group kept), 4096 no wait (the conversion runs
# on whatever landed). Kernel times at 32 heads, s_q 1024: the default, pairs (960), 960 + 2048, 960 + 4096, 960 + 6144,
# pairs without gathers (961), the bf16 pair (192).
# PREDICTION: if the conversion's latency on the critical half's path (gather -> wait -> convert -> S) is the cost,
# 960 + 4096 drops near the bf16 pair (~410-440 us) and 960 + 2048 stays near 960; if its shared-memory traffic and
# issue slots are, 960 + 2048 drops and 960 + 4096 does not. 960 + 6144 ~400-420 (the bf16 pair's ring, fp16 consumers).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s68d.sh      ($OUT/s68d.log)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
L=$OUT/s68d.log; R=$OUT/k; mkdir -p $R
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
t0=$SECONDS
F16P="f16=0,cvt_pipe=0,producer_regs=64,plo=0,pair=1"
PAIR="f16=0,cvt_pipe=0,producer_regs=56,plo=0,pair=1"
kp() {  # name config profile [heads]
  DSATTN_PF_CONFIG=$2 DSATTN_PF_PROFILE=$3 timeout 100 python bench/prefill_kernel_probe.py ${4:-32} > $R/$1.log 2>&1
  echo "== $1 ($2, P$3, ${4:-32} heads): rc=$? $((SECONDS - t0)) s" >> $L
  grep -v -i warn $R/$1.log | head -n 1 | cut -c1-150 >> $L
}
cp src/dsattn/ops/sparse_mla/gluon_prefill.py $OUT/gp_keep.py
cp bench/s67_pair/gluon_prefill.py src/dsattn/ops/sparse_mla/gluon_prefill.py
kp def "" 0; kp pairs $F16P 960; kp nocvt $F16P 3008; kp nowait $F16P 5056; kp neither $F16P 7104
kp nogather $F16P 961; kp bf16pair $PAIR 192; kp pairs_again $F16P 960
mv $OUT/gp_keep.py src/dsattn/ops/sparse_mla/gluon_prefill.py
rm -rf $R; cat $L
