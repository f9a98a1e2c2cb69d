#!/usr/bin/env bash
# Session 66: FlashMLA's L2 prefetch-size hint (cp.async ... L2::256B, gluon_prefill config l2pf; ops/_ptx_prefetch.py)
# on issue 3's prefill case. PART=a: 1. GPU tests test_pf_l2pf_bit_equal (8..128 heads, 64 / 256 B, default and bf16
# schedule); 2. bench/l2pf_probe.py (configs in alternation in one process, beside FlashMLA native and 64 padded):
# 32 heads s_q 1024 (default, l2pf 128 / 256, plo 0 with and without), 32 heads s_q 8192, 64 and 8 heads s_q 1024;
# 3. with session 65's config pair (9d66719's gluon_prefill.py plus l2pf, copied in from bench/s66_pair/ when present):
# pair and plo 0 with and without l2pf at 32 heads s_q 1024. Carry [".peer"].
# PREDICTION (either card): the hint targets gathers bound by latency (session 65: consumers wait on full barriers,
# L2 throughput 38.9%); the default hides most of its gathers (plo 0 no-gather 2.36 vs full 2.51 us a block, H100), so
# <= 1.05x there; the pair exposes ~0.77 us a block: if the hint closes half of it, pair + l2pf ~1.15x plo 0.
#   PART=a DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s66.sh      ($OUT/s66.log, $OUT/s66.tgz)
# RAN at 2174404 on an H100 (bench/results/s66/gpu_s66_script_h100.log; 9d66719's gluon_prefill.py with l2pf added
# as bench/s66_pair/, not committed): tests passed; l2pf 1.016x the default at 32 heads s_q 1024, 0.991x at 8192,
# 1.007x at 64 heads, none on plo 0 or the pair. Config l2pf was removed afterwards and bench/l2pf_probe.py became
# bench/pf_config_probe.py, so this script needs 2174404's tree to run again.
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
L=$OUT/s66.log; R=$OUT/q; mkdir -p $R
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); TAG=$(case "$GPU" in *H200*) echo h200;; *) echo h100;; esac)
echo "$GPU tree ${DSATTN_GIT_COMMIT:-?} part ${PART:-a}" > $L
pack() { tar -czf $OUT/s66.tgz -C $OUT q s66.log; }
t0=$SECONDS
probe() {  # name s_q heads configs [rounds calls]
  timeout 150 python bench/l2pf_probe.py --sq $2 --heads $3 --configs "$4" --rounds ${5:-15} --calls ${6:-20} \
    --json $R/$1_$TAG.json > $R/$1.log 2>&1
  echo "== $1: s_q $2, $3 heads: rc=$? $((SECONDS - t0)) s" >> $L
  grep -v -i warn $R/$1.log | cut -c1-260 | tail -n 12 >> $L; pack
}
BF="f16=0;cvt_pipe=0;producer_regs=56"
PLO0="$BF;plo=0"
if [ "${PART:-a}" = a ]; then
  timeout 200 python -m pytest -q -p no:cacheprovider -rfE tests/gpu/test_sparse_mla_prefill_gpu.py -k "l2pf" \
    > $R/tests.log 2>&1
  echo "l2pf tests rc=$? $((SECONDS - t0)) s" >> $L; grep -E "passed|failed|rror" $R/tests.log | tail -n 6 >> $L; pack
  grep -q " passed" $R/tests.log && ! grep -q "failed" $R/tests.log || { echo "tests not passed: stop" >> $L; exit 0; }
  probe l2pf_s66_1024_h32 1024 32 ",l2pf=256,l2pf=128,$PLO0,$PLO0;l2pf=256"
  probe l2pf_s66_8192_h32 8192 32 ",l2pf=256" 8 5
  probe l2pf_s66_1024_h64 1024 64 "vst=1,vst=1;l2pf=256"
  probe l2pf_s66_1024_h8 1024 8 ",l2pf=256"
  if [ -f bench/s66_pair/gluon_prefill.py ]; then
    cp src/dsattn/ops/sparse_mla/gluon_prefill.py $R/.gp_keep.py
    cp bench/s66_pair/gluon_prefill.py src/dsattn/ops/sparse_mla/gluon_prefill.py
    probe l2pf_s66_pair_1024_h32 1024 32 "$PLO0,$PLO0;l2pf=256,$PLO0;pair=1,$PLO0;pair=1;l2pf=256"
    mv $R/.gp_keep.py src/dsattn/ops/sparse_mla/gluon_prefill.py
  fi
fi
cat $L
