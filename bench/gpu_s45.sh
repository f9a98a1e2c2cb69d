#!/usr/bin/env bash
# Session 45: a small-batch decode layer runs 7-9 kernels, and each tiny one costs ~1-1.5 us of GPU time whatever its
# work (session 44's layer profiles: glm-5 TP8 at 1 request _write_kv 1.41, _write_indexer 1.34 us of a 31.6 us span;
# glm-5.3-flash _pool 0.91 + _tail 1.48 of 24.8). New: ops.cache.write_kv_and_indexer_cache (one launch writes a
# kpool-1 layer's latent rows and indexer keys; DSAAttention.fused_cache_writes) and kpool_update's
# single_token_requests (a step of one token a request updates the pools in one launch; IndexerDriver.one_launch_kpool).
# bench/decode_layer_kernels.py --unfused-writes runs the launches as before.
# Call `a`: the cache-write and k-pool GPU tests and the backend GPU file; decode layers (glm-5 and glm-5.3-flash TP8,
# 4K contexts, 1-128 requests) default against --unfused-writes, then the default again.
# PREDICTION: tests pass; glm-5 span ~1.2-1.4 us less at every batch (one ~1.4 us kernel gone, the fused one no longer
# than the longer of the two); glm-5.3-flash ~0.8-1 us less at 1-128 requests (the pool and tail halves' ~2.4 us
# become one ~1.5 us launch).
# Call `b`: deepseek-v3.2 TP8 / TP1 layers the same way; `dsattn bench serve --graph` (every preset: its rows in
# README are from session 15).
# Call `c`: every GPU test file whole at the session's last kernel change (bench/gpu_tests_all.sh).
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s45.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s45.log; }
layer() {  # $1 result name, then args
  local n=$1; shift
  local t0=$SECONDS
  timeout 150 python bench/decode_layer_kernels.py "$@" --out $R --name $n > $R/$n.log 2>&1
  echo "layer $n rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/$n.log >> $L; pack
}
case "$1" in
a)
  N=2 K="write or kpool or cache" LIMIT=150 bash bench/gpu_tests_sharded.sh $R/tests_a tests/gpu/test_indexer_gpu.py &
  N=6 LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_a_backend tests/gpu/test_backend_gpu.py
  wait
  cat $R/tests_a/summary.log $R/tests_a_backend/summary.log >> $L; pack
  C=glm-5:8:fp8_ds_mla,glm-5.3-flash:8:fp8_ds_mla_nope
  layer decode_layer_writes_s45 --configs $C --batches 1,8,32,128
  layer decode_layer_writes_s45_unfusedwrites --unfused-writes --configs $C --batches 1,8,32,128
  layer decode_layer_writes_s45_again --configs $C --batches 1,8,32,128
  ;;
b)
  C=deepseek-v3.2:8:fp8_ds_mla,deepseek-v3.2:1:fp8_ds_mla
  layer decode_layer_writes_ds_s45 --configs $C --batches 1,8,32,128
  layer decode_layer_writes_ds_s45_unfusedwrites --unfused-writes --configs $C --batches 1,8,32,128
  t0=$SECONDS
  timeout 240 python -m dsattn.cli bench serve --graph --out $R --name serve_s45 > $R/serve.log 2>&1
  echo "serve rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/serve.log >> $L; pack
  ;;
c)
  bash bench/gpu_tests_all.sh s45_tests >> $L 2>&1
  tar -czf $OUT/r.tgz -C $OUT s45.log s45_tests.tgz
  ;;
esac
