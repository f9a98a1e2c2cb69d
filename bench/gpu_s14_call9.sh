#!/usr/bin/env bash
# Session 14, device call 9 (one H200): are issue 3's 64 / 128-head prefill rows (s_q 1024) timed at lower clocks in
# later rounds? The table with 5 alternating rounds beside an nvidia-smi clock log (20 ms), joined per round.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s14_call9.sh      (log $OUT/c9.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/c9.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader > $L
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 20 \
  > $R/clocks.csv 2>&1 &
SMI=$!
timeout 200 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 64,128 --tokens 1024 \
  --impl auto --rep-ms 20 --rounds 5 --out $R --name sparse_mla_s14_prefill_clocks > $R/pf.log 2>&1
echo "prefill rc=$?" >> $L
kill $SMI
python bench/clock_join.py $R/sparse_mla_s14_prefill_clocks.json $R/clocks.csv --out $R/clock_join.json >> $L 2>&1
grep -E "dsattn:native|flashmla:" $R/pf.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
