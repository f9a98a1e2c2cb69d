#!/usr/bin/env bash
# Written in session 19 after its device time ran out; RAN in session 20 (device call 1, bench/logs/s20_rx.log):
# sraw lost at 16 heads (0.913x), idxpf alone no difference, the two together 1.026x at nope 8 heads (now that
# default). Two gluon_rx configs.
# (A) idxpf (RxConfig's 13th field): the producer asks L1 (prefetch.global.L1) for the index lines of the block idxpf
# past the next, so the next block's index loads, issued one block ahead of their use, hit L1 instead of L2.
# WHY (session 19's ncu profile of the 8-head nope decode, bench/logs/s19_profile.log): the producer's top samples are
# the address arithmetic right after those index loads (IMAD.WIDE by the 528-byte stride 5.9% of all samples, NOP
# 5.1%), not its free-barrier wait (1.5%); at 16 heads (two CTAs) the producer instead waits on `free` (19.5%).
# PREDICTION: nope 8 heads 512 tokens 0-5% faster (the consumers seldom wait on `full`, so the producer may not set
# the pace); fp8_ds_mla 8 heads 0-3%; 16 heads no difference (the producer is ahead there). Outputs bit-equal.
# Compile check (bench/mla_gluon_check.py --kernel rx): no spill at 8 heads (both layouts, idxpf 1 / 2), 16-head
# two-CTA 4 B (fp8_ds_mla) / 0 (nope); the default kernels' sm_90a PTX unchanged outside debug line numbers.
# (B) sraw (the 14th field): S^T as the two-consumer halves build it, one accumulator a latent group over the
# unscaled fp8 values (one cvt a pair, no fp16 multiply), the power-of-two group scales applied in fp32 afterwards.
# WHY: the same profile of the 16-head two-CTA default has the producer waiting on `free` (19.5% of samples: the
# consumer sets the pace) and its warps issuing one instruction every 7.8 cycles on average; counting the code (an
# estimate, not measured), a consumer thread's block is ~960 instructions, of which the
# 128 fp16 multiplies of S's operand go with sraw (~13%). PREDICTION: 16 heads 512 tokens 0.239 -> ~0.22-0.23 ms over
# fp8_ds_mla (2x FlashMLA's 0.442 needs <= 0.221); 8 heads (ping-pong) 0-5%. Outputs within fp32 rounding, not
# bit-equal. Compile check: consumer spills 32 B at the 16-head two-CTA fp8_ds_mla config, 16 B at 8-head
# ping-pong fp8_ds_mla, 0 over nope (8 and 16 heads); 32 heads one consumer 32 / 8 B; default PTX unchanged.
#   bash bench/gpu_s20_rx.sh   (log $OUT/ix.log, results under $OUT/r, $OUT/r.tgz; ~6-7 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/ix.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfEs \
  -k "(auto and (idxpf or rx_hang_guard)) or sraw" > $R/t_rx.log 2>&1
T=$?
echo "idxpf / sraw GPU tests rc=$T" >> $L; tail -n 6 $R/t_rx.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
[ $T -eq 0 ] || { echo "tests failed: no timings" >> $L; exit 0; }
ab() {  # layout heads config name [tokens]
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${5:-512} --heads $2 --layout $1 \
    --b env:DSATTN_RX_CONFIG=$3 --name ab_s20_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab default vs $3 ($1, $2 heads) rc=$?" >> $L; tail -n 3 $R/ab_$4.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab fp8_ds_mla 16 2/48/4/0/1/1/0/0/1/0/0/128/0/1 sraw_fp8_h16
ab fp8_ds_mla_nope 16 2/48/4/0/1/1/0/0/1/0/0/128/0/1 sraw_nope_h16
ab fp8_ds_mla 8 4/56/4/0/1/2/0/0/1/1/0/0/0/1 sraw_fp8_h8
ab fp8_ds_mla_nope 8 5/56/4/0/1/2/0/0/1/1/0/0/0/1 sraw_nope_h8
ab fp8_ds_mla_nope 8 5/56/4/0/1/2/0/0/1/1/0/0/1 idxpf1_nope_h8
ab fp8_ds_mla_nope 8 5/56/4/0/1/2/0/0/1/1/0/0/2 idxpf2_nope_h8
ab fp8_ds_mla 8 4/56/4/0/1/2/0/0/1/1/0/0/2 idxpf2_fp8_h8
ab fp8_ds_mla 16 2/48/4/0/1/1/0/0/1/0/0/128/2 idxpf2_fp8_h16
ab fp8_ds_mla 16 2/48/4/0/1/1/0/0/1/0/0/128/0/1 sraw_fp8_h16_2048 2048
ab fp8_ds_mla_nope 8 5/56/4/0/1/2/0/0/1/1/0/0/2/1 both_nope_h8
