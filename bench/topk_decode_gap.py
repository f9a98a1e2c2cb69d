"""Why the indexer decode bench's top-k (v4 default, 128 x 65536, k 2048: 0.124 ms,
bench/results/indexer_decode_s13.json) is ~3x the top-k bench's time at the same shape (0.044 ms, topk_v3.json): the same select timed on the decode bench's
own logits, on those logits permuted within each row (same values, other order), on randn of the same shape, and v3 on
each; plus statistics of the decode logits (distinct values in a row, quantiles).

    PYTHONPATH=src python bench/topk_decode_gap.py --out DIR     (writes DIR/topk_decode_gap.json)
"""
from __future__ import annotations

import argparse
import json
import os

import torch

from dsattn.bench.common import time_ms
from dsattn.bench.kernels_indexer import TOPK, _paged_setup
from dsattn.ops.indexer.logits import launch_logits_paged
from dsattn.ops.topk import topk_scratch_spec
from dsattn.ops.topk.select import launch_topk


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--reqs", type=int, default=128)
    p.add_argument("--ctx", type=int, default=65536)
    p.add_argument("--heads", type=int, default=32)
    args = p.parse_args()
    dev = "cuda"
    torch.manual_seed(0)
    cache, block_table, q, w, row_req, row_len = _paged_setup(args.reqs, args.ctx, args.heads, 1, 64, dev)
    t = args.reqs
    logits = torch.empty(t, args.ctx, device=dev)
    launch_logits_paged(q, w, cache, block_table, row_req, row_len, logits, {})
    torch.cuda.synchronize()
    perm = torch.argsort(torch.rand(t, args.ctx, device=dev), dim=1)
    inputs = {"decode_logits": logits, "decode_permuted": torch.gather(logits, 1, perm),
              "randn": torch.randn(t, args.ctx, device=dev), "decode_sorted_rows": logits.sort(dim=1).values}
    full = torch.full((t,), args.ctx, dtype=torch.int32, device=dev)
    idx = torch.empty(t, TOPK, dtype=torch.int32, device=dev)
    (shape, dtype), = topk_scratch_spec(t, args.ctx, TOPK)
    scratch = torch.empty(shape, dtype=dtype, device=dev)
    row0 = logits[0]
    stats = dict(distinct_row0=int(row0.unique().numel()), zeros_row0=int((row0 == 0).sum()),
                 quantiles_row0=[float(x) for x in torch.quantile(row0, torch.tensor([0.0, 0.5, 0.9, 0.97, 0.99, 1.0],
                                                                                     device=dev))],
                 row_len_min=int(row_len.min()), row_len_max=int(row_len.max()))
    print(stats, flush=True)
    rows = []
    for name, x in inputs.items():
        for lens_name, lens in (("row_len", row_len), ("full", full)):
            for ver in (4, 3):
                ms = time_ms(lambda: launch_topk(x, lens, TOPK, idx, scratch, version=ver), rep_ms=50)
                ref = torch.topk(x[:, :int(lens.min())] if lens_name == "row_len" else x, TOPK, dim=1).values
                got = torch.gather(x, 1, idx.long()).sort(dim=1, descending=True).values
                ok = bool((got == ref).all())
                rows.append(dict(input=name, lengths=lens_name, version=ver, ms=ms, same_values_as_torch=ok))
                print(rows[-1], flush=True)
    with open(os.path.join(args.out, "topk_decode_gap.json"), "w") as f:
        json.dump(dict(stats=stats, rows=rows, reqs=args.reqs, ctx=args.ctx, heads=args.heads, k=TOPK), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
