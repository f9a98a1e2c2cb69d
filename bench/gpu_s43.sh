#!/usr/bin/env bash
# Session 43: the top-k at few long rows (a latency-bound decode step over long contexts). Session 40's profile gave
# 1 x 65536 ~38 us as a CUDA-graph replay (topk_small_s40.json, uncapped select): three launches (threshold, 16
# filter programs, select) whose select sorts the atomics' slot order with 8 packed-count scans (16 filter programs).
# New: _v4_fused (ops/topk/select.py), one launch: every tile's program (4096 columns, 8 warps) finds the row's
# threshold from the sample itself while its tile loads, reserves its slots with one atomic and records (base, number)
# in a table; the last to arrive (acq_rel count) loads the candidates in column order through the table (one scan
# left) and selects. The count and the arrival count are zeroed by a fill just before (a second graph node).
# Call `a`: the top-k GPU tests (new: v4_3l / v4_fused impls, test_topk_few_long_rows with graph replays); then
# bench/topk_v3.py at few-row shapes (k 2048 and k 512), three launches against the one-launch path by tile size,
# graph replays; then a decode layer over 64K-token contexts (glm-5 TP8, glm-5.3-flash TP8) with and without it.
# PREDICTION: tests pass. Graph replays: 1 x 65536 ~38 -> ~15-18 us, 1 x 16384 ~32 -> ~14, 16 x 65536 ~45 -> ~20;
# past ~2 programs an SM (64 x 65536) the three launches win. Layer spans at 1-16 requests ~20 us less.
# OUTCOME (8ada681, bench/logs/s43/a/; a first try found no machine): top-k GPU tests 118 passed. Graph replays, us,
# three launches -> one launch (4096-column tiles; topk_few_s43.json): 1 x 16384 25.2 -> 21.8, 1 x 65536 37.9 -> 22.7,
# 1 x 131072 52.7 -> 22.1, 1 x 262144 83.6 -> 23.6, 4 x 65536 40.1 -> 24.6, 16 x 65536 41.6 -> 32.6 (8192-column tiles
# 27.0), 8 x 131072 56.5 -> 32.8 (28.1), 32 x 65536 43.2 -> 51.0 (39.8), 64 x 65536 48.1 -> 81.6 (58.3); 1024- and
# 2048-column tiles no better at 1 row, slower from 16. k 512 (topk_few_k512_s43.json): 1 x 16384 18.5 -> 14.4,
# 8 x 16384 21.6 -> 17.2, 32 x 16384 23.1 -> 19.2. Layer spans over 64K contexts (decode_layer_64k_s43.json, _3l):
# glm-5 TP8 1 / 4 requests 52.4 -> 38.1, 72.7 -> 57.8 (16-32 requests took three launches: 17 tiles a row);
# glm-5.3-flash 38.4 -> 34.8, 72.4 -> 67.8, 96.6 -> 91.7. So the prediction held at 1-4 rows (a little slower than
# predicted: ~22 us), and tiles twice as long win from 16 rows. Also seen: glm-5.3-flash at 32 requests (three
# launches both times) spends 54.7 us in _v4_select (8.1 at 16).
# Call `b`: the default rule fused_tile_default (4096-column tiles while every tile has an SM, then 8192 while two an
# SM fit; k 512 the same tiles while two an SM fit); the top-k GPU tests; the default against three launches at the
# rule's edges and at a 4K-context layer's 128 x 12224 / 128 x 8960; k 512; the glm-5.3-flash layer's top-k rows at
# 16 / 32 requests (bench/topk_layer_rows.py: which rows leave [k, cap]); the 64K layers and the 4K glm-5 layer.
# PREDICTION: tests pass; 16 x 65536 ~27, 32 x 65536 ~40, 48 x 65536 three launches (~46); 128 x 12224 unknown (the
# rule takes 8192-column tiles there, 256 programs); glm-5.3-flash at 32 requests: rows outside [k, cap] (the select's
# retries) explain the 54.7 us.
# OUTCOME (775066a, bench/logs/s43/b/): tests 118 passed. Graph replays, us, default -> three launches / 8192-column
# tiles (topk_rule_s43.json): 16 x 65536 26.0 / 41.9, 24 x 65536 three launches 42.9 (8192-column tiles 33.4), 48 x
# 65536 46.5 / 50.7, 64 x 12224 26.8 / 30.0, but 128 x 12224 44.7 against three launches' 32.3 and 128 x 8960 45.3 /
# 32.4: the rule's two-an-SM step loses over narrow rows (the 4K glm-5 layer at 128 requests: span 179.0 us, 162.9 in
# s42). glm-5.3-flash's rows (topk_layer_rows_s43.json): at 32 requests row 10 had 1143 candidates (> cap 1024) and
# took the retries (70.9 us for the call, 18-23 at 16 requests); counts spread sd 90-126 around 768, as the sample
# of 1024 (sample = min(2048, cap)) gives by its order statistics (sd ~107: ~1.6% of rows outside [k, cap]).
# Prediction: tests right; the retry explanation right; the 128 x 12224 loss not foreseen.
# Call `c`: the rule's two-an-SM step for 8192-column tiles only over rows of >= 32768 columns; v4's sample 2048
# whatever the cap (positions clamped to the row); the tests; the rule's edges (3 rounds); the layer rows and the
# sample's misses on 4096 iid rows at sample 1024 / 2048 / 4096; the 4K and 64K layers.
# PREDICTION: tests pass; 128 x 12224 back to three launches (~32 us; the 4K layer at 128 ~163 us); iid misses at k
# 512 x 16880 ~1.6% (sample 1024), ~0.1% (2048), ~0 (4096); glm-5.3-flash at 32 requests no retry row (~20 us).
# OUTCOME (d81e56b, bench/logs/s43/c/): tests 118 passed. Graph replays, us, default / three launches
# (topk_rule_c_s43.json, 3 rounds): 1 x 65536 22.7 / 37.7, 16 x 65536 26.1 / 41.1, 24 x 65536 33.5 / 42.3, 32 x 65536
# 39.3 / 42.5, 40 x 65536 46.1 / 46.3 (three launches both), 64 x 12224 27.1 / 30.1, 128 x 12224 33.9 / 33.9 (three
# launches both); k 512 (topk_rule_c_k512_s43.json) 1 x 16880 15.8 / 19.8, 16 x 16880 19.9 / 25.0, 32 x 16880 and
# 64 x 16880 three launches both (25.0 / 25.1). Sample misses on 4096 iid rows (topk_layer_rows_c_s43.json): k 512 x
# 16880 1.27% / 0.12% / 0% at sample 1024 / 2048 / 4096; k 2048 x 65536 1.59% / 0.10% / 0%. glm-5.3-flash's layer
# rows at 32 requests: counts 630-894, none outside [k, cap]; that call 24.5 us (70.9 in call b). Layer spans: glm-5
# TP8 4K contexts 31.4 / 37.7 / 59.3 / 163.3 at 1 / 8 / 32 / 128 requests (decode_layer_kernels_s43.json; s42 31.7 /
# 37.5 / 58.8 / 162.9); 64K contexts (decode_layer_64k_s43c.json against call a's _3l) glm-5 38.0 / 58.2 / 119.4 /
# 203.1 at 1 / 4 / 16 / 32 (three launches 52.4 / 72.7 / 129.9 / 203.4), glm-5.3-flash 36.1 / 69.8 / 91.9 / 155.7
# (38.4 / 72.4 / 96.6 / 202.7: at 32 requests the select 55.6 -> 7.1 us, no retry). The prediction held.
# Call `d` (the docs' tree): the indexer and backend GPU test files whole (the backend's workspace holds the larger
# top-k scratch rows; its decode chunks take the one-launch path at few long rows).
# PREDICTION: all pass (s42: 154 passed; now 118 indexer top-k tests plus the rest).
# OUTCOME (bf6cfc6, bench/logs/s43/d/): 180 passed (8 shards, 71-119 s each). The prediction held.
# Call `e`: where the one-launch path's time goes (_v4_fused's STOP cuts at 1 x 65536: after the threshold, after the
# arrival) and what a sample of 4096 costs (v4_s4k; it left no iid row outside [k, cap] in call c) at 1 / 16 / 128 /
# 1024 rows of 65536 and k 512 1 / 32 rows of 16880; and v4_fused_gather (the last program loads the slot table with
# the count and searches it in registers by tl.gather: no table rewrite, two barriers and six dependent loads fewer),
# with its GPU tests.
# PREDICTION: at 1 x 65536 (22.7 us) the threshold cut ~9-10 us (launch, loads, ~10 two-bit steps), the arrival cut
# ~12-13, so the last program's select ~9-10; sample 4096 +1-2 us at few rows, +5-10% at 1024 rows; gather ~1 us
# less; its tests pass.
# OUTCOME (f036fac, bench/logs/s43/e/; a first try found no machine): gather tests 9 passed. Graph replays, us
# (topk_stages_s43.json, 3 rounds), full / ragged rows: 1 x 65536 default 23.0 / 22.5, threshold cut 12.6 / 12.1,
# arrival cut 14.1 / 13.4 (so the last program's select ~9 us, the filter, atomics and arrival ~1.5, the rest the
# launch, loads and threshold); gather 22.8 / 21.5 at one row (at 16 rows it ran 4096-column tiles against the
# default's 8192: not comparable), so not kept (removed; code at f036fac). Sample 4096: 1 x 65536 24.5 / 23.9 (+1.5),
# 16 x 65536 28.5 / 27.7 (+2.3 / +2.5), 128 x 65536 48.9 / 45.2 (+0.7 / +1.0), 1024 x 65536 186.5 / 167.4 (225.0 /
# 150.5); k 512 (topk_s4k_k512_s43.json) 1 x 16880 18.7 / 20.8 (15.3 / 18.8), 32 x 16880 25.5 / 25.3 (25.0 / 25.0).
# The prediction: the select's ~9 us as predicted, the threshold part larger (it holds the graph's launch); sample
# 4096 as predicted at few rows; gather smaller than predicted.
# Call `f`: what one row the sample misjudges costs a call (bench/topk_layer_rows.py --only-iid: such rows found among
# 4096 iid rows of 65536, k 2048, timed in a batch of 1 and 128 rows beside rows it judges right), sample 2048 and 4096.
# PREDICTION: a retried row costs ~50-150 us (one program re-reading 65536 columns, once or twice); then a sample of
# 4096 pays on average from ~16-32 rows (0.1% a row, +0.7-2.5 us a call).
# OUTCOME (04dca1b, bench/logs/s43/f/, topk_retry_s43.json): 6 of 4096 rows misjudged by the sample of 2048 (0.07%
# of 65536-column rows at k 2048 outside [k, cap] in the count; 0 at 4096). A call with one such row: 1 row 61.9 us
# against 21.9, 128 rows 99.9 against 48.6 (+40 / +51 us); with a sample of 4096 the same batches 24.6 / 50.0 (no
# retry) against 26.9 / 49.9 without the row. So the prediction's cost held (40-51 us); at +0.7-1.3 us a call for
# 4096 keys at 128 rows the larger sample pays from ~64 rows (0.07-0.1% x rows x ~50 us).
# Call `g`: sample_size (4096 keys for 64 to 2 x SMs rows): the top-k GPU tests of the default and the three launches
# (64 rows: sample 4096); the default against sample 2048 at 64 / 128 / 256 rows of 65536.
# PREDICTION: tests pass; the default +0.5-1.5 us at each shape on these (retry-free in the bench's medians) rows.
# OUTCOME (7fb86c5, bench/logs/s43/g/, topk_sample_s43.json): tests 16 passed. Graph replays, us, full / ragged rows,
# default (4096) against 2048: 64 x 65536 47.3 / 51.0 vs 46.5 / 49.9, 128 x 65536 49.3 / 45.1 vs 49.1 / 44.0, 256 x
# 65536 73.9 / 68.1 vs 70.5 / 64.8. Prediction held at 64 and 128 rows; at 256 rows +3.3 us (expected retries there
# ~0.2-0.26 a call, ~9-13 us).
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s43.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s43.log; }
V=v4,v4_3l,v4_fused,v4_fused_t1k,v4_fused_t2k,v4_fused_t8k
S=1x16384,1x65536,1x131072,4x65536,16x65536,32x65536,64x65536,8x131072,1x262144
S5=1x4096,1x16384,8x16384,32x16384,1x32768
SB=1x65536,8x65536,16x65536,24x65536,32x65536,48x65536,8x131072,32x12224,64x12224,128x12224,128x8960
SB5=16x16384,32x16384,48x16384,64x16384
SC=1x65536,16x65536,24x65536,32x65536,40x65536,64x12224,128x12224
SC5=1x16880,16x16880,32x16880,64x16880
VE=v4,v4_s4k,v4_fused_gather,v4_fused_stop1,v4_fused_stop2
SE=1x65536,16x65536,128x65536,1024x65536
SE5=1x16880,32x16880
SG=64x65536,128x65536,256x65536
case "$1" in
a)
  for i in 0 1 2 3 4 5; do timeout 150 python bench/topk_v3.py --warm $i/6 --variants $V --shapes $S > $R/warm$i.log 2>&1 & done
  for i in 0 1; do timeout 150 python bench/topk_v3.py --warm $i/2 --variants v4_3l,v4_fused --shapes $S5 --k 512 \
    > $R/warm5_$i.log 2>&1 & done
  N=8 K=topk LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_a tests/gpu/test_indexer_gpu.py
  wait
  cat $R/tests_a/summary.log >> $L; pack
  timeout 150 python bench/topk_v3.py --variants $V --shapes $S --rounds 1 --rep-ms 15 --out $R/topk_few_s43.json \
    > $R/bench_a.log 2>&1
  echo "bench rc=$?" >> $L; grep -v -i warn $R/bench_a.log >> $L; pack
  timeout 60 python bench/topk_v3.py --variants v4_3l,v4_fused --shapes $S5 --k 512 --rounds 1 --rep-ms 15 \
    --out $R/topk_few_k512_s43.json > $R/bench5_a.log 2>&1
  echo "bench k512 rc=$?" >> $L; grep -v -i warn $R/bench5_a.log >> $L; pack
  for m in "" "--topk-3l"; do
    timeout 120 python bench/decode_layer_kernels.py --configs glm-5:8:fp8_ds_mla,glm-5.3-flash:8:fp8_ds_mla_nope \
      --batches 1,4,16,32 --context 65536 $m --out $R --name decode_layer_64k_s43${m:+_3l} > $R/layer_a$m.log 2>&1
    echo "layer $m rc=$?" >> $L; grep -v -i warn $R/layer_a$m.log >> $L; pack
  done
  ;;
