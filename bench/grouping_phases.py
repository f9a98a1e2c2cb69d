"""Per-kernel GPU time of grouping.build_groups (torch.profiler, CUDA activity), one line per kernel and variant.

    PYTHONPATH=src python bench/grouping_phases.py --impl hash hash1 --s-q 1024 --groups 8 4 2

Each variant runs --iters calls after one warm-up call; the table is each kernel's mean device time a call.
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from dsattn.bench.kernels_mla import overlap_indices
from dsattn.ops.sparse_mla import grouping


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--impl", nargs="+", default=["hash"])
    p.add_argument("--s-q", type=int, nargs="+", default=[1024])
    p.add_argument("--s-kv", type=int, default=16384)
    p.add_argument("--topk", type=int, default=2048)
    p.add_argument("--groups", type=int, nargs="+", default=[8, 4, 2])
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    dev = torch.device("cuda")
    for s_q in args.s_q:
        idx = overlap_indices(s_q, args.s_kv, args.topk, dev)
        for g in args.groups:
            groups = -(-s_q // g)
            bufs = [torch.empty((groups, g * args.topk), dtype=torch.int32, device=dev) for _ in range(2)]
            bufs.append(torch.empty((groups,), dtype=torch.int32, device=dev))
            for impl in args.impl:
                grouping.IMPL = impl
                run = lambda: grouping._build_groups(idx, None, args.s_kv, g, 0, s_q, *bufs, groups)
                run()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(args.iters):
                        run()
                    torch.cuda.synchronize()
                total = 0.0
                parts = []
                for ev in prof.key_averages():
                    if ev.device_type.name != "CUDA" or ev.count == 0:
                        continue
                    us = ev.device_time_total / args.iters
                    total += us
                    parts.append(f"{ev.key[:40]} {us:.1f}")
                print(f"s_q {s_q} G {g} {impl}: kernels {total:.1f} us a call | " + " | ".join(parts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
