#!/usr/bin/env bash
# Session 16, device call 4 (one H200). (1) The grouped prefill's chunk size: at s_q 8192 every grouped head count
# (8 / 16 / 32) runs two chunks of 4096 tokens (64 MiB of union-list scratch), each built then attended, so each
# chunk ends in its own partial wave. A/B of one chunk (DSATTN_PREFILL_SCRATCH_MIB=128) against the default at 16 and
# 32 heads, then the issue-3 prefill rows at s_q 8192 with one chunk, FlashMLA in the same process. PREDICTION
# (arithmetic: one partial wave of ~190 us programs at ~24% idle, plus a launch gap): 1-2% at 16 heads.
# (2) The top-k GPU tests (call 2 timed them out at 100 s with no test finished), verbose, 180 s.
# (3) The prefill GPU tests after the tail schedule's removal (hang guard, heads, configs).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s16_chunks.sh      (log $OUT/ch.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB
R=$OUT/r; mkdir -p $R; L=$OUT/ch.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
for h in 16 32; do
  timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens 8192 --heads $h \
    --a env:DSATTN_PREFILL_SCRATCH_MIB=64 --b env:DSATTN_PREFILL_SCRATCH_MIB=128 \
    --name ab_s16_chunks_h$h --out $R > $R/ab_h$h.log 2>&1
  echo "ab one chunk, $h heads rc=$?" >> $L; tail -n 4 $R/ab_h$h.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
done
DSATTN_PREFILL_SCRATCH_MIB=128 timeout 120 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill \
  --heads 8,16,32 --tokens 8192 --impl auto --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s16_prefill_8192_1chunk \
  > $R/pf8192.log 2>&1
echo "prefill 8192, one chunk rc=$?" >> $L; grep -E "dsattn:native|flashmla:" $R/pf8192.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 180 python -m pytest tests/gpu/test_indexer_gpu.py -v -p no:cacheprovider -rfEs -k topk_sets --durations=5 \
  > $R/t_topk.log 2>&1
echo "top-k GPU tests rc=$?" >> $L; grep -E "passed|failed|FAILED|slowest|s call" $R/t_topk.log | tail -n 12 >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 90 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -k "hang_guard or pf_heads or configs or chunks" \
  > $R/t_prefill.log 2>&1
echo "prefill GPU tests rc=$?" >> $L; tail -n 3 $R/t_prefill.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