b)
  for i in 0 1 2 3; do timeout 150 python bench/topk_v3.py --warm $i/4 --variants v4,v4_3l,v4_fused_t8k --shapes $SB \
    > $R/warmb$i.log 2>&1 & done
  for i in 0 1; do timeout 150 python bench/topk_v3.py --warm $i/2 --variants v4,v4_3l --shapes $SB5 --k 512 \
    > $R/warmb5_$i.log 2>&1 & done
  N=8 K=topk LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_b tests/gpu/test_indexer_gpu.py
  wait
  cat $R/tests_b/summary.log >> $L; pack
  timeout 150 python bench/topk_v3.py --variants v4,v4_3l,v4_fused_t8k --shapes $SB --rounds 1 --rep-ms 15 \
    --out $R/topk_rule_s43.json > $R/bench_b.log 2>&1
  echo "bench rc=$?" >> $L; grep -v -i warn $R/bench_b.log >> $L; pack
  timeout 60 python bench/topk_v3.py --variants v4,v4_3l --shapes $SB5 --k 512 --rounds 1 --rep-ms 15 \
    --out $R/topk_rule_k512_s43.json > $R/bench5_b.log 2>&1
  echo "bench k512 rc=$?" >> $L; grep -v -i warn $R/bench5_b.log >> $L; pack
  timeout 90 python bench/topk_layer_rows.py --batches 16,32 --out $R/topk_layer_rows_s43.json > $R/rows_b.log 2>&1
  echo "layer rows rc=$?" >> $L; grep -v -i warn $R/rows_b.log >> $L; pack
  timeout 100 python bench/decode_layer_kernels.py --configs glm-5:8:fp8_ds_mla,glm-5.3-flash:8:fp8_ds_mla_nope \
    --batches 1,4,16,32 --context 65536 --out $R --name decode_layer_64k_s43b > $R/layer_b.log 2>&1
  echo "layer 64k rc=$?" >> $L; grep -v -i warn $R/layer_b.log >> $L; pack
  timeout 100 python bench/decode_layer_kernels.py --configs glm-5:8:fp8_ds_mla --batches 1,8,32,128 --out $R \
    --name decode_layer_kernels_s43 > $R/layer4k_b.log 2>&1
  echo "layer 4k rc=$?" >> $L; grep -v -i warn $R/layer4k_b.log >> $L; pack
  ;;
