#!/usr/bin/env bash
# Runs GPU test files whole, split round-robin by test id into N pytest processes that share the one GPU (the tests
# are mostly kernel compiles, which are CPU-bound and single-threaded per process), each under a time limit.
#   N=8 LIMIT=540 bash bench/gpu_tests_sharded.sh OUTDIR tests/gpu/test_a.py [tests/gpu/test_b.py ...]
# K (optional): a pytest -k expression selecting the tests to run (all of them when unset).
# Writes OUTDIR/shard_K.log (pytest -rfE output) and OUTDIR/summary.log (each shard's last line and rc, failures).
set -u
out=$1; shift; mkdir -p "$out"
N=${N:-8}; LIMIT=${LIMIT:-540}
python -m pytest --collect-only -q -p no:cacheprovider ${K:+-k "$K"} "$@" 2>/dev/null | grep '::' > "$out/ids.txt"
echo "$(wc -l < "$out/ids.txt") tests in $N shards, limit ${LIMIT}s: $*" > "$out/summary.log"
for k in $(seq 0 $((N - 1))); do
  awk -v n="$N" -v k="$k" 'NR % n == k' "$out/ids.txt" > "$out/ids_$k.txt"
  ( timeout "$LIMIT" python -m pytest -q -p no:cacheprovider -rfE $(cat "$out/ids_$k.txt") > "$out/shard_$k.log" 2>&1
    echo "shard $k rc=$? $(tail -n 1 "$out/shard_$k.log")" >> "$out/summary.log" ) &
done
wait
grep -hE "^(FAILED|ERROR)" "$out"/shard_*.log >> "$out/summary.log" || true
