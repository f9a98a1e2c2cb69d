#!/usr/bin/env bash
# Written in session 19 after its device time ran out, NOT YET RUN (~4 min, carry .peer): gluon_rx config idxpf (RxConfig's
# 13th field): the producer asks L1 (prefetch.global.L1) for the index lines of the block idxpf past the next, so the
# next block's index loads, issued one block ahead of their use, hit L1 instead of L2.
# WHY (session 19's ncu profile of the 8-head nope decode, bench/logs/s19_profile.log): the producer's top samples are
# the address arithmetic right after those index loads (IMAD.WIDE by the 528-byte stride 5.9% of all samples, NOP
# 5.1%), not its free-barrier wait (1.5%); at 16 heads (two CTAs) the producer instead waits on `free` (19.5%).
# PREDICTION: nope 8 heads 512 tokens 0-5% faster (the consumers seldom wait on `full`, so the producer may not set
# the pace); fp8_ds_mla 8 heads 0-3%; 16 heads no difference (the producer is ahead there). Outputs bit-equal.
# Compile check (bench/mla_gluon_check.py --kernel rx): no spill at 8 heads (both layouts, idxpf 1 / 2), 16-head
# two-CTA 4 B (fp8_ds_mla) / 0 (nope); the default kernels' sm_90a PTX unchanged outside debug line numbers.
#   bash bench/gpu_s20_idxpf.sh   (log $OUT/ix.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/ix.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfEs \
  -k "auto and (idxpf or rx_hang_guard)" > $R/t_idxpf.log 2>&1
T=$?
echo "idxpf GPU tests rc=$T" >> $L; tail -n 6 $R/t_idxpf.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
[ $T -eq 0 ] || { echo "tests failed: no timings" >> $L; exit 0; }
ab() {  # layout heads config name
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens 512 --heads $2 --layout $1 \
    --b env:DSATTN_RX_CONFIG=$3 --name ab_s20_idxpf_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab default vs $3 ($1, $2 heads) rc=$?" >> $L; tail -n 3 $R/ab_$4.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab fp8_ds_mla_nope 8 5/56/4/0/1/2/0/0/1/1/0/0/1 nope_h8_1
ab fp8_ds_mla_nope 8 5/56/4/0/1/2/0/0/1/1/0/0/2 nope_h8_2
ab fp8_ds_mla 8 4/56/4/0/1/2/0/0/1/1/0/0/2 fp8_h8_2
ab fp8_ds_mla 16 2/48/4/0/1/1/0/0/1/0/0/128/2 fp8_h16_2