c)
  for i in 0 1 2 3; do timeout 150 python bench/topk_v3.py --warm $i/4 --variants v4,v4_3l --shapes $SC > $R/warmc$i.log 2>&1 & done
  for i in 0 1; do timeout 150 python bench/topk_v3.py --warm $i/2 --variants v4,v4_3l --shapes $SC5 --k 512 \
    > $R/warmc5_$i.log 2>&1 & done
  N=8 K=topk LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_c tests/gpu/test_indexer_gpu.py
  wait
  cat $R/tests_c/summary.log >> $L; pack
  timeout 120 python bench/topk_v3.py --variants v4,v4_3l --shapes $SC --rounds 3 --rep-ms 15 \
    --out $R/topk_rule_c_s43.json > $R/bench_c.log 2>&1
  echo "bench rc=$?" >> $L; grep -v -i warn $R/bench_c.log >> $L; pack
  timeout 60 python bench/topk_v3.py --variants v4,v4_3l --shapes $SC5 --k 512 --rounds 3 --rep-ms 15 \
    --out $R/topk_rule_c_k512_s43.json > $R/bench5_c.log 2>&1
  echo "bench k512 rc=$?" >> $L; grep -v -i warn $R/bench5_c.log >> $L; pack
  timeout 120 python bench/topk_layer_rows.py --batches 16,32 --out $R/topk_layer_rows_c_s43.json > $R/rows_c.log 2>&1
  echo "layer rows rc=$?" >> $L; grep -v -i warn $R/rows_c.log >> $L; pack
  timeout 100 python bench/decode_layer_kernels.py --configs glm-5:8:fp8_ds_mla --batches 1,8,32,128 --out $R \
    --name decode_layer_kernels_s43 > $R/layer4k_c.log 2>&1
  echo "layer 4k rc=$?" >> $L; grep -v -i warn $R/layer4k_c.log >> $L; pack
  timeout 100 python bench/decode_layer_kernels.py --configs glm-5:8:fp8_ds_mla,glm-5.3-flash:8:fp8_ds_mla_nope \
    --batches 1,4,16,32 --context 65536 --out $R --name decode_layer_64k_s43c > $R/layer_c.log 2>&1
  echo "layer 64k rc=$?" >> $L; grep -v -i warn $R/layer_c.log >> $L; pack
  ;;
