# Shared by the device scripts from session 25 on (bench/gpu_s25_*.sh): the environment, the log header, an A/B
# helper and a Nsight Compute helper. Set LOG (the log's name under $OUT) and TAG (the result files' prefix, e.g.
# s25) before sourcing.
# (Session 24's scripts keep their own copy, bench/gpu_s24_lib.sh, as the record of what ran.)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG DSATTN_G64_CONFIG \
  DSATTN_PF_CONFIG DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB
R=$OUT/r; mkdir -p $R; L=$OUT/$LOG; PFX=$TAG  # (a prefix assignment to `source` lasts only while it runs)
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r; }
# VAR layout heads configB name [tokens]: `dsattn bench ab` of sparse_mla_decode, the default against VAR=configB
ab() {
  timeout 90 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${6:-512} --heads $3 --layout $2 \
    --b env:$1=$4 --name ab_${PFX}_$5 --out $R > $R/ab_$5.log 2>&1
  echo "ab default vs $1=$4 ($2, $3 heads, ${6:-512} tokens) rc=$?" >> $L; tail -n 3 $R/ab_$5.log | head -n 2 >> $L
  pack
}
prof() {  # name kernel-regex ncu_cases-args...: one launch under Nsight Compute (bench/ncu_cases.py), clocks unlocked;
  # the source counters summed per instruction, partition and opcode (bench/ncu_stalls.py) and the details page's
  # headline numbers into the log; the report itself is not kept (large)
  local n=$1 k=$2; shift 2
  timeout 150 ncu --clock-control none -k regex:$k -s 1 -c 1 --section SourceCounters \
    --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section SpeedOfLight \
    --section MemoryWorkloadAnalysis -f -o $R/$n python bench/ncu_cases.py "$@" > $R/ncu_$n.log 2>&1
  echo "== $n rc=$?" >> $L
  ncu --import $R/$n.ncu-rep --page source --csv --print-source sass > $R/${n}_source.csv 2> $R/${n}_source.err
  ncu --import $R/$n.ncu-rep --page details > $R/${n}_details.txt 2>&1
  python bench/ncu_stalls.py $R/${n}_source.csv --top 40 > $R/${n}_stalls.txt 2>&1
  head -n 60 $R/${n}_stalls.txt >> $L
  grep -iE "Duration|Warp Cycles|Issued|Eligible|Throughput|Hit Rate" $R/${n}_details.txt | head -30 >> $L
  rm -f $R/$n.ncu-rep $R/${n}_source.csv
  pack
}
