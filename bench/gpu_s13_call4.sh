#!/usr/bin/env bash
# Session 13, device call 4 (one H200): the new 16-head decode default (ping-pong consumers + spillfix 1): GPU tests,
# issue 3's decode tables (512 tokens all head counts, 2048 tokens 8 / 16 heads) beside FlashMLA, spillfix on the
# 8-head default (fp8_ds_mla, nope), and the decode calibration rows of 16 heads (graph replays).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s13_call4.sh      (log $OUT/c4.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/c4.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 90 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16,32,64,128 --tokens 512 \
  --impl auto --rep-ms 10 --out $R --name sparse_mla_s13_decode_512 > $R/table_decode_512.log 2>&1
echo "table 512 rc=$?" >> $L; grep -vE "^\s*$" $R/table_decode_512.log | tail -n 26 >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 90 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16 --tokens 2048 \
  --impl auto --rep-ms 10 --out $R --name sparse_mla_s13_decode_2048 > $R/table_decode_2048.log 2>&1
echo "table 2048 rc=$?" >> $L; grep -vE "^\s*$" $R/table_decode_2048.log | tail -n 14 >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 100 python bench/mla_rx_bench.py --heads 8 --layouts fp8_ds_mla,fp8_ds_mla_nope --tokens 512 --rep-ms 20 \
  --configs default,5/56/4/0/1/2/0/0/1/1/1,5/56/4/0/1/2/0/0/1/1/3 --out $R > $R/rx8.log 2>&1
echo "rx8 rc=$?" >> $L; grep -E " ms|FAILED" $R/rx8.log >> $L
[ -f $R/sparse_mla_rx_bench.json ] && mv $R/sparse_mla_rx_bench.json $R/s13_rx8_spillfix.json
tar -czf $OUT/r.tgz -C $OUT r
timeout 120 python -m dsattn.cli calibrate --graph --rep-ms 5 --kernels decode/fp8_ds_mla decode/fp8_ds_mla_nope \
  --heads 16 --out $R/calibration_16.json > $R/calibrate16.log 2>&1
echo "calibrate rc=$?" >> $L; tail -n 4 $R/calibrate16.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 170 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -x -k "c2 and not pingpong3 and not configs_agree" \
  > $R/t_rx.log 2>&1
echo "rx tests rc=$?" >> $L; grep -E "passed|failed|FAILED|Error" $R/t_rx.log | tail -n 8 >> $L
tar -czf $OUT/r.tgz -C $OUT r
