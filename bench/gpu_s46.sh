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
esac
