#!/usr/bin/env bash
# Session 63: where the 32-head prefill's time goes (issue 3's case, s_q 1024), default (fp16 P) and config plo 0
# (bf16 P alone, FlashMLA's numerics), each as a full build and as DSATTN_PF_PROFILE timing builds (1: no gathers,
# 2: no products, 3: hand-offs alone; WRONG OUTPUTS, times only); 64 heads the same for comparison. Kernel GPU times by
# torch.profiler (bench/prefill_kernel_probe.py).
# PREDICTION (H100; FlashMLA padded 0.499 ms at 32 heads): default 0.53 full, ~0.52 without gathers (consumer-bound),
# ~0.40 without products; plo 0 0.49 / ~0.47 / ~0.30.
#   [PROBE_HEADS="32 64"] DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s63_probe.sh      ($OUT/probe.log)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
L=$OUT/probe.log
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader > $L; echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
for h in ${PROBE_HEADS:-32 64}; do
  for c in default "f16=0;cvt_pipe=0;producer_regs=56;plo=0"; do
    for p in 0 1 2 3; do
      if [ "$c" = default ]; then unset DSATTN_PF_CONFIG; else export DSATTN_PF_CONFIG="${c//;/,}"; fi
      echo "== h $h config $c profile $p" >> $L
      DSATTN_PF_PROFILE=$p timeout 60 python bench/prefill_kernel_probe.py $h 2>&1 | head -n 4 >> $L
    done
  done
done
unset DSATTN_PF_CONFIG
cat $L
