#!/usr/bin/env bash
# Session 20, device call 2 (one H200): the 8-head fp8_ds_mla_nope default now carries idxpf 2 and sraw 1 (call 1,
# bench/logs/s20_rx.log: 1.026x against the config without them). The gluon_rx GPU tests of the defaults ("auto"),
# then issue 3's decode rows (fp8_ds_mla and nope, 512 and 2048 tokens, 8..128 heads, FlashMLA in the same process,
# 3 alternating rounds) at this tree; the prefill rows are unchanged since session 19 (no prefill code changed).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s20_b.sh   (log $OUT/b.log, results under $OUT/r, $OUT/r.tgz; ~7 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG \
  DSATTN_RX_CONSUMERS DSATTN_PREFILL_SCRATCH_MIB
R=$OUT/r; mkdir -p $R; L=$OUT/b.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 200 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfEs -k auto > $R/t_rx.log 2>&1
T=$?
echo "rx GPU tests (auto) rc=$T" >> $L; tail -n 4 $R/t_rx.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
[ $T -eq 0 ] || { echo "tests failed: no timings" >> $L; exit 0; }
nvidia-smi --query-gpu=timestamp,clocks.sm,temperature.gpu,power.draw --format=csv -lms 200 > $R/clocks.csv 2>&1 &
SMI=$!
run() {  # case tokens timeout
  timeout $3 python -m dsattn.cli bench kernels --op sparse_mla --cases $1 --heads 8,16,32,64,128 --tokens $2 \
    --impl auto --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s20_$1_$2 > $R/$1_$2.log 2>&1
  echo "$1 $2 rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/$1_$2.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
run decode 512 140
run decode 2048 160
kill $SMI
tar -czf $OUT/r.tgz -C $OUT r
