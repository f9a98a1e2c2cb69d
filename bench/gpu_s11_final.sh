#!/usr/bin/env bash
# Session 11, final device call (one H200): GPU tests of the new defaults (grouped prefill with fp16 P and the dense
# union lists; the backend and TP paths through them), then issue 3's table beside FlashMLA with alternating rounds
# (decode 512 / 2048 tokens, prefill s_q 1024 / 8192, every head count).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s11_final.sh     (results in $OUT/r.tgz, log $OUT/final.log)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/final.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
(timeout 230 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "(hang_guard and (default or s64_2_4_56_0_0_1)) or heads or overlap or duplicates or (peaked and (default or s64_2_4_56_0_0_1)) or chunks or d512 or odd_topk" > $R/t_pf.log 2>&1; echo "rc=$?" >> $R/t_pf.log) &
(timeout 230 python -m pytest tests/gpu/test_backend_gpu.py tests/gpu/test_tp_gpu.py $P > $R/t_backend.log 2>&1; echo "rc=$?" >> $R/t_backend.log) &
wait
for f in $R/t_*.log; do echo "== $f" >> $L; grep -E "passed|failed|FAILED|Error|rc=" $f | tail -n 8 >> $L; done
tar -czf $OUT/r.tgz -C $OUT r
for n in 512 2048; do
  timeout 80 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16,32,64,128 --tokens $n \
    --impl auto --rep-ms 10 --out $R --name sparse_mla_s11_decode_$n > $R/table_decode_$n.log 2>&1
  echo "decode table $n rc=$?" >> $L; grep -E "^ *decode" $R/table_decode_$n.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
done
for n in 1024 8192; do
  timeout 90 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32,64,128 --tokens $n \
    --impl auto --rep-ms 10 --out $R --name sparse_mla_s11_prefill_$n > $R/table_prefill_$n.log 2>&1
  echo "prefill table $n rc=$?" >> $L; grep -E "^ *prefill" $R/table_prefill_$n.log >> $L; tar -czf $OUT/r.tgz -C $OUT r
done
