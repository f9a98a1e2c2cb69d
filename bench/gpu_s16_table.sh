#!/usr/bin/env bash
# Session 16, device call 3 (one H200): issue 3's whole table at one tree, FlashMLA in the same process, 3 alternating
# rounds a row (the README's rows come from sessions 11-15): decode fp8_ds_mla / nope at 512 and 2048 tokens, prefill
# bf16 at s_q 1024 and 8192, 8 / 16 / 32 / 64 / 128 heads, eager; an nvidia-smi clock log beside it.
#   [TABLE_TAG=s16] [PARTS="prefill"] [DECODE_CONTEXT=16384] DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s16_table.sh
#   (log $OUT/tb.log, results under $OUT/r, $OUT/r.tgz; PARTS: "decode prefill" unless given; DECODE_CONTEXT
#   (session 32): slots each decode request owns, 0 (the shared 131072-slot pool) unless given; TABLE_ARGS (session
#   76): more arguments of `dsattn bench kernels`, e.g. --graph)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS \
  DSATTN_PREFILL_SCRATCH_MIB
R=$OUT/r; mkdir -p $R; L=$OUT/tb.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
nvidia-smi --query-gpu=timestamp,clocks.sm,temperature.gpu,power.draw --format=csv -lms 200 > $R/clocks.csv 2>&1 &
SMI=$!
run() {  # case tokens timeout
  case " ${PARTS:-decode prefill} " in *" $1 "*) ;; *) return ;; esac
  timeout $3 python -m dsattn.cli bench kernels --op sparse_mla --cases $1 --heads 8,16,32,64,128 --tokens $2 \
    --impl auto --rounds 3 --rep-ms 20 --decode-context ${DECODE_CONTEXT:-0} ${TABLE_ARGS:-} --out $R --name sparse_mla_${TABLE_TAG:-s16}_$1_$2 > $R/$1_$2.log 2>&1
  echo "$1 $2 rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/$1_$2.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
run decode 512 130
run prefill 1024 130
run decode 2048 150
run prefill 8192 170
kill $SMI
tar -czf $OUT/r.tgz -C $OUT r
