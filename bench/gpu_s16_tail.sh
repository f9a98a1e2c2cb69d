#!/usr/bin/env bash
# Written in session 15 for the next device session (NOT YET RUN): gluon_prefill's tail schedule (PrefillConfig
# tail 1, DSATTN_PF_CONFIG=64/2/4/80/0/1/1/1: warpgroup 0 issues S(b + 1) right behind its P V(b) and retires both
# in iteration b; notes/flashmla_sparse_prefill_study.md, proposal 2). First the hang guard and the configuration
# tests with it (they stop the script on a failure), then A/B against the default (alternating blocks, bootstrap
# interval) at 64 / 128 / 16 / 32 heads, s_q 1024. PREDICTION (study's arithmetic): 3-7% less time a block.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s16_tail.sh      (log $OUT/t.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL
R=$OUT/r; mkdir -p $R; L=$OUT/t.log
P="-q -p no:cacheprovider -rfEs"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 120 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "hang_guard and 64_2_4_80_0_1_1_1" \
  > $R/t_guard.log 2>&1
rc=$?; echo "tail hang guard rc=$rc" >> $L; tail -n 2 $R/t_guard.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
[ $rc -eq 0 ] || exit 0
timeout 150 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P \
  -k "configs and (s64_2_4_80_0_1_1_1 or s64_2_4_56_0_0_1_1)" > $R/t_cfg.log 2>&1
rc=$?; echo "tail config tests rc=$rc" >> $L; tail -n 2 $R/t_cfg.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
[ $rc -eq 0 ] || exit 0
for h in 64 128 16 32; do
  timeout 100 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens 1024 --heads $h \
    --a env:DSATTN_PF_CONFIG=64/2/4/80/0/1/1 --b env:DSATTN_PF_CONFIG=64/2/4/80/0/1/1/1 \
    --name ab_s16_tail_h$h --out $R > $R/ab_h$h.log 2>&1
  echo "ab $h heads rc=$?" >> $L; tail -n 4 $R/ab_h$h.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
done
