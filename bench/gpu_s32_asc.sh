#!/usr/bin/env bash
# Session 32: the decode rows with each token's entries in ascending slot order (as dsattn's top-k emits positions)
# instead of the random order of a top-k by score, over own 4096-slot contexts and over the shared pool; FlashMLA in
# the same process, 3 alternating rounds a row.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s32_asc.sh     (log $OUT/asc.log, results $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG DSATTN_G64_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/asc.log
for ctx in 4096 0; do
  for t in 512 2048; do
    timeout 120 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16,32,64,128 --tokens $t \
      --rounds 3 --rep-ms 20 --decode-context $ctx --ascending --out $R --name sparse_mla_s32_asc_c${ctx}_$t \
      > $R/c${ctx}_$t.log 2>&1
    echo "ascending, context $ctx, $t tokens rc=$?" >> $L; grep -E "dsattn:native|flashmla:" $R/c${ctx}_$t.log >> $L
  done
done
