"""Eager calls against CUDA-graph replays of the same calls (dsattn's public functions and FlashMLA), alternating,
3 rounds: how much of a table's time is host issue latency (checks, dispatch, launches) rather than GPU work.

    PYTHONPATH=src:.peer python bench/graph_check.py [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from dsattn.bench.common import graph_replay, time_ms, warm_up_gpu, write_results
from dsattn.bench.kernels_mla import _peers, decode_case, flashmla, ours, prefill_case


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None)
    p.add_argument("--rep-ms", type=float, default=10)
    args = p.parse_args()
    dev = torch.device("cuda")
    peers = _peers()
    warm_up_gpu()
    rows = []
    cases = [("prefill", prefill_case(1024, h, dev)) for h in (8, 16, 64)] + [("decode", decode_case(512, 8, "fp8_ds_mla", dev))]
    for kind, case in cases:
        fns = {}
        fn, _, _ = ours(case)
        fns["dsattn eager"] = fn
        fns["dsattn graph"] = graph_replay(fn)
        built = flashmla(case, peers, max(64, case.heads))
        if built is not None:
            pf = built[0]
            pf()
            fns["flashmla eager"] = pf
            fns["flashmla graph"] = graph_replay(pf)
        times = {k: [] for k in fns}
        for _ in range(3):
            for k, f in fns.items():
                times[k].append(time_ms(f, rep_ms=args.rep_ms))
        for k, ts in times.items():
            row = {"kind": kind, "tokens": case.tokens, "heads": case.heads, "what": k,
                   "ms": statistics.median(ts), "ms_rounds": ts}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        # provenance (device, versions, commit) as every dsattn bench result; the device name is in it
        print(write_results("graph_check", rows, meta={"rep_ms": args.rep_ms, "rounds": 3}, out_dir=args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
