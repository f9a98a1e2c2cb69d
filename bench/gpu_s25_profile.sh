#!/usr/bin/env bash
# Session 25, device call 3 (one H200): Nsight Compute of the 8-head decode defaults over both fp8 layouts (gluon_rx's
# ping-pong 8-head programs, 512 tokens; the last profile of the nope program was session 19's, before vst, idxpf /
# sraw and the 48-register producer), to see where the nope program's time goes that fp8_ds_mla's does not (nope moves
# 0.80x the bytes and does 0.89x the S^T work, yet takes 0.88x the time: 1.13x, target 1.15x); then the small GPU
# test files whole at this tree (backend, indexer, grouping, tp), in parallel.
#   bash bench/gpu_s25_profile.sh   (log $OUT/prof.log, results under $OUT/r, $OUT/r.tgz; ~5 min)
LOG=prof.log TAG=s25 source bench/gpu_lib.sh
command -v ncu > /dev/null || { echo "no ncu" >> $L; exit 0; }
prof() {  # name kernel-regex ncu_cases-args...
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
prof nope8 "sparse_mla_(rx|rx2|ws)_kernel" --case decode-nope-8
prof fp8_8 "sparse_mla_(rx|rx2|ws)_kernel" --case decode-fp8-8
N=4 LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_small tests/gpu/test_backend_gpu.py tests/gpu/test_indexer_gpu.py \
  tests/gpu/test_grouping_gpu.py tests/gpu/test_tp_gpu.py
cat $R/tests_small/summary.log >> $L; pack
