#!/usr/bin/env bash
# Session 68, call 2 (carry [".peer"]; the pair file first: git show 9d66719:src/dsattn/ops/sparse_mla/gluon_prefill.py >
# bench/s67_pair/gluon_prefill.py && patch bench/s67_pair/gluon_prefill.py bench/results/s68/pair_s68.patch, a measuring
# copy, not committed): the fp16 pair with its conversions
# pipelined. Call 1 found the fp16 pair (PROFILE 448) right but 0.814x the default: each half waited for its own copies
# (wait_group 0) before its conversion, so the producer alone took 2.62 us a block. Bit 512 ('pairs'): L(0) and R(0)
# issued, then both converted (wait_group 1, 0), then R(1), L(1) likewise; bit 1024 ('chain'): each half converted
# after the next half's issue, the step's last at once (tests/test_prefill_protocol.py: both deadlock-free; carried
# across the step boundary it deadlocks). Right against the reference (check_f16.py, q x 1 and x 6), kernel times (full,
# no products), `dsattn bench ab` against the default at 32 heads; then 16 / 64 heads' kernel times.
# PREDICTION: right at both scales; no products 462.9 -> ~300-350 us (two exposed latencies a step, not four); full
# 617 -> ~430-470 us (2.45-2.65 us a block); bench ab 1.05-1.15x the default at 32 heads; chain <= pairs (R(0)'s
# conversion waits for R(1)'s release and issue).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s68b.sh      ($OUT/s68b.log, $OUT/s68b.tgz)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
L=$OUT/s68b.log; R=$OUT/k; mkdir -p $R
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
pack() { tar -czf $OUT/s68b.tgz -C $OUT k s68b.log; }
t0=$SECONDS
F16P="f16=0,cvt_pipe=0,producer_regs=64,plo=0,pair=1"
kp() {  # name config profile [heads]
  DSATTN_PF_CONFIG=$2 DSATTN_PF_PROFILE=$3 timeout 100 python bench/prefill_kernel_probe.py ${4:-32} > $R/$1.log 2>&1
  echo "== $1 ($2, P$3, ${4:-32} heads): rc=$? $((SECONDS - t0)) s" >> $L
  grep -v -i warn $R/$1.log | head -n 1 | cut -c1-150 >> $L; pack
}
ab() {  # name heads profile
  timeout 120 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens 1024 --heads $2 \
    --a env:DSATTN_SPARSE_MLA_IMPL=gluon_prefill \
    --b "env:DSATTN_SPARSE_MLA_IMPL=gluon_prefill,env:DSATTN_PF_CONFIG=${F16P//,/;},env:DSATTN_PF_PROFILE=$3" \
    --name ab_s68_$1_1024_h$2 --out $R > $R/ab_$1_$2.log 2>&1
  echo "== ab $1 $2 heads: rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/ab_$1_$2.log | tail -n 3 | cut -c100-300 >> $L
  pack
}
cp src/dsattn/ops/sparse_mla/gluon_prefill.py $OUT/gp_keep.py
cp bench/s67_pair/gluon_prefill.py src/dsattn/ops/sparse_mla/gluon_prefill.py
for P in 960 1472; do
  timeout 150 python bench/s67_pair/check_f16.py 32 $P > $R/check_f16_$P.log 2>&1
  echo "== check_f16 32 P$P: rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/check_f16_$P.log | grep "pair_f16" >> $L
  pack
done
kp def32 "" 0; kp pipe32 $F16P 960; kp pipe32_noprod $F16P 962; kp chain32 $F16P 1472; kp chain32_noprod $F16P 1474
ab pairs 32 960; ab chain 32 1472
kp def64 "" 0 64; kp pipe64 $F16P 960 64; kp def16 "" 0 16; kp pipe16 $F16P 960 16
mv $OUT/gp_keep.py src/dsattn/ops/sparse_mla/gluon_prefill.py
pack; rm -rf $R; cat $L
