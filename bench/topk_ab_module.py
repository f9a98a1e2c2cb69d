"""Time the public top-k's launcher against another copy of ``ops/topk/select.py`` (e.g. the previous commit's), in
one process, alternating rounds: whether a change to the select kernels costs time. The other copy is loaded as a
module of the package (its relative imports resolve), so both see the same Triton and helpers.

    git show HEAD~1:src/dsattn/ops/topk/select.py > /tmp/old_select.py
    PYTHONPATH=src python bench/topk_ab_module.py --a /tmp/old_select.py --name ab_topk_x [--rounds 7]

Shapes: dsattn bench kernels --op topk's (rows x width, k 2048; randn and few-valued 'ties' rows). Writes
bench/results/NAME.json (medians a round, each arm's median of the rounds, b / a) and checks that both arms give
the same sets on every shape.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics

import torch

from dsattn.bench.common import time_ms, warm_up_gpu, write_results
from dsattn.bench.kernels_indexer import TOPK_SHAPES, _topk_inputs
from dsattn.ops.topk import select as current
from dsattn.ops.topk import topk_scratch_spec


def load(path: str):
    spec = importlib.util.spec_from_file_location("dsattn.ops.topk._select_a", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="path of the select.py of arm A (arm B: the tree's)")
    ap.add_argument("--name", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    arm_a, dev, k = load(args.a), "cuda", args.k
    warm_up_gpu()
    rows_out = []
    for rows, width, dist in TOPK_SHAPES:
        torch.manual_seed(0)
        x = _topk_inputs(rows, width, dist, dev)
        lengths = torch.full((rows,), width, dtype=torch.int32, device=dev)
        (shape, dtype), = topk_scratch_spec(rows, width, k)
        outs = {n: torch.empty((rows, k), dtype=torch.int32, device=dev) for n in "ab"}
        scr = {n: torch.empty(shape, dtype=dtype, device=dev) for n in "ab"}
        fns = {"a": lambda: arm_a.launch_topk(x, lengths, k, outs["a"], scr["a"]),
               "b": lambda: current.launch_topk(x, lengths, k, outs["b"], scr["b"])}
        for f in fns.values():
            f()
        same = bool((outs["a"].sort(1).values == outs["b"].sort(1).values).all())
        times = {"a": [], "b": []}
        for _ in range(args.rounds):
            for n in "ab":
                times[n].append(time_ms(fns[n]))
        a, b = statistics.median(times["a"]), statistics.median(times["b"])
        row = dict(rows=rows, width=width, dist=dist, k=k, a_ms=a, b_ms=b, b_over_a=b / a, same_sets=same,
                   a_rounds=times["a"], b_rounds=times["b"])
        rows_out.append(row)
        print(f"{rows} x {width} {dist}: a {a:.4f} ms, b {b:.4f} ms, b / a {b / a:.4f}, same sets {same}", flush=True)
    write_results(args.name, rows_out, meta=dict(a=args.a, rounds=args.rounds), out_dir=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
