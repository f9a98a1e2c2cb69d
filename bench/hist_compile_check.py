"""sm_90a compile of grouping's _hist_union_kernel (IMPL 'hist') on a machine without a GPU: shared memory,
registers and spill stores per (G, slots a histogram, num_warps, maxnreg), topk 2048, 16384 slots.

    PYTHONPATH=src python bench/hist_compile_check.py [--configs 2048:4 1024:4:128 ...] [--groups 2 4 8]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sm90 import TARGET, ptxas_report  # noqa: E402

import triton  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from dsattn.ops.sparse_mla import grouping  # noqa: E402

SIG = {"idx_ptr": "*i32", "idx_stride": "i32", "len_ptr": "*i32", "num_slots": "i32", "token0": "i32",
       "ntokens": "i32", "ent_ptr": "*i32", "ent_stride": "i32", "msk_ptr": "*i32", "msk_stride": "i32",
       "cnt_ptr": "*i32", "K": "i32", "G": "constexpr", "NB": "constexpr", "NCH": "constexpr", "KP": "constexpr",
       "HAS_LEN": "constexpr"}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--configs", nargs="+", default=["2048:4", "2048:8", "1024:4:128", "4096:8"])
    p.add_argument("--groups", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--slots", type=int, default=16384)
    args = p.parse_args()
    for g in args.groups:
        for cfg in args.configs:
            nb, nw, *mr = (int(x) for x in cfg.split(":"))
            src = ASTSource(fn=grouping._hist_union_kernel, signature=SIG,
                            constexprs={"G": g, "NB": nb, "NCH": -(-args.slots // nb), "KP": 2048, "HAS_LEN": True})
            opts = {"num_warps": nw, **({"maxnreg": mr[0]} if mr and mr[0] else {})}
            c = triton.compile(src, target=TARGET, options=opts)
            print(f"G {g} {cfg:12s} shared={c.metadata.shared} {ptxas_report(c.asm['ptx'])}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
