#!/usr/bin/env bash
# Session 39. Call `c`: small-batch decode split-K, every count against none and the plan (dispatch.decode_splits:
# >= 256 keys a part, programs x parts <= 2 x SMs; never swept), as graph replays (bench/decode_splits_sweep.py).
# PREDICTION: as the prefill sweep (session 38), 1-16 tokens at 8-32 heads want 16-32 parts where the plan gives 8.
# Call `b`: short prefills beside FlashMLA as CUDA-graph replays (session 38 left them eager only, where
# both are host-bound), and where a split short prefill's GPU time goes per kernel (is the combine launch worth
# folding into the split kernel?).
# PREDICTION: ours (split by the plan) 0.014-0.05 ms at 1-32 tokens, 8-32 heads; FlashMLA padded to 64 ~0.03-0.06
# (its eager 0.066 at 32 tokens includes host time); the combine 2-5 us of a split call.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s39.sh b|c|d|e
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB \
  DSATTN_PREFILL_SPLITS
R=$OUT/r; mkdir -p $R; L=$OUT/s39.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s39.log; }
case "$1" in
b)
  t0=$(date +%s)
  timeout 150 python bench/prefill_split_kernels.py --out $R --name prefill_split_kernels_s39 > $R/split_kernels.log 2>&1
  echo "split kernels rc=$? $(( $(date +%s) - t0 )) s" >> $L; cat $R/split_kernels.log >> $L; pack
  export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer
  t0=$(date +%s)
  timeout 360 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill --heads 8,16,32,64,128 \
    --tokens 1,8,32,128 --impl auto --graph --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s39_prefill_short_graph \
    > $R/prefill_short.log 2>&1
  echo "prefill short graph rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -E "dsattn:|flashmla:" $R/prefill_short.log >> $L
  ;;
c)
  t0=$(date +%s)
  timeout 500 python bench/decode_splits_sweep.py --out $R --name decode_splits_sweep_s39 > $R/decode_sweep.log 2>&1
  echo "decode sweep rc=$? $(( $(date +%s) - t0 )) s" >> $L; cat $R/decode_sweep.log >> $L
  ;;
d)
  # after the decode plan change (one wave, 64 keys): the plan against every count over nope and other token counts,
  # then the decode and backend GPU test files (the workspace's split-K reservation follows the plan)
  t0=$(date +%s)
  timeout 120 python bench/decode_splits_sweep.py --layouts fp8_ds_mla_nope,fp8_ds_mla --heads 8,32,64 --variants native \
    --tokens 2,8,32 --rounds 3 --out $R --name decode_splits_sweep_s39_check > $R/decode_check.log 2>&1
  echo "decode check rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -E "plan|->" $R/decode_check.log >> $L; pack
  N=16 LIMIT=330 bash bench/gpu_tests_sharded.sh $R/tests_d tests/gpu/test_sparse_mla_gpu.py \
    tests/gpu/test_sparse_mla_rx_gpu.py tests/gpu/test_backend_gpu.py
  cat $R/tests_d/summary.log >> $L
  ;;
e)
  # the combine's share of a small-batch decode at the new plan, and the split prefill's kernels with the fixed script
  python bench/prefill_split_kernels.py --decode fp8_ds_mla --cases 8:native:1,8:native:4,8:native:16,8:native:64,32:native:4,64:native:1,64:native:16,128:native:16 \
    --out $R --name decode_split_kernels_s39 > $R/decode_kernels.log 2>&1
  echo "decode kernels rc=$?" >> $L; grep -v -i warn $R/decode_kernels.log >> $L; pack
  python bench/prefill_split_kernels.py --cases 8:pad64:1,8:pad64:8,8:pad64:32,8:native:128,32:native:32,64:native:8 \
    --out $R --name prefill_split_kernels_s39b > $R/split_kernels_b.log 2>&1
  echo "split kernels rc=$?" >> $L; grep -v -i warn $R/split_kernels_b.log >> $L
  ;;
esac
pack
