#!/usr/bin/env bash
# Session 24, device call 1 (one H200): gluon_ws config pingpong (DSATTN_WS_CONFIG's 6th field): two consumer
# warpgroups take every other block whole, each always on its own fp16 tile slot (the producer already fills slot
# b % 2), P^T over the tile's RoPE part (dead once S^T retired), one merge at the end through the idle tile. Why: the
# ncu profile of session 23 has the one consumer setting the pace (alone 0.227 ms; producer alone 0.240; whole kernel
# 0.331 at 512 tokens): a second, independent chain runs its products while the first runs its softmax, with no third
# tile (each consumer waits for the producer to refill its own slot). Compile check (sm_90a, Triton's ptxas): smem
# 227,632 B (fp8_ds_mla) / 207,152 B (nope, 2 stages), no wgmma serialization, hot loops spill-free; 52 B of spills in
# the epilogue after the loops at producer 112 registers (consumers 192 / 200). PREDICTION: 32 heads fp8_ds_mla 512
# tokens 0.33 -> 0.26-0.30 ms (the producer's 0.24 the floor), i.e. 1.10-1.25x in the A/B; outputs within 1e-2 / 1e-6
# of the default (another accumulation order).
# OUTCOME (bench/logs/s24_pp.log): right, and 0.94x / 0.92x (nope); removed. Needs 9a9fdfa (pingpong and its test).
#   bash bench/gpu_s24_pp.sh   (log $OUT/pp.log, results under $OUT/r, $OUT/r.tgz; ~9 min)
LOG=pp.log source bench/gpu_s24_lib.sh
rows() {  # tokens name
  timeout 110 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 32 --tokens $1 \
    --impl auto --rounds 3 --rep-ms 20 --out $R --name $2 > $R/$2.log 2>&1
  echo "decode rows $1 ($2) rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/$2.log >> $L
  pack
}
T="python -m pytest tests/gpu/test_sparse_mla_gpu.py -q -p no:cacheprovider -rfE -s"
# hang guard: one case per layout first
timeout 150 $T -k "ws_pingpong and gluon_ws and 32 and 2000" > $R/t_guard.log 2>&1
rc=$?; echo "guard rc=$rc" >> $L; grep -E "pingpong vs|passed|failed|Error" $R/t_guard.log | tail -n 8 >> $L; pack
[ $rc -eq 124 ] && exit 1
ab fp8_ds_mla 32 2/112/4/0/2/1 pp112_fp8_h32
ab fp8_ds_mla 32 2/96/4/0/2/1 pp96_fp8_h32
ab fp8_ds_mla_nope 32 3/112/4/0/2/1 pp112_nope_h32
ab fp8_ds_mla 32 2/112/4/0/2/1 pp112_fp8_h32_2048 2048
timeout 170 $T -k "ws_pingpong and gluon_ws" > $R/t_pp.log 2>&1
echo "pingpong GPU tests rc=$?" >> $L; grep -E "pingpong vs" $R/t_pp.log | sort | tail -n 4 >> $L
tail -n 3 $R/t_pp.log >> $L; pack
export DSATTN_WS_CONFIG=2/112/4/0/2/1
rows 512 sparse_mla_s24_decode32_pp_512
