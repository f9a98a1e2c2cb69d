#!/usr/bin/env bash
# Session 63: issue 3's prefill rows beside FlashMLA on an H200 only (README's H200 rows are session 60's, before
# cvt_asm became the default); on any other card it records the card's name and stops. Carry [".peer"].
# PREDICTION: 1.00-1.05x session 60's ratios at every head count (cvt_asm 1.017-1.044x on the H100); 32 heads ~0.95x /
# ~0.98x FlashMLA's best.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s63_h200.sh      ($OUT/s63h.log, $OUT/r.tgz)
set -u
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU tree ${DSATTN_GIT_COMMIT:-?}" > $OUT/s63h.log
case "$GPU" in *H200*) ;; *) echo "not an H200: nothing run" >> $OUT/s63h.log; cat $OUT/s63h.log; exit 0 ;; esac
PARTS=prefill TABLE_TAG=s63_h200 bash bench/gpu_s16_table.sh
cat $OUT/tb.log >> $OUT/s63h.log; cat $OUT/s63h.log
