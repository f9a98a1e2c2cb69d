#!/usr/bin/env bash
# For the next device session (written in session 14, NOT YET RUN): grouping IMPL 'hist' (shared-memory histograms a
# group; CPU tests equal to the reference) against the dense path (the default), then the prefill GPU tests with it,
# then issue 3's prefill rows at 8 / 16 / 32 heads with it and with the default (one process each, FlashMLA in both).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s15_hist.sh      (log $OUT/h.log, results under $OUT/r)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/h.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 200 python -m dsattn.ops.sparse_mla.grouping --bench --impl dense hist --hist 2048:4 1024:4:128 2048:8 4096:8 \
  --groups 8 4 2 > $R/grouping.log 2>&1
echo "grouping bench rc=$?" >> $L; grep -E " us |matches_reference" $R/grouping.log | head -n 40 >> $L
tar -czf $OUT/r.tgz -C $OUT r
if grep -q "hist" $R/grouping.log && ! grep -q "matches_reference False" $R/grouping.log; then
  DSATTN_GROUPING_IMPL=hist timeout 150 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x \
    -k "heads or overlap or chunks or duplicates" > $R/t_hist.log 2>&1
  echo "prefill tests (hist) rc=$?" >> $L; tail -n 2 $R/t_hist.log >> $L
  for impl in hist auto; do
    DSATTN_GROUPING_IMPL=$impl timeout 150 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill \
      --heads 8,16,32 --tokens 1024,8192 --impl auto --rep-ms 20 --out $R --name sparse_mla_s15_prefill_$impl \
      > $R/pf_$impl.log 2>&1
    echo "prefill table ($impl) rc=$?" >> $L; grep -E "dsattn:native|flashmla:pad64" $R/pf_$impl.log >> $L
    tar -czf $OUT/r.tgz -C $OUT r
  done
fi
tar -czf $OUT/r.tgz -C $OUT r
