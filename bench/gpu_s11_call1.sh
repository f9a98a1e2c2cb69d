#!/usr/bin/env bash
# Session 11, device call 1 (one H200): (a) does the bench's GPU warm-up fix the slow first row (decode table first,
# on a fresh GPU)? (b) gluon_rx ping-pong configs at 8 heads (2x target is 1-2% away), (c) where build_groups' time
# goes (per kernel) and the never-timed hash1 / HASH_W 8, (d) the prefill table at 8/16/64 heads with hash and hash1.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s11_call1.sh     (results in $OUT/r.tgz, log $OUT/c1.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c1.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
# (a) the table's decode rows, 8 heads first, as in session 10's final call
timeout 80 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16 --tokens 512,2048 \
  --impl auto --rep-ms 20 --out $R --name s11_decode_first > $R/decode_first.log 2>&1; echo "decode_first rc=$?" >> $L
grep -E "^ *(decode|8|16)" $R/decode_first.log | head -20 >> $L; tar -czf $OUT/r.tgz -C $OUT r
# (b) ping-pong variants (stages/regs/warps/prefetch/pv_depth/consumers/alu/pipe/hp8/pingpong)
C=4/48/4/0/1/2/0/0/1/1,4/40/4/0/1/2/0/0/1/1,4/56/4/0/1/2/0/0/1/1,4/48/2/0/1/2/0/0/1/1,3/48/4/0/1/2/0/0/1/1,4/48/4/0/2/2/0/0/1/1
for n in 512 2048; do
  timeout 100 python bench/mla_rx_bench.py --heads 8 --tokens $n --configs $C --rep-ms 30 --out $R > $R/rx_$n.log 2>&1
  echo "rx $n rc=$?" >> $L; grep -E "ms" $R/rx_$n.log >> $L; mv $R/sparse_mla_rx_bench.json $R/rx_$n.json 2>/dev/null
  tar -czf $OUT/r.tgz -C $OUT r
done
# (c) union lists
timeout 60 python bench/grouping_phases.py --impl hash hash1 --s-q 1024 --groups 8 4 2 > $R/phases.log 2>&1
echo "phases rc=$?" >> $L; cat $R/phases.log | cut -c1-400 >> $L
timeout 90 python -m dsattn.ops.sparse_mla.grouping --bench --impl hash hash1 --hash-w 4 8 --s-q 1024 8192 \
  --groups 8 4 2 --skip-edge > $R/grouping.log 2>&1; echo "grouping rc=$?" >> $L; grep -E " us " $R/grouping.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
# (d) prefill rows, FlashMLA in the same process
for impl in hash hash1; do
  DSATTN_GROUPING_IMPL=$impl timeout 90 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill \
    --heads 8,16,64 --tokens 1024 --impl auto --rep-ms 20 --out $R --name s11_prefill_$impl > $R/prefill_$impl.log 2>&1
  echo "prefill $impl rc=$?" >> $L; grep -E "prefill" $R/prefill_$impl.log | head -12 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
done
