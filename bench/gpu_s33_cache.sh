#!/usr/bin/env bash
# Session 33: the benchmark's own-context caches kept one at a time (kernels_mla.decode_case).
# Peak GPU memory (torch.cuda.max_memory_allocated) of the decode table at --decode-context 16384 (8 heads, both layouts,
# 512 and 2048 tokens, no FlashMLA, 1 round) as the tree has it (new) and with every case's rows kept alive to the end
# of the process (keep: what the module cache did before this session), each run followed by a fresh process timing the
# 16-head fp8_ds_mla row at 512 tokens over the shared pool (session 32: one process of 17 read it at 0.27-0.31 ms
# against 0.212-0.215, the one right after a process that held the big caches).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s33_cache.sh    (log $OUT/cache.log, results $OUT/r, packed $OUT/r.tgz)
LOG=cache.log TAG=s33
source bench/gpu_lib.sh
big() {  # keep(0/1) name
  KEEP=$1 timeout 300 python - --op sparse_mla --cases decode --heads 8 --decode-context 16384 --no-peer --rounds 1 \
    --rep-ms 20 --out $R --name sparse_mla_s33_$2 > $R/$2.log 2>&1 <<'PY'
import os, sys
import torch
from dsattn.bench import kernels_mla as km
kept = []
if os.environ["KEEP"] == "1":
    build = km.decode_case
    def keep_case(*a, **k):
        case = build(*a, **k)
        kept.append(case.kv)
        return case
    km.decode_case = keep_case
rc = km.run("sparse_mla", sys.argv[3:])
print(f"peak_allocated_bytes {torch.cuda.max_memory_allocated()} peak_reserved_bytes {torch.cuda.max_memory_reserved()}")
sys.exit(rc)
PY
  echo "$2 (keep $1) rc=$? $(grep peak_ $R/$2.log)" >> $L
}
h16() {  # name
  timeout 90 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 16 --tokens 512 --rounds 5 \
    --rep-ms 20 --no-peer --out $R --name sparse_mla_s33_$1 > $R/$1.log 2>&1
  echo "$1 rc=$? $(grep -E 'fp8_ds_mla +512 +16 +dsattn:native' $R/$1.log | awk '{print $7}')" >> $L
}
for i in 1 2; do
  big 1 keep$i; h16 h16_after_keep$i; pack
  big 0 new$i; h16 h16_after_new$i; pack
done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader >> $L
pack
