"""How a split call's combine launches: programmatic dependent launch (launch.COMBINE_PDL) and columns per combine
program (launch.COMBINE_COLS), timed against the session-39 launch (no PDL, 512 columns: grid (T, H)).

Session 39 measured the combine at 1.6-4.8 us of GPU time a split call, 16-25% of an 8-head small-batch decode's
kernel time (`decode_split_kernels_s39.json`). Two changes that keep the kernels and the math: launching the combine
with programmatic dependent launch overlaps its launch with the split kernel's last programs (it waits on
griddepcontrol.wait before reading the partials); cutting its 512 columns over 4 programs spreads the partials'
reads over 4x the SMs at few tokens and heads.

Each arm is a CUDA graph of --calls consecutive calls of the public op (sparse_mla_decode over the calibration's decode
case, `uniform` indices in one 131072-slot paged cache; sparse_mla_prefill over its prefill case, `overlap` indices,
s_kv 16384), as layers of a captured serving step follow one another; the time is the replay's GPU time over the
calls. Arms alternate, --rounds medians of do_bench; the row keeps the median round and each arm's largest output
difference from the base arm. --calls 1 times single-call graphs (the replay's own launch included, as in
decode_splits_sweep). Writes bench/results/<--name>.json.

    PYTHONPATH=src python bench/combine_launch.py [--decode 8:native:1,...] [--prefill 8:pad64:1,...] [--calls 8]
"""
from __future__ import annotations

import argparse
import sys
from types import SimpleNamespace

import torch

from dsattn.backend import calibrate
from dsattn.bench.common import time_ms, warm_up_gpu, write_results
from dsattn.bench.kernels_mla import ours
from dsattn.ops._triton import sm_count
from dsattn.ops.sparse_mla import launch
from dsattn.ops.sparse_mla.dispatch import DEFAULT_SM_COUNT, decode_splits, prefill_splits

DECODE = ("8:native:1,8:native:4,8:native:16,8:native:64,16:native:16,32:native:4,32:native:32,64:native:1,"
          "64:native:16,128:native:16")
PREFILL = "8:pad64:1,8:pad64:32,32:native:32,64:native:8,128:native:32"
ARMS = ((False, 512), (True, 512), (False, 128), (True, 128))


def _graph(fn, calls: int):
    """fn x calls captured in one CUDA graph (fn warmed first on a side stream); returns the replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()

    def replay(_keep=fn):
        g.replay()
    return replay


def _arm(case, variant: str, pdl: bool, cols: int, calls: int):
    """(replay, out, lse) with the combine launched as (pdl, cols) at capture."""
    saved = launch.COMBINE_PDL, launch.COMBINE_COLS
    launch.COMBINE_PDL, launch.COMBINE_COLS = pdl, cols
    try:
        fn, out, lse = ours(case, variant)
        replay = _graph(fn, calls)
    finally:
        launch.COMBINE_PDL, launch.COMBINE_COLS = saved
    return replay, out, lse


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decode", default=DECODE, help="heads:variant:tokens list over the fp8_ds_mla decode case")
    ap.add_argument("--layout", default="fp8_ds_mla")
    ap.add_argument("--prefill", default=PREFILL, help="heads:variant:tokens list over the prefill case ('' none)")
    ap.add_argument("--calls", type=int, default=8, help="calls captured in one graph")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rep-ms", type=float, default=20.0)
    ap.add_argument("--name", default="combine_launch")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("combine_launch: needs a CUDA GPU")
        return 2
    dev = torch.device("cuda")
    sm = sm_count(dev, DEFAULT_SM_COUNT)
    cargs = SimpleNamespace(device="cuda", s_kv=16384, topk=2048, slots=131072, block_size=64)
    warm_up_gpu()
    rows, cache = [], {}
    specs = [("decode", s) for s in args.decode.split(",") if s] + [("prefill", s) for s in args.prefill.split(",") if s]
    for kind, spec in specs:
        heads, variant, tokens = spec.split(":")
        heads, tokens = int(heads), int(tokens)
        if kind == "decode":
            case = calibrate._case(f"decode/{args.layout}", tokens, heads, cargs, cache)
            plan = decode_splits(case.tokens, heads, 2048, variant, sm)
        else:
            case = calibrate._case("prefill", tokens, heads, cargs, cache)
            plan = prefill_splits(case.tokens, heads, 2048, variant, sm)
        arms = {a: _arm(case, variant, *a, args.calls) for a in ARMS}
        times = {a: [] for a in ARMS}
        for _ in range(args.rounds):
            for a, (fn, _, _) in arms.items():
                times[a].append(time_ms(fn, warmup_ms=args.rep_ms / 4, rep_ms=args.rep_ms) / args.calls)
        torch.cuda.synchronize()
        base_out, base_lse = arms[ARMS[0]][1].float(), arms[ARMS[0]][2]
        fin = torch.isfinite(base_lse)
        med = {a: sorted(v)[len(v) // 2] for a, v in times.items()}
        for a, (_, out, lse) in arms.items():
            rows.append({"kind": f"{kind}/{args.layout}" if kind == "decode" else kind, "heads": heads,
                         "variant": variant, "tokens": case.tokens, "splits": plan, "pdl": a[0], "cols": a[1],
                         "calls_per_graph": args.calls, "ms_per_call": med[a], "ms_rounds": times[a],
                         "speedup_vs_base": med[ARMS[0]] / med[a],
                         "max_abs_out_diff_vs_base": float((out.float() - base_out).abs().max()),
                         "max_abs_lse_diff_vs_base": float((lse[fin] - base_lse[fin]).abs().max())
                         if fin.any() else 0.0,
                         "lse_nonfinite_equal": bool(torch.equal(torch.isfinite(lse), fin))})
        line = "  ".join(f"pdl{int(a[0])}/c{a[1]}: {med[a] * 1e3:7.2f} us" for a in ARMS)
        print(f"{kind:7s} heads {heads:3d} {variant:6s} tokens {case.tokens:4d} splits {plan:2d}  {line}", flush=True)
        del arms
    path = write_results(args.name, rows, out_dir=args.out,
                         meta={"sm_count": sm, "topk": 2048, "calls_per_graph": args.calls,
                               "how": "CUDA graphs of consecutive public-op calls, arms alternately, rounds x do_bench "
                                      "medians per call, the median round"})
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
