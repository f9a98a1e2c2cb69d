"""Sparse MLA kernel development on the GPU, in one call: correctness, tile-config sweep, side by side.

    export PYTHONPATH=$PWD/src:$PWD/.peer:$PYTHONPATH; python bench/mla_sweep.py --out $OUT

1. pytest tests/gpu/test_sparse_mla_gpu.py in the background (logs: $OUT/gpu_tests*.log);
2. compile every (case, config) of the sweep in parallel worker processes (Triton's on-disk cache then
   serves the timing process), failures logged;
3. time each config on its case (decode 512 tokens fp8, prefill s_q 1024 overlap), keep the best;
4. time dsattn with the best configs beside FlashMLA on the full case list;
5. write $OUT/sweep.json and print a compact table last.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

import torch

from dsattn.bench import kernels_mla as km
from dsattn.bench.common import format_table, provenance, time_ms
from dsattn.ops.sparse_mla.dispatch import heads_per_program
from dsattn.ops.sparse_mla.launch import TileConfig

C = TileConfig

# (kind, layout, heads, tokens, variant) -> configs, pruned with bench/mla_compile_check.py (no spills,
# or a few bytes). Heads stand for their tile: 8 -> 16-wide keys-on-M, 32 -> 32-wide, 64 -> 64-head blocks.
SWEEP = {
    ("decode", "fp8_ds_mla", 8, 512, "native"): [C(32, 4, 2), C(32, 4, 3), (C(32, 4, 2), 2), (C(32, 4, 2), 4),
                                                 C(16, 4, 2)],
    ("decode", "fp8_ds_mla_nope", 8, 512, "native"): [C(32, 4, 2), C(32, 4, 3), C(16, 4, 2)],
    ("decode", "fp8_ds_mla", 32, 512, "native"): [C(16, 4, 2), (C(16, 4, 2), 2), C(16, 8, 2)],
    ("decode", "fp8_ds_mla", 64, 512, "native"): [C(64, 8, 2), C(64, 8, 3), (C(64, 8, 2), 2)],
    ("prefill", "bf16", 8, 1024, "native"): [C(32, 4, 2), C(32, 4, 3), C(64, 4, 2), C(16, 4, 2)],
    ("prefill", "bf16", 32, 1024, "native"): [C(64, 8, 3), C(64, 8, 2), C(16, 4, 2), C(32, 4, 3)],
    ("prefill", "bf16", 64, 1024, "native"): [C(64, 8, 2), C(64, 8, 3)],
}


def _case(kind, layout, heads, tokens, device):
    return km.decode_case(tokens, heads, layout, device) if kind == "decode" else km.prefill_case(tokens, heads, device)


def _entry(e):
    """A sweep entry: a TileConfig, or (TileConfig, forced split-K count)."""
    return e if isinstance(e, tuple) else (e, None)


def _compile_job(job):
    """Worker: run one config once on a small case of the same specialization (fills Triton's cache)."""
    (kind, layout, heads, tokens, variant), entry = job
    cfg, splits = _entry(entry)
    t0 = time.time()
    try:
        dev = torch.device("cuda")
        if kind == "decode":
            case = km.decode_case(8, heads, layout, dev)
        else:
            case = km.prefill_case(8, heads, dev)
        fn, out, lse = km.ours(case, variant, config=cfg, splits=splits)
        fn()
        torch.cuda.synchronize()
        return job, None, time.time() - t0
    except Exception as e:  # noqa: BLE001 - a config the compiler rejects is reported and dropped
        return job, f"{type(e).__name__}: {str(e)[:300]}", time.time() - t0


def precompile(jobs, workers):
    ctx = mp.get_context("spawn")
    failed = {}
    with cf.ProcessPoolExecutor(workers, mp_context=ctx) as ex:
        for job, err, dt in ex.map(_compile_job, jobs, chunksize=1):
            if err:
                failed[(job[0], job[1])] = err
                print(f"# compile failed {job[0]} {job[1]}: {err[:200]}", file=sys.stderr)
    return failed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/mla_sweep"))
    p.add_argument("--workers", type=int, default=14)
    p.add_argument("--no-tests", action="store_true")
    p.add_argument("--only", default=None, help="comma list of kinds to sweep (decode,prefill)")
    p.add_argument("--rep-ms", type=float, default=60)
    p.add_argument("--no-table", action="store_true", help="stop after the sweep (the side-by-side table is "
                   "dsattn bench kernels --op sparse_mla)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    tests = []
    if not args.no_tests:  # three processes: Triton compiles each one's kernels on its own CPU core
        for i, sel in enumerate(["prefill", "decode_layouts", "not prefill and not decode_layouts"]):
            log = open(os.path.join(args.out, f"gpu_tests{i}.log"), "w")
            tests.append(subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-k", sel,
                                           "tests/gpu/test_sparse_mla_gpu.py"], stdout=log, stderr=subprocess.STDOUT))
    sweep = {k: v for k, v in SWEEP.items() if not args.only or k[0] in args.only.split(",")}
    jobs = [(key, cfg) for key, cfgs in sweep.items() for cfg in cfgs]
    failed = precompile(jobs, args.workers)
    print(f"# compiled {len(jobs)} configs in {time.time() - t_start:.0f}s, {len(failed)} failed", file=sys.stderr)
    for proc in tests:
        rc = proc.wait()
        print(f"# gpu tests rc={rc} after {time.time() - t_start:.0f}s", file=sys.stderr)

    dev = torch.device("cuda")
    sweep_rows, best = [], {}
    for key, cfgs in sweep.items():
        case = _case(*key[:4], dev)
        for entry in cfgs:
            if (key, entry) in failed:
                continue
            cfg, splits = _entry(entry)
            fn, out, lse = km.ours(case, key[4], config=cfg, splits=splits)
            fn()
            ms = time_ms(fn, rep_ms=args.rep_ms)
            sweep_rows.append({"case": "/".join(map(str, key)), **cfg.__dict__, "splits": splits, "ms": ms})
            if key not in best or ms < best[key][1]:
                best[key] = (cfg, ms)
        print(f"# best {key}: {best.get(key)}", file=sys.stderr)
    print(f"# sweep done after {time.time() - t_start:.0f}s", file=sys.stderr)
    with open(os.path.join(args.out, "sweep_partial.json"), "w") as f:
        json.dump({"sweep": sweep_rows, "failed": {f"{k[0]}|{k[1]}": v for k, v in failed.items()}}, f, default=str)

    for k, (cfg, ms) in best.items():
        print(f"best {'/'.join(map(str, k))}: {cfg} {ms:.4f} ms")
    print(open(os.path.join(args.out, "gpu_tests0.log")).read()[-300:] if tests else "")
    if args.no_table:
        return
    peers = km._peers()
    table = []

    def cfg_for(kind, layout, heads, variant):
        want = {16: 8, 32: 32, 64: 64}[heads_per_program(variant, heads)]
        for key, (cfg, _) in best.items():
            if key[0] == kind and key[1] == layout and key[2] == want:
                return cfg
        for key, (cfg, _) in best.items():  # same tile, other fp8 layout
            if key[0] == kind and key[2] == want:
                return cfg
        return None

    full = [("decode", "fp8_ds_mla", h, t) for t in (512, 2048) for h in (8, 16, 32, 64, 128)] + \
           [("decode", "fp8_ds_mla_nope", h, 512) for h in (8, 16, 32, 64)] + \
           [("prefill", "bf16", h, s) for s in (1024, 8192) for h in (8, 16, 32, 64, 128)]
    for kind, layout, h, t in full:
        if args.only and kind not in args.only.split(","):
            continue
        case = _case(kind, layout, h, t, dev)
        rows = []
        for variant in km._variants(kind, h):
            cfg = cfg_for(kind, layout, h, variant)
            fn, out, lse = km.ours(case, variant, config=cfg)
            fn()
            ms = time_ms(fn, rep_ms=args.rep_ms)
            rows.append({**km._row(case, f"dsattn:{variant}", ms), "config": None if cfg is None else cfg.__dict__})
        peer_rows = [r for r in km.measure_case(case, peers, [], rep_ms=args.rep_ms) if r["impl"].startswith("flash")]
        if peer_rows:
            bp = min(r["ms"] for r in peer_rows)
            for r in rows:
                r["flashmla_ms"], r["speedup"] = bp, bp / r["ms"]
        table += rows + peer_rows
        print(f"# {kind} {layout} h={h} t={t} done at {time.time() - t_start:.0f}s", file=sys.stderr)
    km._nope_vs_fp8(table)

    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump({"provenance": provenance(), "sweep": sweep_rows, "table": table,
                   "best": {"/".join(map(str, k)): [v[0].__dict__, v[1]] for k, v in best.items()},
                   "failed": {f"{k[0]}|{k[1]}": v for k, v in failed.items()}}, f, indent=1, default=str)
    with open(os.path.join(args.out, "sweep_table.txt"), "w") as f:
        f.write(format_table(sweep_rows, ["case", "block_n", "num_warps", "num_stages", "prefetch", "keys_m", "splits", "ms"]))
    for k, (cfg, ms) in best.items():
        print(f"best {'/'.join(map(str, k))}: {cfg} {ms:.4f} ms")
    short = [{**r, "layout": r["layout"].replace("fp8_ds_mla", "fp8"), "impl": r["impl"].replace("dsattn:", "ds:")
              .replace("flashmla:", "fm:")} for r in table]
    print(format_table(short, ["kind", "layout", "tokens", "heads", "impl", "ms", "tflops", "gbps", "pct_floor",
                               "speedup", "vs_fp8_ds_mla", "max_abs_vs_dsattn"]))
    for i in range(len(tests)):
        print(open(os.path.join(args.out, f"gpu_tests{i}.log")).read()[-800:])
    print(f"# total {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
