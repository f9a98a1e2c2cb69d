#!/usr/bin/env bash
# Session 41. Call `a`: where the few-row top-k's time goes, and whether a larger candidate capacity (one launch, the
# row selected in registers, no threshold or filter) is faster at few rows of 4K-16K columns.
# (1) Nsight Compute warp-state samples per SASS instruction of the default's three kernels at 1 x 4160 (the decode
#     layer's shape at 1 request, session 40: tau 5.6 + filter 4.0 + select 12.9 us), bench/topk_ncu_case.py.
# (2) bench/topk_v3.py --shapes at 1-128 rows x 4096-16384 columns: the default, its stage cuts, caps 8192 / 16384.
# PREDICTION: the select's samples sit in its two-bit step loops (barrier and shuffle waits: latency, not work);
# cap 8192 at 1 x 4160 and 1 x 8192 ~15 us as a graph replay against the default's ~29-31 us; from ~64 rows the default
# wins (one 241-register program an SM at cap 8192 x 8 warps).
# OUTCOME (3973a69, bench/results/topk_cap_s41.json, bench/logs/s41/a/): one launch each, the warp-state samples are too
# few to read (14 in the select, 6 in tau); ncu durations select 16.3 us, tau 7.5 (clocks unlocked). As CUDA-graph
# replays (do_bench, us; every variant bad=0): 1 x 4160 default 24.7, cap 8192 14.7 (tau alone 10.7, tau + filter 15.3);
# 1 x 8192 26.8 -> 20.2, 4 x 8192 25.2 -> 19.3, 8 x 8192 27.9 -> 18.5, 32 x 8192 28.7 -> 19.5, 128 x 8192 34.6 -> 26.5;
# 1 x 4096 (the default selects it in registers already) 11.3, cap 8192 15.2. Cap 16384 (16 warps, 248 B of spills)
# loses at 1 x 16384 (30.0 vs 27.6). So the second half of the prediction was right, the crossover was not found.
# Call `b`: the crossover in rows (256-4096 rows x 8192, k 2048) and the same question at k 512 (glm-5.3-flash's pooled
# top-k: default cap 1024, tried 2048 / 4096 / 8192 over 1040-8192 columns).
# PREDICTION: cap 8192 still wins at 256 rows (two waves of 132 one-program SMs) and loses from ~1024 rows, where the
# default's three stages run many programs an SM; at k 512 the same picture, with caps 2048 / 4096 winning where they
# cover the row.
# OUTCOME (e7542b5, topk_cap_rows_s41.json, topk_cap_k512_s41.json, bench/logs/s41/b/; graph replays, us, all bad=0):
# k 2048 cap 8192: 256 x 8192 44.1 -> 35.7, 512 x 8192 66.7 / 64.9 (even), 1024 x 8192 104.9 / 120.5, 4096 x 8192 288 /
# 440 (slower), 1 x 5000 31.5 -> 18.1, 64 x 5000 31.3 -> 21.0. k 512: cap 2048 1 x 1040 15.7 -> 9.6, 1 x 2048 16.0 ->
# 11.6, 8 x 1040 10.5 / 10.3; cap 8192 no gain (1 x 4160 19.7 / 19.9, 1 x 8192 18.9 / 19.1, 1024 x 4160 45.6 / 115.4).
# So: twice the usual capacity at <= 2 x SMs rows (select.select_capacity), not more.
# Call `c` (select_capacity the default): the indexer and backend GPU test files; the decode layer's kernels with the
# new default and with --usual-cap (two processes, one after the other); topk_v3 of the new default against the usual
# capacity at the shapes the rule changes and at its edges.
# PREDICTION: tests pass. The layer's top-k at 1-8 requests (widths 4160-4608) ~22 -> ~12 us of kernel time and its
# span ~8-10 us less; at 32 requests (up to 6.1K columns) the same; at 128 requests (up to 12.2K columns, the batch's
# width) unchanged. glm-5.3-flash (k 512 pooled, ~1040-1150 pooled columns at 1-8 requests) ~5 us less.
# OUTCOME (c622e80, bench/logs/s41/c/): GPU tests 121 passed (indexer + backend files). The layer's span, new / usual
# capacity (decode_layer_kernels_s41_new.json, _usual.json; two processes): glm-5 TP8 1 / 8 / 32 / 128 requests 39.9 /
# 48.2, 44.8 / 51.8, 79.1 / 86.8, 245.4 / 246.3 us; deepseek-v3.2 TP8 40.0 / 48.9, 47.8 / 55.9, 85.9 / 94.2; TP1 44.9 /
# 53.4, 62.9 / 71.8, 126.9 / 135.9; glm-5.3-flash 1 request 26.9 / 27.3 (1024 pooled columns: in registers before
# too), 8 requests 33.6 / 40.0, 32 requests 46.3 / 53.3. The select alone 15.4-15.9 us at cap 8192 (12-13 at 4096).
# topk_v3 (topk_default_s41.json, _k512_s41.json), graph replays: 1 x 4160 14.7 / 24.4 us, 128 x 8192 21.2 / 30.3, 264
# x 8192 36.6 / 45.7, 265 x 8192 47.4 / 47.3 (the same launch), 8 x 4160 ragged 17.5 / 15.9 (slower: its random lengths
# left every row within 4096, which the backend's widths never do: a chunk is as wide as its longest row); k 512 1 x 1040
# 9.5 / 15.5, 8 x 2048 11.6 / 17.1, 128 x 2048 12.5 / 18.4.
# Call `d`: where the select's ~15 us go, by Nsight Compute warp-state samples at the finest interval (one launch, one
# program: 1 x 4160 in registers at cap 8192; 1 x 16384 over its candidates), and tau / filter at 1 x 16384.
# PREDICTION: most samples on the step loops' barriers and shuffles and on the emit's scans (cumsum) barriers.
# OUTCOME (5e83dd0, bench/logs/s41/d/, finest sampling interval, one program): the select at 1 x 4160 (cap 8192, 14.2 us
# under ncu) has ~42% of its samples and ~48% of its executed instructions in the two-bit step loop (ISETP / SEL / IADD
# of the compares, SHFL of the reductions), the rest spread over the emit and the loads; 0.42 issued warps a cycle a
# scheduler (2 active warps, 0.64 eligible): both issue and latency. At 1 x 16384 over its candidates (19.9 us) ~34% in
# the step loop and ~45% in the emit's ordered scans (SHFL.UP, SEL). tau (7.5 us): ~68% in its step loop, ~21% in its
# sample loads. So the prediction was half right: the steps' compares cost as much as their reductions.
# Call `e`: at few rows, the split select (steps after `split` over the k-th largest's bucket of <= small keys: 1 key a
# thread, not 32) and 8 threshold warps (8 sample keys a thread, not 16), knobs of launch_topk_v4.
# PREDICTION: split 3 saves ~3 us of the select at 1 x 4160 (cap 8192) and ~2 us over candidates; tau 8 warps ~1-2 us.
# OUTCOME (8a7a850, topk_split_s41.json, bench/logs/s41/e/; graph replays, us, all bad=0): the split select slower at
# every shape (1 x 4160 14.7 -> 23.1-26.5, 8 x 8192 21.1 -> 26.2-26.7, 1 x 16384 27.6 -> 38.0-42.8, 32 x 65536 43.1 ->
# 51.5-54.5, 128 x 65536 47.4 -> 56.0-59.9): what it takes out of the steps it loses with the early stop and its bucket
# pass. 8 threshold warps no different (15.1, 21.2, 27.8, 43.2, 47.5). Neither kept; the tau_warps knob was removed.
# Call `f`: capacity 16384 over 32 select warps (16 keys a thread, 64 registers, 192 B of spills by the compile check),
# for few rows of 8193-16384 columns, against the default (three launches).
# PREDICTION: no faster: 16 warps at cap 8192 were slower than 8 (16.8 vs 15.2 us at 1 x 4096), and cap 16384 over 16
# warps lost (30.0 vs 27.6 at 1 x 16384); at best ~22 us at 1 x 16384.
# OUTCOME (0b6b652 after a first try found no machine; topk_cap16k_s41.json, bench/logs/s41/f/; graph replays, us, all
# bad=0): much slower, 1 x 12000 26.6 -> 42.0, 1 x 16384 27.1 -> 40.6, 8 x 16384 27.9 -> 42.2, 32 x 16384 31.0 -> 48.4,
# 128 x 16384 34.3 -> 49.9. Not kept: the rule stays at twice the capacity and at most 8192.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s41.sh a|b|c|d|e|f  (e needs 8a7a850's select.py)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s41.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s41.log; }
prof() {  # name kernel-regex args...
  local n=$1 k=$2; shift 2
  timeout 150 ncu --clock-control none ${NCU_EXTRA:-} -k regex:$k -s 1 -c 1 --section SourceCounters \
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
b)
  t0=$(date +%s)
  timeout 250 python bench/topk_v3.py --shapes 256x8192,512x8192,1024x8192,4096x8192,1x5000,64x5000 \
    --cases 256x8192:full,512x8192:full,1024x8192:full,4096x8192:full,1x5000:full,64x5000:ragged \
    --variants v4,v4_cap8k --rounds 3 --rep-ms 20 --out $R/topk_cap_rows_s41.json > $R/topk_rows.log 2>&1
  echo "topk_v3 k 2048 rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/topk_rows.log >> $L; pack
  t0=$(date +%s)
  timeout 300 python bench/topk_v3.py --k 512 --shapes 1x1040,8x1040,1x2048,1x4160,8x4160,128x4160,1024x4160,1x8192,128x8192 \
    --cases 1x1040:full,8x1040:ragged,1x2048:full,1x4160:full,8x4160:ragged,128x4160:full,1024x4160:full,1x8192:full,128x8192:full \
    --variants v4,v4_cap2k,v4_cap4k,v4_cap8k --rounds 3 --rep-ms 20 --out $R/topk_cap_k512_s41.json > $R/topk_k512.log 2>&1
  echo "topk_v3 k 512 rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/topk_k512.log >> $L; pack
  ;;
