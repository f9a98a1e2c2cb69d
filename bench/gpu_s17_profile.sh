#!/usr/bin/env bash
# Written in session 16 for a later device session (NOT YET RUN): where gluon_prefill's warpgroup 0 waits. Two prefill
# schedules predicted faster by arithmetic lost on the H200 (session 13's paired consumer, session 16's tail, twice),
# so before another schedule is built this asks Nsight Compute for warp-state samples per SASS instruction (source
# counters) of the default kernel at 64 heads (G 1) and 16 heads (G 4), s_q 1024, one launch each after a warm-up,
# clocks unlocked as in session 12; then bench/ncu_stalls.py sums them per instruction, partition and opcode.
#   bash bench/gpu_s17_profile.sh      (log $OUT/pr.log, results under $OUT/r, $OUT/r.tgz; ~1-2 minutes)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/pr.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
command -v ncu > /dev/null || { echo "no ncu" >> $L; exit 0; }
ncu --version >> $L
for c in 64 16; do
  timeout 200 ncu --clock-control none -k regex:sparse_mla_prefill_kernel -s 1 -c 1 --section SourceCounters \
    --section WarpStateStats --section SchedulerStats -f -o $R/pf$c python bench/ncu_cases.py --case prefill-$c \
    > $R/ncu_pf$c.log 2>&1
  echo "ncu prefill-$c rc=$?" >> $L
  ncu --import $R/pf$c.ncu-rep --page source --csv --print-source sass > $R/pf${c}_source.csv 2> $R/pf${c}_source.err
  echo "source page rc=$? ($(wc -l < $R/pf${c}_source.csv) lines)" >> $L
  ncu --import $R/pf$c.ncu-rep --page details > $R/pf${c}_details.txt 2>&1
  python bench/ncu_stalls.py $R/pf${c}_source.csv --top 40 > $R/pf${c}_stalls.txt 2>&1
  head -n 60 $R/pf${c}_stalls.txt >> $L
  rm -f $R/pf$c.ncu-rep  # large; the CSV and the summaries come back
  tar -czf $OUT/r.tgz -C $OUT r
done
