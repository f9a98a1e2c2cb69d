#!/usr/bin/env bash
# Written in session 21 after its device time ran out; ran in session 22 (call 1, bench/logs/s22_pf_vst.log): bit-equal,
# 64 / 128 heads 1.037x / 1.029x, 16 / 32 heads 0.985x, so vst is now the default from 64 heads. gluon_prefill config vst (PrefillConfig's 9th field):
# each consumer warpgroup's half of out [64 rows, 256] goes through a ring stage nothing uses any more (stmatrix into
# it, 16 bytes a thread back) and is stored as st.global.v4, where the accumulator layout stores 4 bytes a lane with 8
# half-filled sectors an instruction. Compile check (bench/mla_gluon_check.py --kernel prefill, sm_90a, 16 / 64 heads):
# st.global 130 -> 34 (32 of them v4), registers, spills and shared memory unchanged.
# WHY: the same change in gluon64, whose stores were the same pattern, gave 1.2-1.9% over fp8_ds_mla (session 21,
# bench/results/ab_s21_g64vst_*.json); the 64 / 128-head prefill rows sit at 0.72-0.76x of FlashMLA against 0.7x.
# PREDICTION: s_q 1024 64 / 128 heads 1-2% faster, 8-32 heads 0-1% (fewer programs' epilogues a second); bit-equal.
#   bash bench/gpu_s22_pf_vst.sh   (log $OUT/pv.log, results under $OUT/r, $OUT/r.tgz; ~4 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/pv.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 60 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py -q -p no:cacheprovider -rfE -k hang_guard \
  > $R/t_guard.log 2>&1
echo "prefill hang guard rc=$?" >> $L; tail -n 3 $R/t_guard.log >> $L
DSATTN_PF_CONFIG=64/2/4/80/0/1/1/1/1 timeout 60 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py -q \
  -p no:cacheprovider -rfE -k hang_guard > $R/t_guard_vst.log 2>&1
echo "prefill hang guard under vst rc=$?" >> $L; tail -n 3 $R/t_guard_vst.log >> $L
timeout 150 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py -q -p no:cacheprovider -rfE -k vst \
  > $R/t_vst.log 2>&1
echo "prefill vst GPU tests rc=$?" >> $L; tail -n 4 $R/t_vst.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
ab() {  # heads name
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens 1024 --heads $1 \
    --b env:DSATTN_PF_CONFIG=64/2/4/80/0/1/1/1/1 --name ab_s22_pfvst_h$1 --out $R > $R/ab_h$1.log 2>&1
  echo "ab default vs vst ($1 heads, s_q 1024) rc=$?" >> $L; tail -n 3 $R/ab_h$1.log | head -n 2 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab 64
ab 128
ab 16
ab 32
