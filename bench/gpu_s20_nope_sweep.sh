#!/usr/bin/env bash
# Session 20, device call 4 (one H200): the 8-head fp8_ds_mla_nope decode (1.116x of fp8_ds_mla in call 2, issue 3
# asks 1.15x) around its new default 5/56/4/0/1/2/0/0/1/1/0/0/2/1: one field changed at a time, `dsattn bench ab`
# against the default, 512 tokens. No prediction with confidence (a sweep).
#   bash bench/gpu_s20_nope_sweep.sh [2|3]   (2 / 3: calls 5 / 7, sweeps around producer 48 registers;
#   log $OUT/sw.log, results under $OUT/r, $OUT/r.tgz; ~1-2 min)
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS
R=$OUT/r; mkdir -p $R; L=$OUT/sw.log
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
ab() {  # config name [tokens]
  timeout 60 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${3:-512} --heads 8 \
    --layout fp8_ds_mla_nope --b env:DSATTN_RX_CONFIG=$1 --name ab_s20_sw_$2 --out $R > $R/ab_$2.log 2>&1
  echo "ab default vs $1 rc=$?" >> $L; tail -n 3 $R/ab_$2.log | head -n 2 >> $L
  tar -czf $OUT/r.tgz -C $OUT r
}
if [ "${1:-1}" = 3 ]; then  # call 7: against the default of 1339a3b (producer 48 registers): 8 producer warps, alu 2
  ab 5/48/8/0/1/2/0/0/1/1/0/0/2/1 w8r48
  ab 5/40/8/0/1/2/0/0/1/1/0/0/2/1 w8r40
  ab 5/32/8/0/1/2/0/0/1/1/0/0/2/1 w8r32
  ab 5/48/4/0/1/2/2/0/1/1/0/0/2/1 alu2
  exit 0
fi
if [ "${1:-1}" = 2 ]; then  # call 5: around producer 48 registers (call 4: 1.018x)
  ab 5/48/4/0/1/2/0/0/1/1/0/0/2/1 regs48_2048 2048
  ab 5/40/4/0/1/2/0/0/1/1/0/0/2/1 regs40
  ab 5/32/4/0/1/2/0/0/1/1/0/0/2/1 regs32
  ab 5/48/4/0/1/2/0/0/1/1/0/0/0/1 regs48_idxpf0
  ab 6/48/4/0/1/2/0/0/1/1/0/0/2/1 regs48_stages6
  ab 5/48/4/0/1/2/0/0/1/1/0/0/2/1 regs48_again
  exit 0
fi
ab 5/64/4/0/1/2/0/0/1/1/0/0/2/1 regs64
ab 5/48/4/0/1/2/0/0/1/1/0/0/2/1 regs48
ab 5/56/4/0/1/2/0/0/1/1/0/0/3/1 idxpf3
ab 5/56/4/0/1/2/0/0/1/1/1/0/2/1 spillfix1
ab 5/56/4/0/2/2/0/0/1/1/0/0/2/1 pvdepth2
ab 5/56/4/0/1/2/1/0/1/1/0/0/2/1 alu1
ab 4/56/4/0/1/2/0/0/1/1/0/0/2/1 stages4
ab 3/48/4/0/1/1/0/0/1/0/0/128/2/1 twocta3
ab 5/56/4/1/1/2/0/0/1/1/0/0/2/1 l2pf1
ab 5/56/4/0/1/2/0/0/1/1/0/0/1/1 idxpf1
