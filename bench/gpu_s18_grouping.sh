#!/usr/bin/env bash
# Written in session 17 (no device lent that session), NOT YET RUN: grouping IMPL 'dense_smem' (grouping_smem.py: each
# group's dense union map built in shared memory by one Gluon program, inline-PTX atomics, instead of the clear pass
# and s_q x topk global atomic ORs). PREDICTION (arithmetic, grouping_smem's docstring): build_groups at s_q 1024
# G 8 / 4 / 2 ~15-25 / 20-30 / 40-50 us (dense 42.5 / 52.3 / 72.6), at s_q 8192 ~120-150 / 120-150 / 250-300 us
# (300 / 347 / 496); the 16-head prefill at s_q 8192 ~3.07 -> ~2.85 ms (issue 3: 1.3x of FlashMLA's ~3.9-4.0 needs
# <= 3.0-3.08 ms).
# Order: (1) its GPU tests (entry for entry against the reference, bit for bit against the dense path, the prefill
# bit-equal); (2) the grouping bench, dense against dense_smem (CUDA graph of 10 calls, matches_reference, the edge
# cases); (3) only if (1) passed: A/B of the prefill at 16 / 32 heads, s_q 1024 and 8192, then issue 3's prefill rows
# at 8 / 16 / 32 heads with it, FlashMLA in the same process.
# Two device calls (each under the 600 s limit): part 1 = (1), (2) and the A/B at s_q 8192, ~8 min; part 2 = the A/B
# at s_q 1024 and the table, ~7 min (run it only after part 1's tests passed).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s18_grouping.sh 1|2   (log $OUT/gr.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB
R=$OUT/r; mkdir -p $R; L=$OUT/gr.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
ab() {  # s_q heads
  timeout 90 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $1 --heads $2 \
    --a env:DSATTN_GROUPING_IMPL=dense --b env:DSATTN_GROUPING_IMPL=dense_smem \
    --name ab_s18_grouping_$1_h$2 --out $R > $R/ab_$1_h$2.log 2>&1
  echo "ab dense_smem, s_q $1, $2 heads rc=$?" >> $L; tail -n 4 $R/ab_$1_h$2.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
if [ "${1:-1}" = 1 ]; then
timeout 150 python -m pytest tests/gpu/test_grouping_gpu.py -q -p no:cacheprovider -rfEs > $R/t_grouping.log 2>&1
T=$?
echo "grouping GPU tests rc=$T" >> $L; tail -n 15 $R/t_grouping.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
timeout 150 python -m dsattn.ops.sparse_mla.grouping --bench --impl dense dense_smem --s-q 1024 8192 --groups 8 4 2 \
  > $R/grouping_bench.log 2>&1
echo "grouping bench rc=$?" >> $L; cat $R/grouping_bench.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
[ $T -eq 0 ] || { echo "grouping tests failed: no prefill runs" >> $L; exit 0; }
ab 8192 16
ab 8192 32
exit 0
fi
ab 1024 16
ab 1024 32
for n in 1024 8192; do
  DSATTN_GROUPING_IMPL=dense_smem timeout 150 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill \
    --heads 8,16,32 --tokens $n --impl auto --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s18_smem_prefill_$n \
    > $R/pf_$n.log 2>&1
  echo "prefill $n with dense_smem rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/pf_$n.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
done
