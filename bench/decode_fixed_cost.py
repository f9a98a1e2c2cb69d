"""How much of a decode call is fixed cost a program (prologue, pipeline fill and drain, epilogue) and how much is
per 64-entry block: time sparse_mla_decode (the default dispatch, issue 3's decode case: 131072 slots, uniform
indices, topk 2048; CUDA graph replays) with topk_length cutting every token's list to L in {256, ..., 2048}, and fit
t(L) = a + b L by least squares. a / t(2048) is the share a persistent program (or any overlap of one token's tail
with the next token's head) could at most recover.

    PYTHONPATH=src python bench/decode_fixed_cost.py [--tokens 512] [--heads 8 16 32] [--out FILE]
"""
from __future__ import annotations

import argparse
import json

import torch

from dsattn.bench.common import graph_ms
from dsattn.bench.kernels_mla import decode_case
from dsattn.ops.sparse_mla import sparse_mla_decode


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, nargs="+", default=[512])
    p.add_argument("--heads", type=int, nargs="+", default=[8, 16, 32])
    p.add_argument("--layouts", nargs="+", default=["fp8_ds_mla", "fp8_ds_mla_nope"])
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 1536, 2048])
    p.add_argument("--out", default=None)
    args = p.parse_args()
    dev = torch.device("cuda")
    rows = []
    for layout in args.layouts:
        for t in args.tokens:
            for h in args.heads:
                case = decode_case(t, h, layout, dev)
                out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=dev)
                lse = torch.empty((t, h), dtype=torch.float32, device=dev)
                ts = []
                for n in args.lengths:
                    ln = torch.full((t,), n, dtype=torch.int32, device=dev)
                    ts.append(graph_ms(lambda: sparse_mla_decode(case.q, case.kv, case.indices, case.sm_scale,
                                                            topk_length=ln, out=out, lse=lse)))
                x = torch.tensor(args.lengths, dtype=torch.float64)
                y = torch.tensor(ts, dtype=torch.float64)
                b = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
                a = float(y.mean() - b * x.mean())
                full = ts[args.lengths.index(2048)] if 2048 in args.lengths else ts[-1]
                r = dict(layout=layout, tokens=t, heads=h, lengths=args.lengths, ms=ts, fixed_ms=a,
                         ms_per_1024=b * 1024, fixed_share=a / full)
                rows.append(r)
                print(f"{layout:16s} T {t:5d} H {h:3d}  ms " + " ".join(f"{v:.4f}" for v in ts)
                      + f"  fit: fixed {a:.4f} ms + {b * 1024:.4f} ms/1024 entries  fixed share {a / full:.1%}",
                      flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
