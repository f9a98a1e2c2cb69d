#!/usr/bin/env bash
# Session 14, device call 7 (one H200): PrefillConfig.persist (one program an SM walking the work items; the producer
# gathers the next item's first blocks while the consumers finish the current one) and the 1-D item order (a token's
# head blocks neighbouring items) — hang guard, timing beside the default at 16 / 32 / 64 / 128 heads (s_q 1024; 16
# and 64 heads at 8192) with 80 / 88 producer registers, then the GPU tests (persist bit-identical to one program an
# item; the default's heads / configs / chunks / overlap tests, since its code changed).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s14_call7.sh      (log $OUT/c7.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/c7.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 150 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k hang_guard > $R/t_guard.log 2>&1
echo "guard rc=$?" >> $L; tail -n 3 $R/t_guard.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
if grep -q "passed" $R/t_guard.log && ! grep -qE "failed|Timeout" $R/t_guard.log; then
  timeout 170 python bench/pf_schedules.py --heads 16,32,64,128 --tokens 1024 \
    --specs 64/2/4/80/0/1/1,64/2/4/88/0/1/1,64/2/4/80/0/1/1/1,64/2/4/88/0/1/1/1 --profile 0 --rep-ms 10 --out $R \
    --name s14_pf_persist_1024 > $R/pf_1024.log 2>&1
  echo "pf 1024 rc=$?" >> $L; grep -E '"ms"' $R/pf_1024.log | sed 's/"entries_per_program.*"us_per_64"/ us64/' >> $L
  tar -czf $OUT/r.tgz -C $OUT r
  timeout 120 python bench/pf_schedules.py --heads 16,64 --tokens 8192 \
    --specs 64/2/4/80/0/1/1,64/2/4/80/0/1/1/1,64/2/4/88/0/1/1/1 --profile 0 --rep-ms 30 --out $R \
    --name s14_pf_persist_8192 > $R/pf_8192.log 2>&1
  echo "pf 8192 rc=$?" >> $L; grep -E '"ms"' $R/pf_8192.log | sed 's/"entries_per_program.*"us_per_64"/ us64/' >> $L
  tar -czf $OUT/r.tgz -C $OUT r
  timeout 230 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x \
    -k "persist or heads or configs or chunks or overlap or odd_topk" > $R/t_pf.log 2>&1
  echo "tests rc=$?" >> $L; grep -E "passed|failed|FAILED|Error" $R/t_pf.log | tail -n 8 >> $L
fi
tar -czf $OUT/r.tgz -C $OUT r