e)
  for i in 0 1 2 3; do timeout 150 python bench/topk_v3.py --warm $i/4 --variants $VE --shapes $SE > $R/warme$i.log 2>&1 & done
  for i in 0 1; do timeout 150 python bench/topk_v3.py --warm $i/2 --variants v4,v4_s4k --shapes $SE5 --k 512 \
    > $R/warme5_$i.log 2>&1 & done
  timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu/test_indexer_gpu.py -k "topk and gather" \
    > $R/tests_e.log 2>&1
  echo "tests rc=$? $(tail -n 1 $R/tests_e.log)" >> $L
  wait
  timeout 150 python bench/topk_v3.py --variants $VE --shapes $SE --rounds 3 --rep-ms 15 --out $R/topk_stages_s43.json \
    > $R/bench_e.log 2>&1
  echo "bench rc=$?" >> $L; grep -v -i warn $R/bench_e.log >> $L; pack
  timeout 60 python bench/topk_v3.py --variants v4,v4_s4k --shapes $SE5 --k 512 --rounds 3 --rep-ms 15 \
    --out $R/topk_s4k_k512_s43.json > $R/bench5_e.log 2>&1
  echo "bench k512 rc=$?" >> $L; grep -v -i warn $R/bench5_e.log >> $L; pack
  ;;
