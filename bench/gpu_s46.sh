#!/usr/bin/env bash
# Session 46: the grouped prefill's union lists over long flat sources. The dense (fused shared-memory) path held its
# map in registers, at most 4096 words: 16384 / 32768 / 65536 slots at G 8 / 4 / 2 (8 / 16 / 32 heads). Past that
# (a long prefill's gathered context, a bf16 cache's flat view) the hash path ran, which session 45 measured at 0.64-0.79
# of the dense path's speed on the prefill rows' inputs (ab_s45_hash_*.json). Now dense_union_smem_kernel compacts
# its map 4096 words at a time, so the map is bound by shared memory: 131072 / 262144 / 524288 slots
# (grouping.fused_max_slots).
# Call `a`: tests/gpu/test_grouping_gpu.py whole (new: test_dense_fused_past_one_chunk, _limit,
# _prefill_over_a_long_source); the grouping bench (build_groups alone, CUDA graph of 10 calls) auto against hash at
# s_kv 16384 / 65536 / 131072 (G 8 / 4 / 2), 262144 (G 4 / 2), 524288 (G 2), s_q 1024 and 8192.
# PREDICTION: tests pass. At 16384 slots auto as before (one chunk: session 37's 12.5 / 11.1 / 13.3 us at s_q 1024,
# 81 / 82 / 88 at 8192, within ~5%). Past it auto is slower than at 16384 (the map's words scanned grow with the
# slots, and from 64 KiB of map one program an SM), but far under hash at G 8 / 4: 65536 slots ~25-35 us at s_q 1024,
# ~150-250 at 8192; 131072 ~35-50 / ~250-400 (hash ~120 / ~1150, as at 16384). G 2 at 524288 slots (32768 words of 16
# fields, 4096 groups at s_q 8192) may be close to hash.
# OUTCOME a (84cd1e4, bench/logs/s46/a/): 42 passed. build_groups, auto / hash, us, s_q 1024 then 8192:
# 16384 slots G 8 / 4 / 2: 10.5 / 120.6, 10.8 / 130.7, 12.6 / 200.1; 68.8 / 1116.5, 77.3 / 1089.8, 84.6 / 1434.8 (no
# regression: session 37 read 12.5 / 11.1 / 13.3 and 81 / 82 / 88).
# 65536: 18.3 / 134.6, 20.1 / 158.3, 27.4 / 323.2; 162.4 / 1269.3, 142.4 / 1330.5, 186.6 / 2289.2.
# 131072: 28.4 / 142.7, 32.2 / 172.9, 45.8 / 371.6; 243.2 / 1327.6, 232.8 / 1418.0, 328.5 / 2572.9.
# 262144 G 4 / 2: 63.6 / 185.7, 83.4 / 399.2; 513.8 / 1510.2, 631.2 / 2828.6. 524288 G 2: 173.0 / 493.7; 1389.3 / 3368.3.
# Every case matches the reference. The prediction held (65536 and 131072 at G 8 came in under it); dense is 2.4-12x
# faster than hash at every size measured, G 2 at 524288 included.
# Call `b`: the prefill over those sources beside FlashMLA (bench kernels --prefill-kv 65536 / 131072, 8 / 16 / 32
# heads, s_q 1024 / 8192; the same with DSATTN_GROUPING_IMPL=hash), and bench ab auto against hash at 131072.
# PREDICTION: the grouped kernel itself is slower than over 16384 slots (larger unions: 3.0 / 3.3 x topk at G 8
# against 2.3); dense / hash time ~0.7 (the builds' gap above against ~0.25-0.3 ms of kernel at s_q 1024, 8 heads); 8
# heads ~1.7x FlashMLA's best, 16 heads ~1.2x, 32 heads native ~0.85x (pad64 ~0.74x, as over 16384).
# OUTCOME b (4bc0930, bench/logs/s46/b/, sparse_mla_s46_prefill_kv{65536,131072}_{auto,hash}.json, eager, 3 rounds,
# FlashMLA in the same process): dsattn native ms and ratio to FlashMLA's best, s_q 1024 / 8192, dense (auto) / hash:
# 65536 slots: 8 heads 0.299 (1.645x) / 0.437 (1.124x), 2.311 (1.675x) / 3.398 (1.141x); 16 heads 0.433 (1.154x) / 0.583
# (0.844x), 3.405 (1.149x) / 4.525 (0.868x); 32 heads 0.622 (0.825x) / 0.892 (0.577x), 4.874 (0.835x) / 6.831 (0.596x).
# 131072 slots: 8 heads 0.337 (1.455x) / 0.469 (1.055x), 2.609 (1.498x) / 3.667 (1.063x); 16 heads 0.471 (1.061x) /
# 0.620 (0.811x), 3.666 (1.076x) / 4.826 (0.819x); 32 heads 0.651 (0.789x) / 0.945 (0.547x), 5.060 (0.808x) / 7.164
# (0.570x); pad64 0.66-0.71 / 5.10-5.42 ms (0.73-0.77x) throughout. bench ab at 131072, dense / hash time: 8 heads 0.777
# / 0.716, 16 heads 0.793 / 0.759, 32 heads 0.701 / 0.688 (s_q 1024 / 8192; CIs within +-0.01; outputs agree). The
# prediction held in direction; 8 and 16 heads came out faster than predicted at 65536 (1.65x / 1.15x), 32 heads native
# beats pad64 at 131072 (0.651 / 5.060 against 0.702 / 5.417 ms), so policy.NATIVE_G2_MAX_SLOTS = 131072.
# Call `c`: the backend GPU file (the policy now takes the device's reach); dsattn bench serve --graph, scenarios
# prefill and long (a 4096-token chunk after 60K of context), glm-5 / deepseek-v3.2 / glm-5.3-flash TP8 and glm-5 TP8
# over a bf16 cache, default against the reach of before (grouping.fused_fits / fused_max_slots patched to the
# register-bound dense_fits / dense_max_slots in that process).
# PREDICTION: tests pass. Where the call's source was past the old reach (8 heads: prefill's 32768 and long's 65536
# gathered keys; 16 heads: long; glm-5.3-flash's G 16: both; glm-5 bf16: its flat view) the layer is faster by the
# builds' difference plus the larger unions' gathers, ~5-15% of the layer (the indexer's logits over the context are
# most of a long chunk's layer); elsewhere the same.
# OUTCOME c (05ee23f, bench/logs/s46/c/, serve_s46_long_{new,old}.json): backend GPU file 19 passed. Layer replays (ms),
# new / old reach: glm-5 TP8 bf16 prefill 6.078 / 7.276, long 9.248 / 11.099 (16% / 17% less); the fp8 configs the
# same (glm-5 6.055 / 6.045 and 8.135 / 8.123, deepseek-v3.2 8.262 / 8.260 and 12.636 / 12.538, glm-5.3-flash 3.453 /
# 3.451 and 2.884 / 2.866). Every replay bit-equal to its eager call. The prediction was wrong for the fp8 configs: at
# 8 and 16 heads an fp8 cache takes the fp8_mixed path (SPEC 7: every token through the fp8 decode kernel), which
# builds no union lists; only the bf16 path (its flat view) and the gathered path (>= 32 heads) do.
# Call `d`: every GPU test file whole (bench/gpu_tests_all.sh) at 30c9b83 (the kernel change touches every grouped
# prefill call). PREDICTION: all pass (session 45: 1014 tests; +10 new grouping tests).
# OUTCOME d (c69c9d2; code as 30c9b83, bench/logs/s46/d/s46_tests/summary.log): 1028 tests, 765 passed, 263 skipped, none
# failed.
# Call `e`: the bf16 path's keyed prefill (sparse_mla_prefill's key_slots: the union lists built over the step's
# positions numbered densely, then turned into slots; DSAAttention.bf16_keyed_prefill). GPU tests: the grouping file's
# key_slots tests, the backend file whole (new: test_bf16_keyed_prefill_step at 8 / 16 / 32 heads, a cache of 3000
# spare blocks); dsattn bench serve --graph over an engine-sized bf16 cache (--spare-blocks 16384: ~1M slots, the
# requests' blocks spread over it), scenarios prefill and long, keyed against not (bf16_keyed_prefill False).
# PREDICTION: tests pass. Not keyed, the flat view (~1.1M slots) is past every reach: hash union lists at 8 / 16 heads,
# pad64 at 32; keyed, the lists are dense over 36K / 66K keys. glm-5 TP8 ~15-17% less a prefill layer (call c's
# dense / hash difference at the small cache: 6.08 / 7.28 and 9.25 / 11.10 ms), deepseek-v3.2 TP8 similar, glm-5 TP2
# (32 heads) ~5-7% (native against pad64).
# OUTCOME e (67fee16, bench/logs/s46/e/, serve_s46_bigcache_{keyed,slots}.json): grouping key_slots tests 3 passed,
# backend file 22 passed. Layer replays over the ~1.1M-slot cache, keyed / slots (ms): glm-5 TP8 long 9.304 / 11.350
# (18% less), deepseek-v3.2 TP8 long 13.847 / 18.184 (24% less), glm-5 TP2 (32 heads) long 9.750 / 9.657 (1% more:
# native against pad64 over the synthetic step's top-k lists, from random queries and keys); the prefill
# scenario the same in both arms (8 heads 7.428 / 7.441): its two requests' contexts (32768) pass the gather cap
# (max_model_len, 28672), and a keyed call then needed one gather chunk. The slots arm's deepseek-v3.2 long replay
# was not bit-equal to its eager call, nor two eager calls to each other (max diff 1.95e-3): the hash union path
# over a ~1.1M-slot view at G 4; keyed, both equal. Since then a keyed call a gather chunk (keyed_prefill_keys: a list).
# Call `f`: the backend GPU file again; serve --graph over the big cache, scenario prefill, keyed against slots.
# PREDICTION: tests pass; the prefill scenario now keyed (two calls, 4096 and 28672 keys): glm-5 TP8 and deepseek-v3.2
# TP8 5-15% less.
# OUTCOME f (307dff4, bench/logs/s46/f/, serve_s46_bigcache_pf_{keyed,slots}.json): backend file 22 passed. Prefill
# layer replays over the ~1.1M-slot cache, keyed / slots: glm-5 TP8 6.029 / 7.381 ms (18% less), deepseek-v3.2 TP8
# 8.592 / 10.861 (21% less); both bit-equal to their eager calls. More than predicted.
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/s46.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s46.log; }
gbench() {  # $1 s_kv, then groups
  local s=$1; shift
  local t0=$SECONDS
  timeout 150 python -m dsattn.ops.sparse_mla.grouping --bench --impl auto hash --s-q 1024 8192 --s-kv $s \
    --groups "$@" --skip-edge > $R/grouping_$s.log 2>&1
  echo "grouping s_kv $s rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/grouping_$s.log >> $L; pack
}
case "$1" in
a)
  N=4 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests_a tests/gpu/test_grouping_gpu.py
  cat $R/tests_a/summary.log >> $L; pack
  gbench 16384 8 4 2
  gbench 65536 8 4 2
  gbench 131072 8 4 2
  gbench 262144 4 2
  gbench 524288 2
  ;;
