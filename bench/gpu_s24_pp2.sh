#!/usr/bin/env bash
# Session 24, device call 2 (one H200), at 9a9fdfa (gluon_ws pingpong present, off by default; the default kernels'
# sm_90a PTX is identical to the session start's outside debug info): call 1 (bench/logs/s24_pp.log) found pingpong
# right (27 GPU tests) and SLOWER, 0.944x at 512 tokens (producer 112 registers), 0.942x (96), nope 0.919x, 2048 tokens
# 0.940x. (1) If each consumer waits for the producer to refill its own slot, a producer of 8 warps (converting twice
# as fast) should move it: A/B of 2/64/8/0/1/1 (no spill) and 2/64/8/0/2/1 (34 B of producer spills). PREDICTION:
# no better than 1.0x (a guess: what limits is not known). (2) Nsight Compute source counters of pingpong 2/112/4/0/2/1
# (where its partitions wait). (3) Issue 3's decode rows at 512 tokens (every head count, FlashMLA beside them).
# OUTCOME (bench/logs/s24_pp2.log): 0.951x / 0.876x; consumers spin on `full` ~1/3 of their samples. Needs 9a9fdfa.
#   bash bench/gpu_s24_pp2.sh   (log $OUT/pp2.log, results under $OUT/r, $OUT/r.tgz; ~8 min)
LOG=pp2.log source bench/gpu_s24_lib.sh
ab fp8_ds_mla 32 2/64/8/0/1/1 pp64w8a1_fp8_h32
ab fp8_ds_mla 32 2/64/8/0/2/1 pp64w8_fp8_h32
if command -v ncu > /dev/null; then
  n=pp_dc32
  DSATTN_WS_CONFIG=2/112/4/0/2/1 timeout 150 ncu --clock-control none -k regex:"sparse_mla_ws_kernel" -s 1 -c 1 \
    --section SourceCounters -f -o $R/$n python bench/ncu_cases.py --case decode-fp8-32 > $R/ncu_$n.log 2>&1
  echo "== ncu $n rc=$?" >> $L
  ncu --import $R/$n.ncu-rep --page source --csv --print-source sass > $R/${n}_source.csv 2> $R/${n}_source.err
  ncu --import $R/$n.ncu-rep --page details > $R/${n}_details.txt 2>&1
  python bench/ncu_stalls.py $R/${n}_source.csv --top 40 > $R/${n}_stalls.txt 2>&1
  head -n 60 $R/${n}_stalls.txt >> $L
  rm -f $R/$n.ncu-rep $R/${n}_source.csv
  pack
fi
timeout 130 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8,16,32,64,128 --tokens 512 \
  --impl auto --rounds 3 --rep-ms 20 --out $R --name sparse_mla_s24_decode_512 > $R/decode_512.log 2>&1
echo "decode 512 rc=$?" >> $L; grep -E "dsattn:|flashmla:" $R/decode_512.log >> $L
pack
