#!/usr/bin/env bash
# Session 23, device call 3 (one H200): (1) gluon_ws config release (6th field of DSATTN_WS_CONFIG): the consumer waits
# for P V(b - 1) and frees its tile before waiting for block b, not after. Why: with ahead 2 (calls 1-2) the producer
# alone is 0.240 ms, the consumer alone 0.227, the whole kernel 0.331 (timing builds, bench/logs/s23_ws.log); at 32
# heads a program the ring has two fp16 tiles, so the producer converting block b + 1 needs the tile of b - 1, which
# the consumer frees only once block b's tile has arrived: when the consumer waits on the producer, the hand-back of
# the other tile waits too. Compile check: no spill, no wgmma serialization. PREDICTION: 1.00-1.04x at 32 heads;
# bit-equal. (2) Issue 3's 32-head decode rows (FlashMLA in the same process, 3 alternating rounds) at this tree's
# default (ahead 2), then with release 1 set (its nope rows then run 2 stages, not nope's default 3).
# OUTCOME (bench/logs/s23_ws3.log): release made no difference (1.006x / 0.997x, nope 1.004x) and was removed (this
# script needs 351ce64 for its A/Bs); the 32-head rows at the default: 1.34x / 1.32x FlashMLA.
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s23_ws3.sh   (log $OUT/ws3.log, results under $OUT/r, $OUT/r.tgz; ~7 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG DSATTN_G64_CONFIG
R=$OUT/r; mkdir -p $R; L=$OUT/ws3.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
ab() {  # layout heads configB name [tokens]
  timeout 80 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${5:-512} --heads $2 --layout $1 \
    --b env:DSATTN_WS_CONFIG=$3 --name ab_s23_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab default vs $3 ($1, $2 heads, ${5:-512} tokens) rc=$?" >> $L; tail -n 3 $R/ab_$4.log | head -n 2 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
rows() {  # tokens name
  timeout 100 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 32 --tokens $1 \
    --impl auto --rounds 3 --rep-ms 20 --out $R --name $2 > $R/$2.log 2>&1
  echo "decode rows $1 ($2) rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/$2.log >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab fp8_ds_mla 32 2/128/4/0/2/1 release_fp8_h32
timeout 200 python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE -k "ws_ahead or ws_matches" \
  > $R/t_ws3.log 2>&1
echo "ws GPU tests rc=$?" >> $L; tail -n 4 $R/t_ws3.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
ab fp8_ds_mla_nope 32 3/128/4/0/2/1 release_nope_h32
ab fp8_ds_mla 32 2/128/4/0/2/1 release_fp8_h32_2048 2048
rows 512 sparse_mla_s23_decode32_512
rows 2048 sparse_mla_s23_decode32_2048
export DSATTN_WS_CONFIG=2/128/4/0/2/1
rows 512 sparse_mla_s23_decode32_release_512
rows 2048 sparse_mla_s23_decode32_release_2048
