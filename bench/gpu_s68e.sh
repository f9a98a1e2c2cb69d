#!/usr/bin/env bash
# Session 68, call 7 (carry [".peer"]): sparse_mla_prefill's row_scratch (the rows converted once by kernels.f16_rows;
# gluon_prefill config pre16, no conversion pass). 1. f16_rows' block shape (bench/s68_f16rows_tune.py); 2. the GPU
# tests of it (test_row_scratch_bit_equal: 8..128 heads, over slots and keys) and the hang guard; 3. `dsattn bench ab`
# of the op without and with row_scratch, s_q 1024, 8 / 16 / 32 / 64 / 128 heads.
# PREDICTION (call 6, bench/s68_pre16.py, H100): bit-equal everywhere; f16_rows 26-61 us for 16384 rows against a
# ~15 us copy; bench ab 8 heads level (the rule does not convert there: 1024 x 8 < 16384 rows), 16 heads ~1.02x,
# 32 heads ~1.04x, 64 heads ~1.14x, 128 heads ~1.16x.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s68e.sh      ($OUT/s68e.log, $OUT/s68e.tgz)
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_PF_PROFILE
L=$OUT/s68e.log; R=$OUT/k; mkdir -p $R
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader) tree ${DSATTN_GIT_COMMIT:-?}" > $L
pack() { tar -czf $OUT/s68e.tgz -C $OUT k s68e.log; }
t0=$SECONDS
timeout 90 python bench/s68_f16rows_tune.py > $R/tune.log 2>&1; echo "== tune rc=$?" >> $L; grep rows $R/tune.log >> $L; pack
timeout 200 python -m pytest -q -p no:cacheprovider -rfE tests/gpu/test_sparse_mla_prefill_gpu.py \
  -k "row_scratch or hang_guard" > $R/tests.log 2>&1
echo "== tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $R/tests.log)" >> $L; grep -E "^(FAILED|ERROR)" $R/tests.log >> $L; pack
for H in 64 128 32 16 8; do
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens 1024 --heads $H --a row_scratch=0 \
    --b row_scratch=1 --name ab_s68_rows_1024_h$H --out $R > $R/ab_$H.log 2>&1
  echo "== ab rows $H heads: rc=$? $((SECONDS - t0)) s" >> $L; grep -v -i warn $R/ab_$H.log | tail -n 3 | cut -c1-200 >> $L
  pack
done
pack; rm -rf $R; cat $L
