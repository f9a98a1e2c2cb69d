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
esac
