#!/usr/bin/env bash
# Written in session 61 (no device came; not run yet). First (the question that decides the next kernel for the
# 32-head prefill row, notes/sparse_mla.md session 61): gluon_rx's ping-pong keys-on-M program over the prefill row's
# workload (bench/rx_timing_builds.py --prefill-case: s_q 1024, `overlap` top-k over 16384 latents packed as fp8, each
# token's own list), full / producer alone / consumers alone, at 32 heads (16-head programs run one consumer, which
# has no timing builds), beside the grouped bf16 prefill.
# PREDICTION (probe): fp8_ds_mla at 32 heads 0.45-0.60 ms (the decode's 2.3 us a token-block at 2048 tokens is
# conversion- and latency-bound; L2 hits take some latency off), consumers alone within 10% of full. A bf16-row version
# is worth building if the consumers alone come under ~0.45 ms (K's conversion, gone over bf16 rows, is about half of
# their ALU work).
# Second: gluon_rxb (written this session from that reasoning, compile-checked, not run): its GPU tests
# (tests/gpu/test_sparse_mla_rxb_gpu.py, hang guard first) and `dsattn bench ab` of the prefill at 32 heads, s_q 1024
# and 8192 (A the default grouped gluon_prefill, B DSATTN_SPARSE_MLA_IMPL=gluon_rx: gluon_rxb), and 24 heads at 1024.
# PREDICTION (rxb): right; against the grouped kernel 0.9-1.35x at 32 heads (13% less shared-memory traffic and 29%
# less MMA work a token, no list build; per-token instruction issue about equal: compile-check SASS, ~1200 a
# consumer's block). The row (1.3x FlashMLA's best) needs B >= 1.40x / 1.37x at s_q 1024 / 8192 (session 60's 0.928x /
# 0.950x).
# Then gluon_small's GluonConfig.cvt_asm (bf16 rows' V converted by
# _bf16_to_f16_scaled, moved from gluon_prefill, where it is config cvt_asm): its GPU tests (test_small_cvt_asm*, at
# 8 / 32 heads, under DSATTN_SPARSE_MLA_IMPL=gluon) and its time against cvt_asm 0 (bench/time_small_bf16.py, 3
# alternating rounds, 8 / 16 / 32 heads). Session 60's bench/gpu_s60_cvt_asm.sh (prefill cvt_asm and sffma: tests,
# kernel probes, A/Bs) is the next call: both would not fit one call's 600 s.
# PREDICTION: right; gluon_small's bf16 decode within +-2% (its conversion is one pass over a stage a block). If right
# and not slower: cvt_asm 1 the default in launch.gluon_config and in gluon_prefill's prefill_config.
# and issue 3's 32-head prefill rows with both kernels beside FlashMLA (`dsattn bench kernels --impl auto,gluon_rx`;
# carry [".peer"]).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s61.sh   (carry [".peer"])
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG
mkdir -p $OUT/r; S=$OUT/small.log
nvidia-smi --query-gpu=name --format=csv,noheader > $S
t0=$SECONDS
for h in 32; do
  timeout 150 python bench/rx_timing_builds.py --prefill-case --tokens 1024 --heads $h --rounds 3 --out $OUT/r \
    --name rx_prefill_probe_s61_h$h >> $S 2>&1
  echo "probe h$h rc=$? $((SECONDS - t0)) s" >> $S
done
timeout 200 python -m pytest -q -p no:cacheprovider -rfE -s -x tests/gpu/test_sparse_mla_rxb_gpu.py \
  > $OUT/r/rxb_tests.log 2>&1
echo "rxb tests rc=$? $((SECONDS - t0)) s" >> $S
grep -E "passed|failed|Error|vs default|max_abs|out_err" $OUT/r/rxb_tests.log | tail -n 30 >> $S
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
echo "small tests rc=$? $((SECONDS - t0)) s" >> $S; grep -E "passed|failed|Error" $OUT/r/small_tests.log | tail -n 12 >> $S
timeout 120 python bench/time_small_bf16.py 3 $OUT/r/small_cvt_asm_time.json >> $S 2>&1
echo "time rc=$?" >> $S
cat $S