b)
  for kv in 65536 131072; do
    for arm in auto hash; do
      t0=$SECONDS
      DSATTN_GROUPING_IMPL=$arm timeout 200 python -m dsattn.cli bench kernels --op sparse_mla --cases prefill \
        --heads 8,16,32 --prefill-kv $kv --out $R --name sparse_mla_s46_prefill_kv${kv}_$arm > $R/kernels_${kv}_$arm.log 2>&1
      echo "kernels $kv $arm rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/kernels_${kv}_$arm.log | tail -14 >> $L; pack
    done
  done
  for h in 8 16 32; do for sq in 1024 8192; do
    timeout 60 python -m dsattn.cli bench ab --op sparse_mla_prefill --heads $h --tokens $sq --slots 131072 \
      --a env:DSATTN_GROUPING_IMPL=auto --b env:DSATTN_GROUPING_IMPL=hash --out $R --name ab_s46_kv131072_${sq}_h$h \
      > $R/ab_${sq}_h$h.log 2>&1
    echo "ab $sq h$h rc=$?" >> $L; tail -4 $R/ab_${sq}_h$h.log >> $L; pack
  done; done
  ;;
c)
  N=6 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests_c tests/gpu/test_backend_gpu.py
  cat $R/tests_c/summary.log >> $L; pack
  C="glm-5:8:fp8_ds_mla deepseek-v3.2:8:fp8_ds_mla glm-5.3-flash:8:fp8_ds_mla_nope glm-5:8:bf16"
  for arm in new old; do
    t0=$SECONDS
    timeout 240 python -c "import sys; from dsattn.ops.sparse_mla import grouping as g
