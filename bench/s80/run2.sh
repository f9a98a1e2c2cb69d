#!/usr/bin/env bash
# Session 80's second device call (one GPU; results under $OUT).   DSATTN_GIT_COMMIT=<sha> bash bench/s80/run2.sh
# (1) The union kernel with the copy loop's bound from a shared word (this tree) against the round trip through
#     counts[c] (f701c1b's grouping_smem.py, carried untracked as bench/s80/_old_grouping_smem.py and run from a copy
#     of src/): the grouping bench at G 2, s_q 1024 / 8192, old then new then old. PREDICTION (H100): 8192 82 -> 76-80
#     us (call 1: ~8% of the stall samples on that reload), 1024 12.6 -> 12.0-12.6.
# (2) GPU tests: the fused union kernel's (test_grouping_gpu.py -k dense_fused), then the pair's default path where
#     call 1 timed out: pair_other_paths, pair_split_options, pair_stamps.
LOG=s80b.log TAG=s80
source bench/gpu_lib.sh
echo "tree ${DSATTN_GIT_COMMIT:-?}" >> $L
t0=$SECONDS
rm -rf /tmp/oldsrc && cp -r src /tmp/oldsrc && cp bench/s80/_old_grouping_smem.py /tmp/oldsrc/dsattn/ops/sparse_mla/grouping_smem.py
gb() {  # name pythonpath
  PYTHONPATH=$2:$PWD/.peer timeout 80 python -m dsattn.ops.sparse_mla.grouping --bench --impl auto --s-q 1024 8192 \
    --groups 2 --skip-edge > $R/gb_$1.log 2>&1
  echo "== grouping bench $1 rc=$? $((SECONDS - t0)) s" >> $L; grep "us " $R/gb_$1.log | cut -c1-140 >> $L
}
gb old1 /tmp/oldsrc; gb new1 $PWD/src; gb old2 /tmp/oldsrc; gb new2 $PWD/src
pack
timeout 150 python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_grouping_gpu.py -k dense_fused \
  > $OUT/tests_union.log 2>&1
echo "union tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests_union.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests_union.log | head -n 10 | cut -c1-300 >> $L
timeout 120 python -m pytest -q -p no:cacheprovider -rfE --tb=short tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "pair_other_paths or pair_split_options or pair_stamps" > $OUT/tests_pair.log 2>&1
echo "pair tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests_pair.log)" >> $L
grep -E "^(FAILED|ERROR)|^E " $OUT/tests_pair.log | head -n 10 | cut -c1-300 >> $L
pack; echo "end $((SECONDS - t0)) s" >> $L
cat $L
