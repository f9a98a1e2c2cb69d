#!/usr/bin/env bash
# Session 32, one device call: issue 3's decode rows with each request's top-k over its own 16384 slots (no row
# gathered twice a call: BENCHMARKS.md's `uniform` / decode) beside the shared 131072-slot pool the table has always
# used, FlashMLA in the same processes; then the 8-head rows (nope over fp8_ds_mla) in 7 alternating rounds, both ways.
#   [CONTEXTS="16384 0"] DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s32_own.sh   (logs $OUT/c<C>/tb.log, $OUT/r7.log)
# (the device tool returns a limited number of files: tar $OUT into one, as session 32's second call did)
set -u
O=$OUT
for ctx in ${CONTEXTS:-16384 0}; do
  OUT=$O/c$ctx PARTS=decode TABLE_TAG=s32_c$ctx DECODE_CONTEXT=$ctx bash bench/gpu_s16_table.sh
done
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
mkdir -p $O/r7
for ctx in ${CONTEXTS:-16384 0}; do
  timeout 150 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8 --tokens 512,2048 --rounds 7 \
    --rep-ms 20 --no-peer --decode-context $ctx --out $O/r7 --name sparse_mla_s32_r7_c$ctx > $O/r7/c$ctx.log 2>&1
  echo "r7 context $ctx rc=$?" >> $O/r7.log; grep -E "dsattn:" $O/r7/c$ctx.log >> $O/r7.log
done
