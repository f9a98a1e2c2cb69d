"""Short prefills split across programs: time each split count against none, per head count, variant and token count.

For every (heads, variant, tokens) the prefill (bf16 context of --s-kv tokens, `overlap` indices, topk 2048: the
calibration's case, backend/calibrate.py) runs with DSATTN_PREFILL_SPLITS forced to each count of --splits, and with
the plan (dispatch.prefill_splits, no forcing); each arm is a CUDA-graph replay (GPU time only, as a captured serving
step), the arms timed alternately (--rounds, CUDA-event medians). Each row also records the largest difference of its
outputs from the unsplit arm's. Writes bench/results/<--name>.json and prints a table.

    PYTHONPATH=src python bench/prefill_splits_sweep.py [--heads 8,64] [--tokens 32,256] [--splits 1,2,4,8]
"""
from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace

import torch

from dsattn.backend import calibrate, policy
from dsattn.bench.common import graph_replay, time_ms, warm_up_gpu, write_results
from dsattn.bench.kernels_mla import ours
from dsattn.ops._triton import sm_count
from dsattn.ops.sparse_mla.dispatch import DEFAULT_SM_COUNT, prefill_splits

ENV = "DSATTN_PREFILL_SPLITS"


def _arm(case, variant: str, splits: int | None):
    """A graph replay of the prefill with `splits` forced (None: the plan), and its outputs."""
    saved = os.environ.pop(ENV, None)
    try:
        if splits is not None:
            os.environ[ENV] = str(splits)
        fn, out, lse = ours(case, variant)
        fn = graph_replay(fn)
    finally:
        os.environ.pop(ENV, None)
        if saved is not None:
            os.environ[ENV] = saved
    return fn, out, lse


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", default="8,16,32,64,128")
    ap.add_argument("--tokens", default="1,8,32,64,128,256,512,1024")
    ap.add_argument("--splits", default="1,2,4,8,16,32")
    ap.add_argument("--variants", default="native,pad64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=float, default=10.0)
    ap.add_argument("--s-kv", type=int, default=16384)
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--name", default="prefill_splits_sweep")
    ap.add_argument("--out", default=None, help="results folder (default bench/results)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        print("prefill_splits_sweep: needs a CUDA GPU (or TRITON_INTERPRET=1 for a tiny functional run)")
        return 2
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sm = sm_count(dev, DEFAULT_SM_COUNT)
    cargs = SimpleNamespace(device=dev.type, s_kv=args.s_kv, topk=args.topk, slots=131072, block_size=64)
    counts = [int(x) for x in args.splits.split(",")]
    warm_up_gpu()
    rows, cache = [], {}
    for heads in (int(x) for x in args.heads.split(",")):
        for variant in (v for v in args.variants.split(",") if v in policy.variants("prefill", heads)):
            for tokens in (int(x) for x in args.tokens.split(",")):
                case = calibrate._case("prefill", tokens, heads, cargs, cache)
                plan = prefill_splits(case.tokens, heads, args.topk, variant, sm)
                # (a count whose partials would pass 2 GiB is left out: far past where splitting could pay)
                arms = {s: _arm(case, variant, s) for s in counts
                        if case.tokens * s * heads * 513 * 4 <= 2 << 30}
                arms["plan"] = _arm(case, variant, None)
                for fn, _, _ in arms.values():
                    fn()
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                first = next(iter(arms))
                base_out, base_lse = arms[first][1].float(), arms[first][2]
                times = {k: [] for k in arms}
                for _ in range(args.rounds):
                    for k, (fn, _, _) in arms.items():
                        times[k].append(time_ms(fn, warmup_ms=args.rep_ms / 3, rep_ms=args.rep_ms))
                for k, (_, out, lse) in arms.items():
                    ts = sorted(times[k])
                    fin = torch.isfinite(base_lse)
                    rows.append({"heads": heads, "variant": variant, "tokens": case.tokens,
                                 "splits": plan if k == "plan" else k, "arm": str(k), "ms": ts[len(ts) // 2],
                                 "max_abs_out_diff_vs_first": float((out.float() - base_out).abs().max()),
                                 "max_abs_lse_diff_vs_first": float((lse[fin] - base_lse[fin]).abs().max())
                                 if fin.any() else 0.0})
                line = "  ".join(f"{k}:{sorted(times[k])[len(times[k]) // 2]:.4f}" for k in arms)
                print(f"heads {heads:3d} {variant:6s} tokens {case.tokens:5d} plan {plan:2d}  {line}", flush=True)
                del arms
    path = write_results(args.name, rows, out_dir=args.out,
                         meta={"sm_count": sm, "s_kv": args.s_kv, "topk": args.topk,
                               "dist": "overlap", "how": "CUDA-graph replays, arms alternately, rounds x do_bench "
                                                         "medians, the median round"})
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
