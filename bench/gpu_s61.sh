#!/usr/bin/env bash
# Written in session 61 (no device came); run in session 62 on an H100 (bench/results/gpu_s61_script_s62_h100.log).
# One H200 (or H100), carry [".peer"] (FlashMLA for the table); every step appends to $OUT/small.log as it goes:
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s61.sh
# 1. gluon_rxb's GPU tests (tests/gpu/test_sparse_mla_rxb_gpu.py, its hang guard first, -x).
# 2. The probe (bench/rx_timing_builds.py --prefill-case, s_q 1024, 32 heads): over the prefill row's workload
#    (`overlap` top-k over 16384 latents, each token's own list), the grouped bf16 prefill (the row's kernel today),
#    gluon_rxb with its timing builds (producer alone, consumers alone, V^T unconverted) and gluon_rx's fp8 ping-pong
#    program (the same latents packed as fp8) with its timing builds: which side of gluon_rxb binds.
# 3. Issue 3's 32-head prefill rows at s_q 1024 / 8192 with both kernels beside FlashMLA in one process (`dsattn bench
#    kernels --impl auto,gluon_rx`: auto = the grouped kernel, gluon_rx = gluon_rxb).
# 4. `dsattn bench ab` (A the default grouped, B DSATTN_SPARSE_MLA_IMPL=gluon_rx = gluon_rxb): 32 heads s_q 1024 and
#    8192, 24 heads s_q 1024.
# 5. gluon_small's GluonConfig.cvt_asm: its GPU tests and bench/time_small_bf16.py (cvt_asm 0 against 1).
# Session 60's bench/gpu_s60_cvt_asm.sh (prefill cvt_asm / sffma) is the call after: both do not fit 600 s.
# PREDICTIONS. gluon_rxb right; 0.9-1.35x the grouped kernel at 32 heads (13% less shared-memory traffic and 29% less
# MMA work a token, no list build; per-token instruction issue about equal: ~1200 SASS instructions a consumer's block).
# The row (1.3x FlashMLA's best) needs >= 1.40x / 1.37x the grouped kernel at s_q 1024 / 8192 (session 60: 0.928x /
# 0.950x). The fp8 program of the probe 0.45-0.60 ms, its consumers alone within 10% of full. gluon_small's cvt_asm
# right and within +-2% (if so, cvt_asm 1 becomes the default there and in gluon_prefill, after session 60's A/Bs).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG
mkdir -p $OUT/r; S=$OUT/small.log
nvidia-smi --query-gpu=name --format=csv,noheader > $S
t0=$SECONDS
timeout 200 python -m pytest -q -p no:cacheprovider -rfE -s -x tests/gpu/test_sparse_mla_rxb_gpu.py \
  > $OUT/r/rxb_tests.log 2>&1
echo "rxb tests rc=$? $((SECONDS - t0)) s" >> $S
grep -E "passed|failed|Error|vs default|max_abs|out_err" $OUT/r/rxb_tests.log | tail -n 30 >> $S
timeout 240 python bench/rx_timing_builds.py --prefill-case --tokens 1024 --heads 32 --rounds 3 --out $OUT/r \
  --name rx_prefill_probe_s61_h32 >> $S 2>&1
echo "probe rc=$? $((SECONDS - t0)) s" >> $S
for tk in 1024 8192; do  # issue 3's 32-head prefill row: the default (grouped), gluon_rxb and FlashMLA in one process
  PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer timeout 170 python -m dsattn.cli bench kernels --op sparse_mla \
    --cases prefill --heads 32 --tokens $tk --impl auto,gluon_rx --rounds 3 --rep-ms 20 --out $OUT/r \
    --name sparse_mla_s61_rxb_prefill_$tk > $OUT/r/table_$tk.log 2>&1
  echo "== table prefill s_q $tk, 32 heads (auto = grouped, gluon_rx = gluon_rxb) rc=$? $((SECONDS - t0)) s" >> $S
  grep -E "dsattn|flashmla" $OUT/r/table_$tk.log | cut -c1-200 >> $S
done
for c in "1024 32" "8192 32" "1024 24"; do
  set -- $c
  timeout 150 python -m dsattn.cli bench ab --op sparse_mla_prefill --tokens $1 --heads $2 \
    --b "env:DSATTN_SPARSE_MLA_IMPL=gluon_rx" --name ab_s61_rxb_${1}_h$2 --out $OUT/r > $OUT/r/ab_rxb_${1}_h$2.log 2>&1
  echo "== ab rxb s_q $1, $2 heads (A default grouped, B gluon_rxb) rc=$? $((SECONDS - t0)) s" >> $S
  tail -n 4 $OUT/r/ab_rxb_${1}_h$2.log | cut -c1-200 >> $S
done
timeout 200 python -m pytest -q -p no:cacheprovider -rfE -s tests/gpu/test_sparse_mla_gpu.py \
  -k "small_cvt_asm and gluon and not gluon_ws and not gluon64" \
  > $OUT/r/small_tests.log 2>&1
echo "small tests rc=$? $((SECONDS - t0)) s" >> $S
grep -E "passed|failed|Error" $OUT/r/small_tests.log | tail -n 12 >> $S
timeout 120 python bench/time_small_bf16.py 3 $OUT/r/small_cvt_asm_time.json >> $S 2>&1
echo "time rc=$?" >> $S
cat $S
