"""Small-batch decode split-K: time each split count against none and against the plan (dispatch.decode_splits), per
head count, layout, variant and token count.

The decode plan dates from the first kernels (each part >= 256 keys, programs x parts <= 2 x SMs) and was never swept;
session 38's prefill sweep found 1-8 tokens wanting 16-32 parts of 2048 keys (a 64-key minimum). Below one wave of
programs (small-batch decode: the latency regime of a serving engine) the same may hold here.

Each arm runs launch.run_attention (the kernel auto picks, split into the arm's parts, then the combine) over the
calibration's decode case (backend/calibrate.py: `uniform` indices over one 131072-slot paged cache), as a CUDA-graph
replay (GPU time only, as a captured decode step); the arms are timed alternately (--rounds, do_bench medians), and each
row records the largest difference of its outputs from the unsplit arm's. Writes bench/results/<--name>.json.

    PYTHONPATH=src python bench/decode_splits_sweep.py [--heads 8,64] [--tokens 1,8] [--splits 1,2,4,8,16,32]
"""
from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace

import torch

from dsattn.backend import calibrate, policy
from dsattn.bench.common import graph_replay, time_ms, warm_up_gpu, write_results
from dsattn.ops._triton import sm_count
from dsattn.ops.sparse_mla.dispatch import DEFAULT_SM_COUNT, decode_splits
from dsattn.ops.sparse_mla.launch import run_attention


def _arm(case, variant: str, splits: int):
    """A graph replay of the decode in `splits` parts, and its outputs."""
    t, h = case.tokens, case.heads
    dev = case.q.device
    out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=dev)
    lse = torch.empty((t, h), dtype=torch.float32, device=dev)
    part_o = torch.empty((t, splits, h, 512), dtype=torch.float32, device=dev) if splits > 1 else None
    part_lse = torch.empty((t, splits, h), dtype=torch.float32, device=dev) if splits > 1 else None
    flat = case.kv.flatten(0, 1)

    def fn():
        run_attention(case.q, flat, case.layout, case.indices, case.sm_scale, None, out, lse, variant, splits,
                      part_o, part_lse)
    return graph_replay(fn), out, lse


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", default="8,16,32,64,128")
    ap.add_argument("--tokens", default="1,4,16,32,64")
    ap.add_argument("--splits", default="1,2,4,8,16,32")
    ap.add_argument("--layouts", default="fp8_ds_mla,fp8_ds_mla_nope")
    ap.add_argument("--variants", default="native,pad64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=float, default=10.0)
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--slots", type=int, default=131072)
    ap.add_argument("--name", default="decode_splits_sweep")
    ap.add_argument("--out", default=None, help="results folder (default bench/results)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        print("decode_splits_sweep: needs a CUDA GPU (or TRITON_INTERPRET=1 for a tiny functional run)")
        return 2
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sm = sm_count(dev, DEFAULT_SM_COUNT)
    cargs = SimpleNamespace(device=dev.type, topk=args.topk, slots=args.slots, block_size=64)
    counts = [int(x) for x in args.splits.split(",")]
    warm_up_gpu()
    rows, cache = [], {}
    for layout in args.layouts.split(","):
        for heads in (int(x) for x in args.heads.split(",")):
            offered = policy.variants("decode", heads, layout)
            for variant in (v for v in args.variants.split(",") if v in offered):
                for tokens in (int(x) for x in args.tokens.split(",")):
                    case = calibrate._case(f"decode/{layout}", tokens, heads, cargs, cache)
                    plan = decode_splits(tokens, heads, args.topk, variant, sm)
                    arms = {s: _arm(case, variant, s) for s in sorted(set(counts) | {plan})}
                    times = {k: [] for k in arms}
                    for _ in range(args.rounds):
                        for k, (fn, _, _) in arms.items():
                            times[k].append(time_ms(fn, warmup_ms=args.rep_ms / 3, rep_ms=args.rep_ms))
                    if dev.type == "cuda":
                        torch.cuda.synchronize()
                    base_out, base_lse = arms[1][1].float(), arms[1][2]
                    fin = torch.isfinite(base_lse)
                    for k, (_, out, lse) in arms.items():
                        ts = sorted(times[k])
                        rows.append({"layout": layout, "heads": heads, "variant": variant, "tokens": tokens,
                                     "splits": k, "plan": plan, "ms": ts[len(ts) // 2], "ms_rounds": times[k],
                                     "max_abs_out_diff_vs_unsplit": float((out.float() - base_out).abs().max()),
                                     "max_abs_lse_diff_vs_unsplit": float((lse[fin] - base_lse[fin]).abs().max())
                                     if fin.any() else 0.0})
                    line = "  ".join(f"{k}:{sorted(times[k])[len(times[k]) // 2]:.4f}" for k in arms)
                    best = min(arms, key=lambda k: sorted(times[k])[len(times[k]) // 2])
                    print(f"{layout:15s} heads {heads:3d} {variant:6s} tokens {tokens:4d} plan {plan:2d} best {best:2d}"
                          f"  {line}", flush=True)
                    del arms
    path = write_results(args.name, rows, out_dir=args.out,
                         meta={"sm_count": sm, "topk": args.topk, "slots": args.slots, "dist": "uniform",
                               "how": "CUDA-graph replays of launch.run_attention, arms alternately, rounds x "
                                      "do_bench medians, the median round"})
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