if sys.argv[1] == 'old':
    g.fused_fits, g.fused_max_slots = g.dense_fits, g.dense_max_slots
from dsattn.bench.serve import main; sys.exit(main(sys.argv[2:]))" $arm --graph --scenarios prefill,long \
      --configs $C --out $R --name serve_s46_long_$arm > $R/serve_$arm.log 2>&1
    echo "serve $arm rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/serve_$arm.log >> $L; pack
  done
  ;;
e)
  K="key_slots" N=2 LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_e_grouping tests/gpu/test_grouping_gpu.py &
  N=6 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests_e_backend tests/gpu/test_backend_gpu.py
  wait
  cat $R/tests_e_grouping/summary.log $R/tests_e_backend/summary.log >> $L; pack
  C="glm-5:8:bf16 deepseek-v3.2:8:bf16 glm-5:2:bf16"
  for arm in keyed slots; do
    t0=$SECONDS
    timeout 200 python -c "import sys; from dsattn.backend.attention import DSAAttention as A
A.bf16_keyed_prefill = sys.argv[1] == 'keyed'
from dsattn.bench.serve import main; sys.exit(main(sys.argv[2:]))" $arm --graph --scenarios prefill,long \
      --spare-blocks 16384 --configs $C --out $R --name serve_s46_bigcache_$arm > $R/serve_$arm.log 2>&1
    echo "serve $arm rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/serve_$arm.log >> $L; pack
  done
  ;;
f)
  N=6 LIMIT=200 bash bench/gpu_tests_sharded.sh $R/tests_f_backend tests/gpu/test_backend_gpu.py
  cat $R/tests_f_backend/summary.log >> $L; pack
  for arm in keyed slots; do
    t0=$SECONDS
    timeout 120 python -c "import sys; from dsattn.backend.attention import DSAAttention as A
A.bf16_keyed_prefill = sys.argv[1] == 'keyed'
from dsattn.bench.serve import main; sys.exit(main(sys.argv[2:]))" $arm --graph --scenarios prefill \
      --spare-blocks 16384 --configs glm-5:8:bf16 deepseek-v3.2:8:bf16 --out $R --name serve_s46_bigcache_pf_$arm \
      > $R/serve_pf_$arm.log 2>&1
    echo "serve $arm rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/serve_pf_$arm.log >> $L; pack
  done
  ;;
d)
  bash bench/gpu_tests_all.sh s46_tests >> $L 2>&1
  tar -czf $OUT/r.tgz -C $OUT s46.log s46_tests.tgz
  ;;
esac
