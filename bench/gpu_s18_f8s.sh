#!/usr/bin/env bash
# RAN in session 18, part 1 (bench/logs/s18_f8s.log, s18_f8s_tests.log): no faster and outside issue 3's tolerances
# (lse 1.6e-5 to 2.3e-4 in 20 of 34 tests, out over its bound in the 3 q-magnitude tests), so part 2 was not run and
# config f8s was REMOVED (its code: 12a56fa); this script no longer runs on the tree.
# Written in session 17 (no device lent that session), NOT YET RUN: gluon_rx's config f8s on the H200. f8s computes
# S^T with fp8 wgmma products read straight from the latent stage (q split into two e4m3 terms) instead of
# converting every latent value of K to fp16 in registers, so each consumer converts the latent once a block (P V's
# operand) instead of twice. PREDICTION (arithmetic, per consumer thread and 64-key block at 16-head programs: ~256
# conversion / scale operations and 16 ld.shared.v4 removed, ~80 fp32 operations and a proxy fence added, of ~650):
# decode fp8_ds_mla 512 tokens 16 heads 0.246 -> 0.18-0.21 ms (issue 3's 2x needs 0.22), 8 heads and nope faster by a
# similar share; 32 heads (the two halves, no spill at sm_90a) unknown against gluon_ws's 0.351.
# Order: (1) the f8s GPU tests, hang guard first (issue 3's tolerances; the accuracy margin on lse was 1.4x in
# session 14's cuBLAS emulation, so their printed worst errors matter); (2) A/B default vs f8s at 8 / 16 heads, both
# layouts, 512 tokens; gluon_ws vs gluon_rx + f8s at 32 heads; (3) only if (1) passed: issue 3's decode rows with
# f8s, FlashMLA in the same process (part 2: run it only after part 1's tests passed).
# Two device calls (each under the 600 s limit): part 1 = (1) + (2), ~8 min; part 2 = (3), ~4 min.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s18_f8s.sh 1|2   (log $OUT/f8.log, results under $OUT/r, $OUT/r.tgz)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_PF_CONFIG DSATTN_SPARSE_MLA_IMPL DSATTN_GROUPING_IMPL DSATTN_RX_CONFIG DSATTN_RX_F8S
R=$OUT/r; mkdir -p $R; L=$OUT/f8.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
PART=${1:-1}
if [ "$PART" = 1 ]; then
timeout 240 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -v -s -p no:cacheprovider -rfEs -k "f8s and c2" \
  > $R/t_f8s.log 2>&1
T=$?
echo "f8s GPU tests rc=$T" >> $L; grep -E "f8s .*err|PASSED|FAILED|passed|failed" $R/t_f8s.log | tail -n 60 >> $L
tar -czf $OUT/r.tgz -C $OUT r
for lay in fp8_ds_mla fp8_ds_mla_nope; do
  for h in 8 16; do
    timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens 512 --heads $h --layout $lay \
      --a env:DSATTN_RX_F8S=0 --b env:DSATTN_RX_F8S=1 --name ab_s18_f8s_${lay}_h$h --out $R > $R/ab_${lay}_h$h.log 2>&1
    echo "ab f8s $lay $h heads rc=$?" >> $L; tail -n 4 $R/ab_${lay}_h$h.log >> $L
    tar -czf $OUT/r.tgz -C $OUT r
  done
done
timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens 512 --heads 32 \
  --a env:DSATTN_SPARSE_MLA_IMPL=gluon_ws --b env:DSATTN_SPARSE_MLA_IMPL=gluon_rx,env:DSATTN_RX_F8S=1 \
  --name ab_s18_f8s_h32 --out $R > $R/ab_h32.log 2>&1
echo "ab gluon_ws vs gluon_rx f8s, 32 heads rc=$?" >> $L; tail -n 4 $R/ab_h32.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
exit 0
fi
for n in 512 2048; do
  DSATTN_RX_F8S=1 timeout 150 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16,32,64,128 \
    --tokens $n --impl auto --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s18_f8s_decode_$n > $R/dec_$n.log 2>&1
  echo "decode $n with f8s rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/dec_$n.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
done
