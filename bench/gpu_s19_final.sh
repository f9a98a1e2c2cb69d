#!/usr/bin/env bash
# Session 19, device call 4 (one H200): GPU tests of this session's two new defaults, then a few more two-CTA configs.
# (1) gluon_rx's 16-head-program default (one consumer, two CTAs an SM): the rx GPU tests of the "auto" way, and
#     the dispatcher's decode tests (tests/gpu/test_sparse_mla_gpu.py, every head count and page size);
# (2) gluon_prefill's cvt_pipe default: the prefill GPU tests other than the config sweeps (call 1 ran those);
# (3) A/B at 16 heads, 512 tokens, fp8_ds_mla, the new default against: pv_depth 0, alu 1 / 3 (integer e4m3
#     conversion of P @ V's / both operands), L2 prefetch 1. PREDICTION: none faster by more than 2% (alu and
#     prefetch were slower in every earlier kernel, gluon_rx's docstring).
#   bash bench/gpu_s19_final.sh   (log $OUT/f.log, results under $OUT/r, $OUT/r.tgz; carry .peer; ~7 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/f.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
t() {  # name timeout pytest-args...
  n=$1; s=$2; shift 2
  timeout $s python -m pytest -q -p no:cacheprovider -rfEs "$@" > $R/t_$n.log 2>&1
  echo "tests $n rc=$?" >> $L; grep -E "passed|failed|FAILED|ERROR" $R/t_$n.log | tail -n 6 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
t rx_auto 130 tests/gpu/test_sparse_mla_rx_gpu.py -k "auto"
t dispatch 150 tests/gpu/test_sparse_mla_gpu.py -k "decode or small_head or odd_topk or repeated"
t prefill 200 tests/gpu/test_sparse_mla_prefill_gpu.py -x -k "not configs and not hang_guard and not peaked"
ab() {  # b-config name
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens 512 --heads 16 --layout fp8_ds_mla \
    --b env:DSATTN_RX_CONFIG=$1 --name ab_s19_2cta_$2_h16 --out $R > $R/ab_$2.log 2>&1
  echo "ab default vs $1 rc=$?" >> $L; tail -n 3 $R/ab_$2.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab 2/48/4/0/0/1/0/0/1/0/0/128 pv0
ab 2/48/4/0/1/1/1/0/1/0/0/128 alu1
ab 2/48/4/0/1/1/3/0/1/0/0/128 alu3
ab 2/48/4/1/1/1/0/0/1/0/0/128 pf1
