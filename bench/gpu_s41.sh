#!/usr/bin/env bash
# Session 41. Call `a`: where the few-row top-k's time goes, and whether a larger candidate capacity (one launch, the
# row selected in registers, no threshold or filter) is faster at few rows of 4K-16K columns.
# (1) Nsight Compute warp-state samples per SASS instruction of the default's three kernels at 1 x 4160 (the decode
#     layer's shape at 1 request, session 40: tau 5.6 + filter 4.0 + select 12.9 us), bench/topk_ncu_case.py.
# (2) bench/topk_v3.py --shapes at 1-128 rows x 4096-16384 columns: the default, its stage cuts, caps 8192 / 16384.
# PREDICTION: the select's samples sit in its two-bit step loops (barrier and shuffle waits: latency, not work);
# cap 8192 at 1 x 4160 and 1 x 8192 ~15 us as a graph replay against the default's ~29-31 us; from ~64 rows the default
# wins (one 241-register program an SM at cap 8192 x 8 warps).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s41.sh a
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s41.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s41.log; }
prof() {  # name kernel-regex args...
  local n=$1 k=$2; shift 2
  timeout 150 ncu --clock-control none -k regex:$k -s 1 -c 1 --section SourceCounters \
    --section WarpStateStats --section SchedulerStats --section SpeedOfLight \
    -f -o $R/$n python bench/topk_ncu_case.py "$@" > $R/ncu_$n.log 2>&1
  echo "== $n rc=$?" >> $L
  ncu --import $R/$n.ncu-rep --page source --csv --print-source sass > $R/${n}_source.csv 2> $R/${n}_source.err
  ncu --import $R/$n.ncu-rep --page details > $R/${n}_details.txt 2>&1
  python bench/ncu_stalls.py $R/${n}_source.csv --top 30 > $R/${n}_stalls.txt 2>&1
  head -n 50 $R/${n}_stalls.txt >> $L
  grep -iE "Duration|Warp Cycles Per Issued|Issued Warp|Eligible|Active Warps" $R/${n}_details.txt | head -12 >> $L
  rm -f $R/$n.ncu-rep
  pack
}
case "$1" in
a)
  command -v ncu > /dev/null && ncu --version | tail -1 >> $L
  python bench/topk_ncu_case.py --rows 1 --width 4160 && echo "case ok" >> $L   # compiles the three kernels once
  prof select _v4_select --rows 1 --width 4160
  prof tau _v4_tau --rows 1 --width 4160
  prof filter _v4_filter --rows 1 --width 4160
  t0=$(date +%s)
  timeout 330 python bench/topk_v3.py --shapes 1x4160,1x4096,1x8192,4x8192,8x8192,32x8192,128x8192,1x16384,8x16384 \
    --cases 1x4160:full,1x4096:full,1x8192:full,4x8192:full,8x8192:ragged,32x8192:ragged,128x8192:full,1x16384:full,8x16384:ragged \
    --variants v4,v4_stop1,v4_stop2,v4_cap8k,v4_cap8k_w16,v4_cap16k_w16 --rounds 3 --rep-ms 20 \
    --out $R/topk_cap_s41.json > $R/topk_cap.log 2>&1
  echo "topk_v3 rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/topk_cap.log >> $L; pack
  ;;
esac
