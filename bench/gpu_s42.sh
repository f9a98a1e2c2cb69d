#!/usr/bin/env bash
# Session 42: the decode indexer's paged logits at a decode layer's shapes (session 40-41's layer profile: ~12 us at
# 1-8 requests of 4K + 64 i tokens, 35.7 us at 32, 152 us at 128 = 0.9 TB/s of 138 MB).
# Call `a`: the paged-logits GPU tests (the pipelined kernel and the new hand-issued ring, ahead 1 and 2); then
# bench/paged_logits_sweep.py: kernel (pipe; ring1 / ring2; ring with BN 128 x 8 warps; ring2 x 8 warps) x split count
# (the rule, 4, 8, 32, 64, one tile a program) at the layer's shapes (32 heads bf16 and fp8, 64 heads bf16) and two
# uniform decodes (128 x 65536, 32 x 131072, fp8), beside DeepGEMM's paged MQA logits (fp8).
# PREDICTION: the compile check (sm_90a, CPU) shows the pipelined kernel keeps one key tile in flight and waits for
# its scales and block ids synchronously inside the loop (2-3 global latencies a tile); the ring waits for none.
# ring2 at 128 requests ~2x faster (152 -> ~70 us); at 1 request, one tile a program (65 programs) ~4-5 us against 11.7.
# OUTCOME (ae97e09, paged_logits_sweep_s42.json, bench/logs/s42/a/; after a first try found no machine): tests 6 passed.
# Graph replays, us, best split of each: the ring only helps bf16 queries (128 requests 148.7 -> 100.5, 32: 31.1 ->
# 20.3) and is slower with fp8 ones (128: 64.8 pipe vs 98.9); ring2 slower than ring1 everywhere (registers). bf16
# queries cost 2.3x fp8 ones in the pipelined kernel (148.7 vs 64.8 at 128 requests). One tile a program at 1 request:
# bf16 10.8 -> 4.1 (ring1) / 5.0 (pipe), fp8 7.2 -> 3.8. DeepGEMM (fp8): 7.7 / 9.1 / 12.4 / 44.7 us at 1 / 8 / 32 / 128
# requests, 280.2 at 128 x 65536 (ours 383.0 at 64 splits, 411.5 at the rule), 145.0 at 32 x 131072 (ours 210.6).
# So half the prediction: the few-row gain as predicted, the 128-request gain only for bf16 and smaller.
# Call `b`: key tiles by tensor descriptor (_paged_tma_kernel: Triton pipelines the TMA loads num_stages - 1 deep for
# bf16, num_stages for fp8, compile check; the block id and scales one tile ahead by hand; 55 registers fp8, 96 bf16),
# GPU tests of every kernel (fp8 and bf16 queries, bad block ids over NaN blocks, block sizes 16 / 32 / 64), the sweep
# with num_stages 3 / 4 / 6 and 8 warps, and a split rule `fill` (>= 16 splits, ~4 programs an SM, <= 32 tiles a
# program).
# PREDICTION: tests pass. tma_s4 at 128 requests fp8 ~45-50 us (DeepGEMM 44.7), bf16 ~60-70 us; at 128 x 65536 ~300 us.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s42.sh a
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s42.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s42.log; }
case "$1" in
a)
  timeout 150 python -m pytest -q -x tests/gpu/test_indexer_gpu.py -k paged_logits > $R/tests_a.log 2>&1
  echo "tests rc=$? $(tail -n 1 $R/tests_a.log)" >> $L; pack
  t0=$(date +%s)
  timeout 400 python bench/paged_logits_sweep.py --out $R --name paged_logits_sweep_s42 > $R/sweep_a.log 2>&1
  echo "sweep rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/sweep_a.log >> $L; pack
  ;;
b)
  timeout 200 python -m pytest -q -x tests/gpu/test_indexer_gpu.py -k paged_logits > $R/tests_b.log 2>&1
  echo "tests rc=$? $(tail -n 1 $R/tests_b.log)" >> $L; pack
  t0=$(date +%s)
  timeout 420 python bench/paged_logits_sweep.py --out $R --name paged_logits_tma_s42 > $R/sweep_b.log 2>&1
  echo "sweep rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/sweep_b.log >> $L; pack
  ;;
esac
