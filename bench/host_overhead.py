"""Host (CPU) time of one call of the public sparse MLA functions on the GPU, against its GPU time.

    PYTHONPATH=src python bench/host_overhead.py [--profile]

Host time: wall time of N back-to-back calls without synchronizing, divided by N (the GPU queue absorbs them, so
this is the enqueue cost: checks, dispatch, launches). GPU time: do_bench's median. A call is host-bound when the
first is the larger. --profile prints cProfile's top functions of those N calls.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time

import torch

from dsattn.bench.common import time_ms
from dsattn.bench.kernels_mla import decode_case, ours, prefill_case


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=50)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    dev = torch.device("cuda")
    cases = [("decode fp8 8h 512", decode_case(512, 8, "fp8_ds_mla", dev)),
             ("decode fp8 64h 512", decode_case(512, 64, "fp8_ds_mla", dev)),
             ("prefill 8h 1024", prefill_case(1024, 8, dev)),
             ("prefill 64h 1024", prefill_case(1024, 64, dev))]
    for name, case in cases:
        fn, _, _ = ours(case)
        fn()
        torch.cuda.synchronize()
        gpu = time_ms(fn, rep_ms=20)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.n):
            fn()
        host = (time.perf_counter() - t0) * 1e3 / args.n
        torch.cuda.synchronize()
        print(f"{name}: host {host:.3f} ms a call, GPU {gpu:.3f} ms", flush=True)
        if args.profile:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(args.n):
                fn()
            pr.disable()
            torch.cuda.synchronize()
            pstats.Stats(pr).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