c)
  N=8 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests_c tests/gpu/test_indexer_gpu.py tests/gpu/test_backend_gpu.py
  cat $R/tests_c/summary.log >> $L; pack
  for v in new usual; do
    t0=$(date +%s)
    timeout 200 python bench/decode_layer_kernels.py --batches 1,8,32,128 --out $R --name decode_layer_kernels_s41_$v \
      $([ $v = usual ] && echo --usual-cap) > $R/layer_$v.log 2>&1
    echo "decode layer kernels ($v) rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/layer_$v.log >> $L; pack
  done
  timeout 150 python bench/topk_v3.py --shapes 1x4160,8x4160,128x8192,264x8192,265x8192 \
    --cases 1x4160:full,8x4160:ragged,128x8192:full,264x8192:full,265x8192:full \
    --variants v4,v4_cap4k --rounds 3 --rep-ms 20 --out $R/topk_default_s41.json > $R/topk_default.log 2>&1
  echo "topk_v3 k 2048 rc=$?" >> $L; grep -v -i warn $R/topk_default.log >> $L; pack
  timeout 120 python bench/topk_v3.py --k 512 --shapes 1x1040,8x2048,128x2048 --cases 1x1040:full,8x2048:full,128x2048:full \
    --variants v4,v4_cap1k --rounds 3 --rep-ms 20 --out $R/topk_default_k512_s41.json > $R/topk_default_k512.log 2>&1
  echo "topk_v3 k 512 rc=$?" >> $L; grep -v -i warn $R/topk_default_k512.log >> $L; pack
  ;;
