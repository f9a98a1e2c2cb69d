#!/usr/bin/env bash
# Session 20, device call 8 (one H200): issue 3's prefill rows at this tree (bf16, s_q 1024 and 8192, 8..128 heads,
# FlashMLA in the same process, 3 alternating rounds; session 19's rows ran with the cvt_pipe config set by env), then
# Nsight Compute's warp-state samples of the prefill under cvt_pipe and of the decode defaults (bench/gpu_s17_profile.sh
# unchanged), for planning.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s20_c.sh   (logs $OUT/tb.log and $OUT/pr.log, results under $OUT/r; ~8 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG \
  DSATTN_RX_CONSUMERS DSATTN_PREFILL_SCRATCH_MIB
R=$OUT/r; mkdir -p $R; L=$OUT/tb.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
for t in 1024 8192; do
  timeout 170 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32,64,128 --tokens $t \
    --impl auto --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s20_prefill_$t > $R/prefill_$t.log 2>&1
  echo "prefill $t rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/prefill_$t.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
done
timeout 230 bash bench/gpu_s17_profile.sh