f)
  timeout 200 python bench/topk_layer_rows.py --only-iid --out $R/topk_retry_s43.json > $R/rows_f.log 2>&1
  echo "retry rc=$?" >> $L; grep -v -i warn $R/rows_f.log >> $L; pack
  ;;
g)
  for i in 0 1 2 3; do timeout 100 python bench/topk_v3.py --warm $i/4 --variants v4,v4_s2k --shapes $SG > $R/warmg$i.log 2>&1 & done
  timeout 100 python -m pytest -q -p no:cacheprovider tests/gpu/test_indexer_gpu.py -k "topk_sets and (default or 3l)" \
    > $R/tests_g.log 2>&1
  echo "tests rc=$? $(tail -n 1 $R/tests_g.log)" >> $L
  wait
  timeout 60 python bench/topk_v3.py --variants v4,v4_s2k --shapes $SG --rounds 1 --rep-ms 15 --out $R/topk_sample_s43.json \
    > $R/bench_g.log 2>&1
  echo "bench rc=$?" >> $L; grep -v -i warn $R/bench_g.log >> $L; pack
  ;;
d)
  N=8 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests_d tests/gpu/test_indexer_gpu.py tests/gpu/test_backend_gpu.py
  cat $R/tests_d/summary.log >> $L; pack
  ;;
esac
