#!/usr/bin/env bash
# Session 11, device call 3 (one H200): GPU tests (prefill split 2 of helper P2; the prefill through the dense union
# lists of helper D3; gluon_rx ping-pong at 56 producer registers), then timings: where the prefill's time goes at 64
# heads (timing builds of split 1 and split 2), fp8_ds_mla_nope stage / register configs at 8 heads, issue 3's
# prefill rows (s_q 1024, every head count, alternating rounds) with split 1 and with split 2.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s11_call3.sh     (results in $OUT/r.tgz, log $OUT/c3.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/c3.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
T="python -m pytest -q -x -v -p no:cacheprovider tests/gpu/test_sparse_mla_prefill_gpu.py"
P="-q -p no:cacheprovider -rfEs"
(timeout 100 $T -k "hang_guard and (s64_2_4_56_1_0_2 or s32_4_4_56_0_0_2 or s64_2_4_80_0_1_2 or 16-s64_2_4_56_0_0_2)" > $R/t_p2_guard2.log 2>&1; r=$?; echo "rc=$r" >> $R/t_p2_guard2.log
 [ $r = 0 ] && { DSATTN_PF_CONFIG=64/2/4/56/0/0/2 timeout 170 $T -k "heads or overlap or duplicates or chunks or d512 or odd_topk or peaked" > $R/t_p2.log 2>&1; echo "rc=$?" >> $R/t_p2.log; }) &
(DSATTN_GROUPING_IMPL=dense timeout 270 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "(hang_guard and default) or heads or overlap or duplicates or chunks or d512 or odd_topk" > $R/t_d3.log 2>&1; echo "rc=$?" >> $R/t_d3.log) &
(timeout 200 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -x -k "pingpong or (c2 and (hang_guard or layouts_heads or hp8 or page_sizes))" > $R/t_rx.log 2>&1; echo "rc=$?" >> $R/t_rx.log) &
wait
for f in $R/t_*.log; do echo "== $f" >> $L; grep -E "passed|failed|FAILED|Error|rc=" $f | tail -n 8 >> $L; done
tar -czf $OUT/r.tgz -C $OUT r
for s in 1 2; do
  timeout 80 python bench/pf_schedules.py --heads 64 --tokens 1024 --specs 64/2/4/56/0/0/$s,64/2/4/56/0/0/$s --profile 1,2 \
    --out $R --name pf_profile_s$s > $R/pf_profile_s$s.log 2>&1; echo "profile split $s rc=$?" >> $L
  grep -v "^#" $R/pf_profile_s$s.log | cut -c1-200 >> $L
done
C=5/56/4/0/1/2/0/0/1/1,6/56/4/0/1/2/0/0/1/1,6/48/4/0/1/2/0/0/1/1,5/48/4/0/1/2/0/0/1/1,6/64/4/0/1/2/0/0/1/1
for n in 512 2048; do
  timeout 70 python bench/mla_rx_bench.py --heads 8 --layouts fp8_ds_mla_nope --tokens $n --configs $C --rep-ms 25 --out $R > $R/rx_nope_$n.log 2>&1
  echo "rx nope $n rc=$?" >> $L; grep -E " ms" $R/rx_nope_$n.log >> $L; mv $R/sparse_mla_rx_bench.json $R/rx_nope_$n.json 2>/dev/null
done
tar -czf $OUT/r.tgz -C $OUT r
timeout 110 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32,64,128 --tokens 1024 \
  --impl auto --rep-ms 15 --out $R --name s11_prefill_1024_split1 > $R/prefill_s1.log 2>&1; echo "prefill split1 rc=$?" >> $L
grep -E "^ *prefill" $R/prefill_s1.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
DSATTN_PF_CONFIG=64/2/4/56/0/0/2 timeout 80 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32 \
  --tokens 1024 --impl auto --rep-ms 15 --out $R --name s11_prefill_1024_split2 > $R/prefill_s2.log 2>&1; echo "prefill split2 rc=$?" >> $L
grep -E "^ *prefill" $R/prefill_s2.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
