#!/usr/bin/env bash
# Session 37: build_groups' dense compaction in field-major order (grouping DENSE_ORDER / DSATTN_GROUPING_ORDER
# 'field') against the ascending-slot order of sessions 11-36 ('slot').
# Why: the compaction's time grows with SPW (fields a map word: 4 / 8 / 16 at G 8 / 4 / 2), 10.1 / 17.7 / 34.8 us at
# s_q 1024 (bench/logs/s11_call2.log) for the same 524 K map words, while its instructions would take ~2-3 us: in
# slot order each field loop's stores of a warp land interleaved over the lines the other loops also write (~3-4
# partly written sectors a warp store, every line written once a field); in field order a warp's entries of one field
# are consecutive (~1 sector a store).
# PREDICTION (arithmetic, not measured): the compaction at G 2 35 -> <= 10 us at s_q 1024 (build_groups 41 -> ~15),
# ~8x that at 8192; the 32-head prefill 0.567 -> ~0.54 ms at s_q 1024 (0.90x -> ~0.94x FlashMLA's best), 4.37 -> ~4.15
# at 8192; the 16-head a few % less; 8 heads ~2-3%.
# Call 1 (`a`): per-kernel times (grouping_phases.py, both orders), the grouping bench (union against the reference,
# the edge cases), Nsight Compute of the compaction at G 2 (both orders), `dsattn bench ab` of the prefill, slot
# against field (8 / 16 / 32 heads).
# Call 1 measured (bench/logs/s37/call1/): field order is right and faster at G 2 / 4 (compaction 34.5 -> 22.9 us at
# s_q 1024 G 2, 252 -> 148 at 8192), slower at G 8 s_q 8192 (155 registers); Nsight Compute: the slot-order compaction
# L2-bound with 83% of its stalls on the scoreboard, the field order issue-bound (its 16 prefix sums); the prefill
# 1.019x / 1.027x at 32 heads, 1.004x at 16, 1.002x at 8.
# Call 2 (`b`): grouping IMPL 'dense_fused' (grouping_smem.dense_union_smem_kernel: the map built AND compacted in one
# program's shared memory, ascending slots, written out with coalesced stores; one launch instead of two and no map
# round trip). PREDICTION (arithmetic): build_groups at s_q 1024 G 2 41 -> ~8-12 us, at 8192 297 -> ~60-90; the
# 32-head prefill ~5% faster at both sizes against today's default, ~2-3% at 16 heads, ~2% at 8. Its GPU tests first
# (tests/gpu/test_grouping_gpu.py: entry for entry against the reference, the prefill bit-equal to the dense path).
# Call 2 measured (bench/logs/s37/call2/): tests 28 passed; build_groups at s_q 1024 G 8 / 4 / 2 12.5 / 11.1 / 13.3 us
# (dense_smem 16.9 / 24.1 / 41.1), at 8192 81 / 82 / 88 (99 / 158 / 293); the prefill 1.035x / 1.049x / 1.058x at 8 /
# 16 / 32 heads, s_q 1024, 1.014x / 1.025x / 1.047x at 8192, outputs bit-equal. dense_fused became 'auto' (871996a),
# and the field order of part a was removed (its code, and DSATTN_GROUPING_ORDER, at acd839c).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s37.sh a|b
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_GROUPING_ORDER \
  DSATTN_PREFILL_SCRATCH_MIB
R=$OUT/r; mkdir -p $R; L=$OUT/s37.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r s37.log; }
abp() {  # s_q heads [arm A] [arm B] [name]
  timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $1 --heads $2 \
    --a ${3:-env:DSATTN_GROUPING_ORDER=slot} --b ${4:-env:DSATTN_GROUPING_ORDER=field} \
    --name ab_s37_${5:-order}_$1_h$2 --out $R > $R/ab_${5:-order}_$1_h$2.log 2>&1
  echo "ab ${3:-slot} vs ${4:-field}, s_q $1, $2 heads rc=$?" >> $L; tail -n 4 $R/ab_${5:-order}_$1_h$2.log >> $L
  pack
}
case $1 in
a)
  for o in slot field; do
    DSATTN_GROUPING_ORDER=$o timeout 100 python bench/grouping_phases.py --impl dense_smem --s-q 1024 8192 \
      --groups 8 4 2 > $R/phases_$o.log 2>&1
    echo "phases $o rc=$?" >> $L; cat $R/phases_$o.log >> $L
  done
  pack
  timeout 150 python -m dsattn.ops.sparse_mla.grouping --bench --impl dense_smem --dense-order slot field \
    --s-q 1024 8192 --groups 8 4 2 > $R/grouping_bench.log 2>&1
  echo "grouping bench rc=$?" >> $L; cat $R/grouping_bench.log >> $L
  pack
  for o in slot field; do
    DSATTN_GROUPING_ORDER=$o timeout 100 ncu --clock-control none -k regex:_dense_compact -s 1 -c 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
      --section Occupancy python bench/grouping_phases.py --impl dense_smem --s-q 1024 --groups 2 --iters 2 \
      > $R/ncu_compact_g2_$o.txt 2>&1
    echo "ncu $o rc=$?" >> $L
    grep -iE "Duration|Throughput|Warp Cycles Per Issued|Achieved Occupancy|Registers|L2 Hit|Stall" \
      $R/ncu_compact_g2_$o.txt | head -24 >> $L
  done
  pack
  abp 1024 32
  abp 8192 32
  abp 1024 16
  abp 8192 16
  abp 1024 8
  ;;
b)
  timeout 200 python -m pytest tests/gpu/test_grouping_gpu.py -q -p no:cacheprovider -rfEs > $R/t_grouping.log 2>&1
  T=$?
  echo "grouping GPU tests rc=$T" >> $L; tail -n 15 $R/t_grouping.log >> $L
  pack
  for i in dense_smem dense_fused; do
    DSATTN_GROUPING_IMPL=$i timeout 100 python bench/grouping_phases.py --impl $i --s-q 1024 8192 --groups 8 4 2 \
      > $R/phases_$i.log 2>&1
    echo "phases $i rc=$?" >> $L; grep "^s_q" $R/phases_$i.log >> $L
  done
  timeout 150 python -m dsattn.ops.sparse_mla.grouping --bench --impl dense_smem dense_fused --s-q 1024 8192 \
    --groups 8 4 2 > $R/grouping_bench.log 2>&1
  echo "grouping bench rc=$?" >> $L; grep -v Warning $R/grouping_bench.log >> $L
  pack
  [ $T -eq 0 ] || { echo "grouping tests failed: no prefill runs" >> $L; exit 0; }
  A=env:DSATTN_GROUPING_IMPL=dense_smem; B=env:DSATTN_GROUPING_IMPL=dense_fused
  abp 1024 32 $A $B fused
  abp 8192 32 $A $B fused
  abp 1024 16 $A $B fused
  abp 8192 16 $A $B fused
  abp 1024 8 $A $B fused
  abp 8192 8 $A $B fused
  ;;
esac
