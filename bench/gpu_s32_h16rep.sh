#!/usr/bin/env bash
# Session 32: how often does a fresh process read the 16-head fp8_ds_mla decode (512 tokens, shared pool) slow? (1 of 5
# processes read 0.27-0.31 ms against 0.213 in session 32's calls 1-4.) N fresh processes, 5 rounds each, no FlashMLA.
#   [N=12] DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s32_h16rep.sh     (log $OUT/rep.log, results $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/rep.log
for i in $(seq 1 ${N:-12}); do
  timeout 60 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 16 --tokens 512 --rounds 5 \
    --rep-ms 20 --no-peer --out $R --name sparse_mla_s32_h16_proc$i > $R/proc$i.log 2>&1
  echo "proc $i rc=$? $(grep -E 'fp8_ds_mla +512 +16 +dsattn:native' $R/proc$i.log | awk '{print $7}')" >> $L
done
