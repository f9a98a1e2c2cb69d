#!/usr/bin/env bash
# Session 10, last short device call (one H200): gluon_rx's ping-pong default at <= 8 heads (GPU tests, then the
# 8-head rows of issue 3's decode table beside FlashMLA) and the grouped prefill tests the final call's time limit cut.
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer:$PWD/../.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
R=$OUT/r; mkdir -p $R; L=$OUT/last.log
P="-q -p no:cacheprovider -rfEs"
(timeout 110 python -m pytest tests/gpu/test_sparse_mla_rx_gpu.py $P -x -k "pingpong or (c2 and (hang_guard or layouts_heads or split_k))" > $R/t_rx_pp.log 2>&1; echo "rc=$?" >> $R/t_rx_pp.log) &
(timeout 110 python -m pytest tests/gpu/test_sparse_mla_prefill_gpu.py $P -x -k "odd_topk or chunks" > $R/t_pf_rest.log 2>&1; echo "rc=$?" >> $R/t_pf_rest.log) &
wait
for f in $R/t_*.log; do echo "== $f" >> $L; grep -E "passed|failed|FAILED|Error|rc=" $f | tail -n 6 >> $L; done
tar -czf $OUT/r.tgz -C $OUT r
timeout 60 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 8 --tokens 512,2048 \
  --impl auto --rep-ms 20 --out $R --name sparse_mla_final_decode_h8 > $R/table_decode_h8.log 2>&1; echo "decode h8 rc=$?" >> $L
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $R
