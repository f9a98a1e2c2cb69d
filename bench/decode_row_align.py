"""Does the decode care where its 656-byte fp8_ds_mla rows start? The same rows in three caches: packed (row stride
656 B, or 528 for fp8_ds_mla_nope: half the rows start 16 B into a 32-byte sector), padded to the next multiple of 32
B (every row 32-byte aligned: 672 / 544) and of 128 B (768 / 640); sparse_mla_decode over each, timed as CUDA-graph
replays, outputs compared bit for bit.

Why (session 18's Nsight Compute profile of the 16-head decode, bench/logs/s18_profile.log): the latent gather's
LDGSTS.128 instructions read 24 sectors for the 16 of their 512 contiguous bytes (1.5x, ncu's "L2 theoretical
sectors"), which the packed rows' alignment does not explain on paper (17 at most), while L2 is 73% busy. If the
aligned caches run faster, the sector count is real and the gather's alignment is worth a change (the row layout is
SPEC's and FlashMLA's; the gather's column split is ours); if not, it is not where the time goes.

    PYTHONPATH=src python bench/decode_row_align.py [--tokens 512] [--heads 8 16] [--layout fp8_ds_mla] [--out F]
"""
from __future__ import annotations

import argparse
import json

import torch

from dsattn.bench.common import graph_ms
from dsattn.bench.kernels_mla import decode_case
from dsattn.ops.sparse_mla import sparse_mla_decode


def padded(cache: torch.Tensor, stride: int) -> torch.Tensor:
    """The rows of cache [blocks, block, row] uint8 in a buffer of `stride` bytes a row (a strided view)."""
    blocks, block, row = cache.shape
    buf = torch.zeros((blocks, block, stride), dtype=cache.dtype, device=cache.device)
    buf[..., :row] = cache
    return buf[..., :row]


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--heads", type=int, nargs="+", default=[8, 16])
    p.add_argument("--layout", default="fp8_ds_mla")
    p.add_argument("--strides", type=int, nargs="+", default=None,
                   help="padded row strides in bytes (default: the row rounded up to 32 and to 128 bytes)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    rows = []
    for h in args.heads:
        case = decode_case(args.tokens, h, args.layout, dev)
        row = case.kv.shape[-1]
        strides = args.strides or sorted({-(-row // 32) * 32, -(-row // 128) * 128} - {row})
        caches = {row: case.kv} | {s: padded(case.kv, s) for s in strides}
        res, base = {}, None
        for stride, kv in caches.items():
            out = torch.empty((args.tokens, h, 512), dtype=torch.bfloat16, device=dev)
            lse = torch.empty((args.tokens, h), dtype=torch.float32, device=dev)
            ms = graph_ms(lambda: sparse_mla_decode(case.q, kv, case.indices, case.sm_scale, out=out, lse=lse))
            same = True if base is None else (torch.equal(out, base[0]) and torch.equal(lse, base[1]))
            if base is None:
                base = (out, lse)
            res[stride] = dict(ms=ms, bit_equal=same)
            print(f"{args.layout} T {args.tokens} H {h:3d} row stride {stride:4d} B: {ms:.4f} ms  bit-equal {same}",
                  flush=True)
        rows.append(dict(layout=args.layout, tokens=args.tokens, heads=h, by_stride=res))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=str(dev) if dev.type != "cuda" else torch.cuda.get_device_name(), rows=rows), f,
                      indent=1)


if __name__ == "__main__":
    main()
