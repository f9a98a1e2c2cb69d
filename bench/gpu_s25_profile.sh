#!/usr/bin/env bash
# Session 25, device call 3 (one H200): Nsight Compute of the 8-head decode defaults over both fp8 layouts (gluon_rx's
# ping-pong 8-head programs, 512 tokens; the last profile of the nope program was session 19's, before vst, idxpf /
# sraw and the 48-register producer), to see where the nope program's time goes that fp8_ds_mla's does not (nope moves
# 0.80x the bytes and does 0.89x the S^T work, yet takes 0.88x the time: 1.13x, target 1.15x); then the small GPU
# test files whole at this tree (backend, indexer, grouping, tp), in parallel.
#   bash bench/gpu_s25_profile.sh   (log $OUT/prof.log, results under $OUT/r, $OUT/r.tgz; ~5 min)
LOG=prof.log TAG=s25 source bench/gpu_lib.sh
command -v ncu > /dev/null || { echo "no ncu" >> $L; exit 0; }
prof nope8 "sparse_mla_(rx|rx2|ws)_kernel" --case decode-nope-8
prof fp8_8 "sparse_mla_(rx|rx2|ws)_kernel" --case decode-fp8-8
N=4 LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_small tests/gpu/test_backend_gpu.py tests/gpu/test_indexer_gpu.py \
  tests/gpu/test_grouping_gpu.py tests/gpu/test_tp_gpu.py
cat $R/tests_small/summary.log >> $L; pack
