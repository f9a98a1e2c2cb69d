"""``dsattn calibrate``: time each sparse MLA kernel's head variants on this GPU and write the table the
head-dispatch policy reads (``policy.load_table``).

For every kernel (``prefill`` over a bf16 context, ``decode/<layout>`` over fp8 caches; ``decode/bf16`` when asked),
every head count that has a choice (default 8, 16, 32 heads per rank) and every token count of a grid, the variants run
alternately (three rounds, CUDA-event medians); the faster wins. Each (kernel, heads) becomes buckets
of token counts (``policy.buckets_from_winners``). Indices follow BENCHMARKS.md: decode ``uniform`` over
a 131072-slot cache, prefill ``overlap`` over a 16384-token context, topk 2048.

    PYTHONPATH=src python -m dsattn.cli calibrate --out bench/results/calibration_h200.json

The JSON also keeps every timing (rows) and the run's provenance. Passing the file (or the loaded dict)
as ``DSAAttention(calibration=...)`` makes the backend follow it.
"""
from __future__ import annotations

import argparse
import json
import os

import torch

from ..formats import KVLayout, pack_latent_rows
from ..ops._triton import sm_count
from ..ops.sparse_mla.dispatch import DEFAULT_SM_COUNT
from . import policy

KERNELS = ("prefill", "decode/fp8_ds_mla", "decode/fp8_ds_mla_nope")
# on request only (--kernels): the decode kernel over a paged bf16 cache, which the backend runs only with
# DSAAttention.bf16_decode_kernel 'decode' (an A/B knob; its default sends a bf16 cache's decode rows to the prefill
# kernel)
EXTRA_KERNELS = ("decode/bf16",)
TOKENS = (32, 64, 128, 256, 512, 1024, 2048, 4096)
HEADS = (8, 16, 32)


def _case(kernel: str, tokens: int, heads: int, args, cache: dict):
    """A kernels_mla.Case for one measurement (contexts and indices shared across head counts)."""
    from ..bench.kernels_mla import Case, overlap_indices, uniform_indices
    dev = args.device
    g = torch.Generator(device=dev).manual_seed(tokens * 131 + heads)
    if kernel == "prefill":
        d_qk, layout, dist = 576, KVLayout.BF16, "overlap"
        if "prefill" not in cache:
            cache["prefill"] = (torch.randn(args.s_kv, d_qk, generator=g, device=dev) * 0.5).bfloat16()
        if ("overlap", tokens) not in cache:
            cache["overlap", tokens] = overlap_indices(min(tokens, args.s_kv), args.s_kv, args.topk, dev, seed=tokens)
        kv, idx = cache["prefill"], cache["overlap", tokens]
        tokens = idx.shape[0]
    else:
        layout = KVLayout(kernel.split("/")[1])
        d_qk, dist = (512 if layout is KVLayout.FP8_DS_MLA_NOPE else 576), "uniform"
        if layout not in cache:
            rows = pack_latent_rows(torch.randn(args.slots, d_qk, generator=g, device=dev) * 0.5, layout)
            cache[layout] = rows.view(args.slots // args.block_size, args.block_size, rows.shape[1])
        if ("uniform", tokens) not in cache:
            cache["uniform", tokens] = uniform_indices(tokens, args.slots, args.topk, dev, seed=tokens)
        kv, idx = cache[layout], cache["uniform", tokens]
    q = (torch.randn(tokens, heads, d_qk, generator=g, device=dev) * 0.5).bfloat16()
    return Case(kernel.split("/")[0], layout, tokens, heads, d_qk, q, kv, idx, d_qk ** -0.5, dist)


def measure(args) -> list[dict]:
    """One row per (kernel, heads, tokens, variant): median ms."""
    from ..bench.common import graph_replay, time_pair_ms
    from ..bench.kernels_mla import ours
    rows, cache = [], {}
    for kernel in args.kernels:
        base = kernel.split("/")[0]
        for heads in args.heads:
            offered = policy.variants(base, heads, kernel.split("/")[1] if "/" in kernel else None)
            if len(offered) < 2:
                continue
            for tokens in args.tokens:
                case = _case(kernel, tokens, heads, args, cache)
                fns = {v: ours(case, v)[0] for v in offered[:2]}
                if args.graph:
                    fns = {v: graph_replay(fn) for v, fn in fns.items()}
                a, b = offered[:2]
                ms = dict(zip((a, b), time_pair_ms(fns[a], fns[b], rounds=3, warmup_ms=args.rep_ms / 3,
                                                   rep_ms=args.rep_ms)))
                for v in offered[:2]:
                    rows.append({"kernel": kernel, "heads": heads, "tokens": case.tokens, "variant": v,
                                 "ms": ms[v], "dist": case.dist})
                print(f"{kernel:24s} heads {heads:3d} tokens {case.tokens:5d}  "
                      + "  ".join(f"{v} {ms[v]:.3f} ms" for v in offered[:2]), flush=True)
    return rows


def table_from_rows(rows: list[dict]) -> dict:
    """{kernel: {heads: buckets}} from measured rows: the faster variant at each token count."""
    best: dict = {}
    for r in rows:
        key = (r["kernel"], r["heads"], r["tokens"])
        if key not in best or r["ms"] < best[key]["ms"]:
            best[key] = r
    table: dict = {}
    for (kernel, heads, tokens), r in sorted(best.items()):
        table.setdefault(kernel, {}).setdefault(str(heads), []).append((tokens, r["variant"]))
    return {k: {h: policy.buckets_from_winners(w) for h, w in per.items()} for k, per in table.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dsattn calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join("bench", "results", "calibration_h200.json"))
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS + EXTRA_KERNELS)
    ap.add_argument("--heads", nargs="+", type=int, default=list(HEADS))
    ap.add_argument("--tokens", nargs="+", type=int, default=list(TOKENS))
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--s-kv", type=int, default=16384, help="prefill context (bf16 keys)")
    ap.add_argument("--slots", type=int, default=131072, help="decode cache slots")
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--rep-ms", type=float, default=30.0, help="timing window of each measurement")
    ap.add_argument("--graph", action="store_true",
                    help="time CUDA-graph replays of each variant (GPU time only, as a captured serving step runs; "
                         "without it eager calls, whose host cost dominates below ~512 tokens: notes/backend.md). "
                         "bench/results/calibration_h200.json was measured so (sessions 12, 20 and 21)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    if torch.device(args.device).type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        print("dsattn calibrate: needs a CUDA GPU (or TRITON_INTERPRET=1 for a tiny functional run)")
        return 2
    from ..bench.common import provenance
    rows = measure(args)
    sm = sm_count(torch.device(args.device), DEFAULT_SM_COUNT)
    data = {"provenance": provenance(), "sm_count": sm,
            "meta": {"topk": args.topk, "prefill_s_kv": args.s_kv, "decode_slots": args.slots,
                     "block_size": args.block_size, "rep_ms": args.rep_ms, "graph": args.graph,
                     "how": "variants timed alternately, 3 rounds, median of CUDA-event medians"},
            "table": table_from_rows(rows), "rows": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(data, f, indent=1)
    print(f"table -> {args.out}")
    for kernel, per in data["table"].items():
        for heads, buckets in per.items():
            print(f"  {kernel:24s} {heads:>3s} heads: " + ", ".join(
                f"<= {b['max_tokens']}: {b['variant']}" if b["max_tokens"] is not None else f"then {b['variant']}"
                for b in buckets))
    return 0
