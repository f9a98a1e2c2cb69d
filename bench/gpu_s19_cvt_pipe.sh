#!/usr/bin/env bash
# Written in session 18 after its device time ran out, NOT YET RUN: gluon_prefill config cvt_pipe
# (DSATTN_PF_CONFIG=64/2/4/80/0/1/1/1: the default with the latent gathered as four 128-column cp.async commit
# groups, each converted to fp16 x 2^-8 as soon as it landed, instead of the whole stage after all of it).
# WHY (session 18's ncu profile of the default, s_q 1024, bench/logs/s18_profile.log): consumer 0 spins on the
# stage's full barrier for 5.3% of all samples at 64 heads and 5.6% at 16 (~16% of its own time), and the producer
# executes 144 M of the kernel's 304 M warp instructions (FlashMLA's producer: 18 M), ~half of it the conversion:
# with two stages the gather of block b + 1 and its conversion must both fit under block b's compute.
# PREDICTION (arithmetic): the conversion of three of the four groups overlaps the gather's latency, ~0.5-0.75 us off
# a ~3 us producer chain a block; if half of consumer 0's wait goes: 64 heads s_q 1024 0.763 -> ~0.70-0.73 ms
# (issue 3's 0.7x: ~0.73 against FlashMLA's 0.514-0.543), 16 heads 0.397 -> ~0.37-0.38 (1.3x: <= 0.377); outputs
# bit-equal to the default. Compile check: no spill at 8 / 16 / 32 / 64 heads, D 576 and 512 (bench/mla_gluon_check.py
# --kernel prefill --configs 64/2/4/80/0/1/1/1); the default's sm_90a PTX unchanged outside debug labels.
# Order: (1) the prefill GPU tests of it (hang guard first; bit-equality with the default at 8..128 heads); (2) only if
# they passed: A/B default vs cvt_pipe at s_q 1024 16 / 64 heads and 8192 16 heads; (3) issue 3's prefill rows
# with it, every head count, FlashMLA in the same process (the make-it-the-default evidence, if (2) says faster).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s19_cvt_pipe.sh   (log $OUT/cp.log, results under $OUT/r, $OUT/r.tgz; ~6 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB
R=$OUT/r; mkdir -p $R; L=$OUT/cp.log
CP=64/2/4/80/0/1/1/1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 240 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py -q -p no:cacheprovider -rfEs -x \
  -k "hang_guard or cvt_pipe or configs or peaked" > $R/t_cvt.log 2>&1
T=$?
echo "prefill GPU tests (cvt_pipe) rc=$T" >> $L; tail -n 12 $R/t_cvt.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
[ $T -eq 0 ] || { echo "tests failed: no timings" >> $L; exit 0; }
ab() {  # s_q heads
  timeout 90 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $1 --heads $2 \
    --a env:DSATTN_PF_CONFIG=64/2/4/80/0/1/1 --b env:DSATTN_PF_CONFIG=$CP --name ab_s19_cvt_pipe_$1_h$2 --out $R \
    > $R/ab_$1_h$2.log 2>&1
  echo "ab cvt_pipe, s_q $1, $2 heads rc=$?" >> $L; tail -n 3 $R/ab_$1_h$2.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab 1024 64
ab 1024 16
ab 8192 16
for n in 1024 8192; do
  DSATTN_PF_CONFIG=$CP timeout 90 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill \
    --heads 8,16,32,64,128 --tokens $n --impl auto --rounds 3 --rep-ms 20 --out $R \
    --name sparse_mla_s19_cvt_prefill_$n \
    > $R/pf_$n.log 2>&1
  echo "prefill $n with cvt_pipe rc=$?" >> $L; grep -E "dsattn:native|flashmla:" $R/pf_$n.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
done
