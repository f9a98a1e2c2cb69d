"""Where a split short prefill's GPU time goes: each kernel's device time (torch.profiler, CUDA activity), per case,
for the plan's split count (dispatch.prefill_splits) and for no split. Session 39: is the combine launch
(kernels.combine_splits_kernel) worth folding into the split kernel's last program of each item?

Prints one line per (case, arm, kernel): mean us a call over --calls calls; writes bench/results/<--name>.json.

    PYTHONPATH=src python bench/prefill_split_kernels.py [--cases 8:pad64:1,8:pad64:32,...] [--calls 50]
    PYTHONPATH=src python bench/prefill_split_kernels.py --decode fp8_ds_mla --cases 8:native:1,64:native:16
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from types import SimpleNamespace

import torch

from dsattn.backend import calibrate
from dsattn.bench.common import kernel_events, warm_up_gpu, write_results
from dsattn.bench.kernels_mla import ours
from dsattn.ops._triton import sm_count
from dsattn.ops.sparse_mla.dispatch import DEFAULT_SM_COUNT, decode_splits, prefill_splits

ENV = "DSATTN_PREFILL_SPLITS"
CASES = "8:pad64:1,8:pad64:8,8:pad64:32,8:native:128,8:native:256,32:native:32,32:native:128,64:native:8,128:native:32"


def _kernel_us(fn, calls: int) -> dict[str, float]:
    """Mean device us a call of each kernel fn launches (fn run `calls` times under the profiler)."""
    acc = defaultdict(float)
    for start, end, name in kernel_events(fn, calls):
        acc[name] += end - start  # a kernel event's range is its GPU interval
    return {k: v / calls for k, v in acc.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=CASES, help="comma list of heads:variant:tokens")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--decode", default=None, metavar="LAYOUT",
                    help="profile the decode (fp8_ds_mla or fp8_ds_mla_nope cache, `uniform` indices) at the plan's "
                         "split-K count (dispatch.decode_splits) instead; no unsplit arm")
    ap.add_argument("--name", default="prefill_split_kernels")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("prefill_split_kernels: needs a CUDA GPU")
        return 2
    dev = torch.device("cuda")
    sm = sm_count(dev, DEFAULT_SM_COUNT)
    cargs = SimpleNamespace(device="cuda", s_kv=16384, topk=2048, slots=131072, block_size=64)
    warm_up_gpu()
    rows, cache = [], {}
    for spec in args.cases.split(","):
        heads, variant, tokens = spec.split(":")
        heads, tokens = int(heads), int(tokens)
        if args.decode:
            case = calibrate._case(f"decode/{args.decode}", tokens, heads, cargs, cache)
            plan = decode_splits(case.tokens, heads, 2048, variant, sm)
        else:
            case = calibrate._case("prefill", tokens, heads, cargs, cache)
            plan = prefill_splits(case.tokens, heads, 2048, variant, sm)
        for arm in ((None,) if args.decode else ("1", None)):
            # the op reads DSATTN_PREFILL_SPLITS at each call, so the arm's value holds through the calls (session
            # 39's run set it only while building the call: both arms ran the plan)
            saved = os.environ.pop(ENV, None)
            try:
                if arm is not None:
                    os.environ[ENV] = arm
                fn, _, _ = ours(case, variant)
                per = _kernel_us(fn, args.calls)
            finally:
                os.environ.pop(ENV, None)
                if saved is not None:
                    os.environ[ENV] = saved
            label = "unsplit" if arm else f"plan ({plan} parts)"
            for k, us in sorted(per.items(), key=lambda kv: -kv[1]):
                print(f"{heads:4d} {variant:6s} {tokens:5d} {label:16s} {us:8.1f} us  {k[:70]}")
                rows.append({"kind": "decode/" + args.decode if args.decode else "prefill", "heads": heads, "variant": variant, "tokens": tokens, "splits": 1 if arm else plan,
                             "kernel": k, "us": us})
            print(f"{heads:4d} {variant:6s} {tokens:5d} {label:16s} {sum(per.values()):8.1f} us  (all kernels)")
        sys.stdout.flush()
    write_results(args.name, rows, meta={"calls": args.calls, "cases": args.cases}, out_dir=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
