#!/usr/bin/env bash
# Session 19, last device call (the session's remaining ~4 minutes): Nsight Compute of the two decode kernels whose
# rows miss issue 3 by the least: the new 16-head default (gluon_rx one consumer, two CTAs an SM) and the 8-head
# nope ping-pong kernel (nope vs fp8_ds_mla 1.07-1.09x against 1.15x), 512 tokens, as bench/gpu_s17_profile.sh.
#   bash bench/gpu_s19_profile.sh      (log $OUT/pr.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/pr.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
command -v ncu > /dev/null || { echo "no ncu" >> $L; exit 0; }
prof() {  # name kernel-regex ncu_cases-args...
  local n=$1 k=$2; shift 2
  timeout 80 ncu --clock-control none -k regex:$k -s 1 -c 1 --section SourceCounters \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section SpeedOfLight \
    --section MemoryWorkloadAnalysis -f -o $R/$n python bench/ncu_cases.py "$@" > $R/ncu_$n.log 2>&1
  echo "== $n rc=$?" >> $L
  ncu --import $R/$n.ncu-rep --page source --csv --print-source sass > $R/${n}_source.csv 2> $R/${n}_source.err
  ncu --import $R/$n.ncu-rep --page details > $R/${n}_details.txt 2>&1
  python bench/ncu_stalls.py $R/${n}_source.csv --top 30 > $R/${n}_stalls.txt 2>&1
  head -n 50 $R/${n}_stalls.txt >> $L
  grep -iE "Duration|Stall|Warp Cycles|Issued|Eligible|Active Warps|Throughput|Occupancy|Block Limit|Hit Rate" \
    $R/${n}_details.txt | head -45 >> $L
  rm -f $R/$n.ncu-rep $R/${n}_source.csv
  tar -czf $OUT/r.tgz -C $OUT r
}
prof dc16 "sparse_mla_(rx|rx2)_kernel" --case decode-fp8-16
prof nope8 "sparse_mla_(rx|rx2)_kernel" --case decode-nope-8
