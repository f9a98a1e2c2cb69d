#!/usr/bin/env bash
# Session 25, device call 5 (one H200): what each side of the 8-head ping-pong decode program costs alone
# (bench/rx_timing_builds.py: gluon_rx's new timing builds, profile 1 producer alone / 2 consumers alone, WRONG
# outputs), over fp8_ds_mla and nope, 512 and 2048 tokens. Why: the nope row is 1-2% short of 1.15x over fp8_ds_mla,
# and config pair (call 2) showed the consumers' per-block synchronization is not what holds it; session 25's profile
# (bench/logs/s25_profile/) has nope's consumers spinning on `full` less than fp8_ds_mla's (3.5% vs 6.1% of samples).
# PREDICTION: nope's consumers alone within 10% of its full time (the consumers set its pace), fp8_ds_mla's further
# from it (its gathers weigh more); the producers alone about 0.8x apart (the bytes).
#   bash bench/gpu_s25_rx_timing.sh   (log $OUT/timing.log, results under $OUT/r, $OUT/r.tgz; ~2 min)
LOG=timing.log TAG=s25 source bench/gpu_lib.sh
timeout 300 python bench/rx_timing_builds.py --out $R --name rx_timing_builds_s25 > $R/timing.log 2>&1
echo "timing builds rc=$?" >> $L; cat $R/timing.log >> $L; pack
timeout 150 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfE -k "auto and (nope or 8)" \
  > $R/t_rx.log 2>&1
echo "gluon_rx default tests rc=$?: $(tail -n 1 $R/t_rx.log)" >> $L; pack