d)
  python bench/topk_ncu_case.py --rows 1 --width 16384 && python bench/topk_ncu_case.py --rows 1 --width 4160 && echo ok >> $L
  export NCU_EXTRA="--warp-sampling-interval 0"
  prof sel_w4160 _v4_select --rows 1 --width 4160
  prof sel_w16384 _v4_select --rows 1 --width 16384
  prof tau_w16384 _v4_tau --rows 1 --width 16384
  prof filt_w16384 _v4_filter --rows 1 --width 16384
  ;;
e)
  t0=$(date +%s)
  timeout 330 python bench/topk_v3.py --shapes 1x4160,8x8192,1x16384,8x16384,32x65536,128x65536 \
    --cases 1x4160:full,8x8192:full,1x16384:full,8x16384:ragged,32x65536:full,128x65536:full \
    --variants v4,v4_split2,v4_split3,v4_split4,v4_split3_s1k,v4_tauw8 --rounds 3 --rep-ms 20 \
    --out $R/topk_split_s41.json > $R/topk_split.log 2>&1
  echo "topk_v3 rc=$? $(( $(date +%s) - t0 )) s" >> $L; grep -v -i warn $R/topk_split.log >> $L; pack
  ;;
f)
  timeout 200 python bench/topk_v3.py --shapes 1x12000,1x16384,8x16384,32x16384,128x16384 \
    --cases 1x12000:full,1x16384:full,8x16384:ragged,32x16384:full,128x16384:full \
    --variants v4,v4_cap16k_w32 --rounds 3 --rep-ms 20 --out $R/topk_cap16k_s41.json > $R/topk_16k.log 2>&1
  echo "topk_v3 rc=$?" >> $L; grep -v -i warn $R/topk_16k.log >> $L; pack
  ;;
esac
