#!/usr/bin/env bash
# Session 11, device call 2 (one H200), timings: the dense union lists (helper D3) against hash; the grouped
# prefill's split 2 schedule (helper P2: three consumer warpgroups) after a hang guard, against split 1; host cost
# of the public calls; issue 3's decode rows (8 / 16 heads, gluon_rx ping-pong at 56 producer registers) with the
# alternating --rounds table.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s11_call2.sh     (results in $OUT/r.tgz, log $OUT/c2.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c2.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
T="python -m pytest -q -x -v -p no:cacheprovider tests/gpu/test_sparse_mla_prefill_gpu.py"
timeout 60 $T -k "hang_guard and (8-s64_2_4_56_0_0_2 or 64-s64_2_4_56_0_0_2)" > $R/p2_guard1.log 2>&1; g=$?
echo "p2 guard1 rc=$g" >> $L; tail -n 3 $R/p2_guard1.log >> $L
timeout 130 python -m dsattn.ops.sparse_mla.grouping --bench --impl dense hash --dense-insert 512:4 2048:8 \
  --s-q 1024 8192 --groups 8 4 2 > $R/grouping.log 2>&1; echo "grouping rc=$?" >> $L
grep -E " us |edge" $R/grouping.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
timeout 40 python bench/grouping_phases.py --impl dense hash --s-q 1024 --groups 8 4 2 > $R/phases.log 2>&1
echo "phases rc=$?" >> $L; grep -v Warn $R/phases.log | grep "s_q" | cut -c1-300 >> $L
S=64/2/4/56/0/0/1
[ $g = 0 ] && S=$S,64/2/4/56/0/0/2,64/2/4/56/1/0/2
timeout 220 python bench/pf_schedules.py --heads 8,16,64,128 --tokens 1024 --specs $S --out $R --name pf_split2 \
  > $R/pf_split2.log 2>&1; echo "pf_schedules rc=$?" >> $L; cat $R/pf_split2.log | grep -v "^#" | cut -c1-220 >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 50 python bench/host_overhead.py > $R/host.log 2>&1; echo "host rc=$?" >> $L; grep -E "host .* GPU" $R/host.log >> $L
timeout 100 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16 --tokens 512,2048 \
  --impl auto --rep-ms 15 --out $R --name s11_decode_h8_16 > $R/decode.log 2>&1; echo "decode rc=$?" >> $L
grep -E "^ *decode" $R/decode.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
