#!/usr/bin/env bash
# Session 10, device call 5 (one H200, ~4 minutes): first timings of the helpers' newest variants, to pick their
# defaults before the final call: gluon_rx's two-consumer variants (helper X), gluon_prefill's new default schedule
# (helper P), build_groups' hash path (helper U2). Each step bounded; hang guards first.
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/call5.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 60 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -k "hang_guard and c2" >> $L 2>&1; echo "rx guard rc=$?" >> $L
timeout 45 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "hang_guard" >> $L 2>&1; PG=$?; echo "pf guard rc=$PG" >> $L
timeout 80 python bench/mla_rx_bench.py --out $R --rep-ms 20 --heads 8,32 \
  --configs c2,c2+alu3,c2+alu+pipe,c2+hp8,c2+alu+pipe+hp8 >> $L 2>&1; echo "rx bench rc=$?" >> $L
if [ $PG -eq 0 ]; then
  timeout 60 python bench/pf_schedules.py --heads 8,64 --tokens 1024 --out $R --name pf_sched5 \
    --specs 64/2/4/56/0/0/1,64/2/4/56/0/0/0,32/4/4/56/0/0/1 >> $L 2>&1; echo "pf schedules rc=$?" >> $L
fi
timeout 35 python -m dsattn.ops.sparse_mla.grouping --bench --impl hash --s-q 1024 8192 --groups 8 4 2 >> $L 2>&1; echo "grouping bench rc=$?" >> $L
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $R
