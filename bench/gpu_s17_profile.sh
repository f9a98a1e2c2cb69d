#!/usr/bin/env bash
# Session 17, device call 1 (prepared in session 16, widened in 17): where the kernels' warps wait. Two prefill
# schedules predicted faster by arithmetic lost on the H200 (session 13's paired consumer, session 16's tail, twice),
# so before another schedule is built this asks Nsight Compute for warp-state samples per SASS instruction (source
# counters) of gluon_prefill's default at 64 heads (G 1) and 16 heads (G 4), s_q 1024, FlashMLA's sparse prefill at
# 64 heads beside it (same sections, its SASS has no source), and the decode kernels of the open decode rows
# (fp8_ds_mla 512 tokens, 16 heads gluon_rx, 32 heads gluon_ws); one launch each after a warm-up, clocks unlocked as
# in session 12; bench/ncu_stalls.py sums the samples per instruction, partition and opcode.
#   bash bench/gpu_s17_profile.sh      (log $OUT/pr.log, results under $OUT/r, $OUT/r.tgz; ~2-4 minutes)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/pr.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
command -v ncu > /dev/null || { echo "no ncu" >> $L; exit 0; }
ncu --version >> $L
prof() {  # name kernel-regex ncu_cases-args...
  local n=$1 k=$2; shift 2
  timeout 200 ncu --clock-control none -k regex:$k -s 1 -c 1 --section SourceCounters \
    --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section SpeedOfLight \
    -f -o $R/$n python bench/ncu_cases.py "$@" > $R/ncu_$n.log 2>&1
  echo "== $n rc=$?" >> $L
  ncu --import $R/$n.ncu-rep --page source --csv --print-source sass > $R/${n}_source.csv 2> $R/${n}_source.err
  echo "source page rc=$? ($(wc -l < $R/${n}_source.csv) lines)" >> $L
  ncu --import $R/$n.ncu-rep --page details > $R/${n}_details.txt 2>&1
  python bench/ncu_stalls.py $R/${n}_source.csv --top 40 > $R/${n}_stalls.txt 2>&1
  head -n 75 $R/${n}_stalls.txt >> $L
  grep -iE "Duration|Stall|Warp Cycles|Issued|Eligible|Active Warps|Throughput" $R/${n}_details.txt | head -40 >> $L
  rm -f $R/$n.ncu-rep  # large; the CSV and the summaries come back
  tar -czf $OUT/r.tgz -C $OUT r
}
prof pf64 sparse_mla_prefill_kernel --case prefill-64
prof fm64 sparse_attn_fwd_kernel --case prefill-64 --peer  # (the packed build names it so: session 18)
prof pf16 sparse_mla_prefill_kernel --case prefill-16
prof dc16 "sparse_mla_(rx|rx2|ws)_kernel" --case decode-fp8-16
prof dc32 "sparse_mla_(rx|rx2|ws)_kernel" --case decode-fp8-32
