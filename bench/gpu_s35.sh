#!/usr/bin/env bash
# Session 35, after the review fixes (strided index arguments refused, top-k's signed zeros tie, check_close's exact
# zeros, workspace stamps): call 1 every GPU test file whole (bench/gpu_tests_all.sh; new: top-k k 8192 and signed
# zeros, tiny quantization groups); call 2 the top-k select against session 34's select.py (the FADD the ordered
# key took), 7 alternating rounds in one process. bench/s35_old_select.py is `git show 049844f:src/dsattn/ops/topk/
# select.py`, placed (untracked) before the call.
# Call 3 (`tests2`): every GPU test file again after the second review round (forced kernels leave what they do not
# take to auto, decode_scratch_spec's checks), then bench/fp8_tiny_groups.py (which fp8 groups each kernel reads as 0).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s35.sh tests|topk|tests2
set -u
case $1 in
  tests) bash bench/gpu_tests_all.sh s35_tests ;;
  topk) export PYTHONPATH=src; unset TRITON_INTERPRET
        nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
        timeout 400 python bench/topk_ab_module.py --a bench/s35_old_select.py --name ab_s35_topk_signed_zero \
          --rounds 7 --out $OUT 2>&1 | tee $OUT/topk.log ;;
  tests2) bash bench/gpu_tests_all.sh s35_tests2
          PYTHONPATH=src timeout 120 python bench/fp8_tiny_groups.py --out $OUT > $OUT/tiny.log 2>&1; echo "tiny rc=$?"
          tail -n 40 $OUT/tiny.log ;;
esac
