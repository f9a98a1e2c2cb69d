#!/usr/bin/env bash
# Session 21, device call 1 (one H200): gluon_rx config vst (RxConfig's 15th field, _store_ot_phys): the epilogue
# permutes O^T's accumulator rows into physical order (a relabelling of registers, assert_trivial) so that each thread
# stores 16 contiguous physical columns of a head as two 16-byte vectors, where _store_ot stores 2-byte elements
# whose lanes fall in 32 different 32-byte sectors an instruction.
# WHY: session 19's ncu profile of the 8-head nope decode (bench/logs/s19_profile/nope8_details.txt) counts 11.1 M
# of its 30.0 M L2 sectors as excessive (37%); by the code the scattered epilogue is ~4096 sector writes a program
# (2.1 M of the launch) where 512 do, and its store instructions run at the end of every program, at one CTA an SM
# (8 heads) with nothing else on the SM. Compile check (bench/mla_gluon_check.py --kernel rx, sm_90a): 32 st.global.b16
# -> 4 st.global.v4 a thread at 8-head programs (64 -> 8 at 16, two CTAs), registers, spills and shared-memory
# traffic unchanged. PREDICTION: 8 heads 512 tokens 1-4% faster (both layouts), 16 heads 0-3%, 2048 tokens about
# half of that; outputs bit-equal (GPU test test_rx_vst_bit_equal).
# Then Nsight Compute's per-instruction excessive L2 sectors of the 8-head nope decode with vst, to find the rest.
#   bash bench/gpu_s21_vst.sh   (log $OUT/vst.log, results under $OUT/r, $OUT/r.tgz; ~7-9 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/vst.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
timeout 230 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py -q -p no:cacheprovider -rfEs \
  -k "rx_hang_guard or vst" > $R/t_vst.log 2>&1
echo "vst GPU tests rc=$?" >> $L; tail -n 6 $R/t_vst.log >> $L
tar -czf $OUT/r.tgz -C $OUT r
ab() {  # layout heads config name [tokens]
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${5:-512} --heads $2 --layout $1 \
    --b env:DSATTN_RX_CONFIG=$3 --name ab_s21_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab default vs $3 ($1, $2 heads, ${5:-512} tokens) rc=$?" >> $L; tail -n 3 $R/ab_$4.log | head -n 2 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
ab fp8_ds_mla_nope 8 5/48/4/0/1/2/0/0/1/1/0/0/2/1/1 vst_nope_h8
ab fp8_ds_mla 8 4/56/4/0/1/2/0/0/1/1/0/0/0/0/1 vst_fp8_h8
ab fp8_ds_mla 16 2/48/4/0/1/1/0/0/1/0/0/128/0/0/1 vst_fp8_h16
ab fp8_ds_mla_nope 16 2/48/4/0/1/1/0/0/1/0/0/128/0/0/1 vst_nope_h16
ab fp8_ds_mla_nope 8 5/48/4/0/1/2/0/0/1/1/0/0/2/1/1 vst_nope_h8_2048 2048
ab fp8_ds_mla 8 4/56/4/0/1/2/0/0/1/1/0/0/0/0/1 vst_fp8_h8_2048 2048
ab fp8_ds_mla 16 2/48/4/0/1/1/0/0/1/0/0/128/0/0/1 vst_fp8_h16_2048 2048
command -v ncu > /dev/null || { echo "no ncu" >> $L; exit 0; }
DSATTN_RX_CONFIG=5/48/4/0/1/2/0/0/1/1/0/0/2/1/1 timeout 150 ncu --clock-control none -k regex:sparse_mla_rx2_kernel \
  -s 1 -c 1 --section SourceCounters --section MemoryWorkloadAnalysis_Tables --section SpeedOfLight -f -o $R/nope8v \
  python bench/ncu_cases.py --case decode-nope-8 > $R/ncu_nope8v.log 2>&1
echo "== ncu nope8 vst rc=$?" >> $L
ncu --import $R/nope8v.ncu-rep --page source --csv --print-source sass > $R/nope8v_source.csv 2> $R/nope8v_source.err
ncu --import $R/nope8v.ncu-rep --page details > $R/nope8v_details.txt 2>&1
rm -f $R/nope8v.ncu-rep
python bench/ncu_stalls.py $R/nope8v_source.csv --top 30 --column "excessive" > $R/nope8v_excess.txt 2>&1
head -n 40 $R/nope8v_excess.txt >> $L
grep -iE "excessive|Duration|L2 Cache Throughput|DRAM Throughput" $R/nope8v_details.txt | head -20 >> $L
tar -czf $OUT/r.tgz -C $OUT r
