"""Compile grouping_smem.dense_map_smem_kernel (IMPL 'dense_smem'; --kernel map) or dense_union_smem_kernel (IMPL
'dense_fused' and 'auto'; --kernel union) for sm_90a on a machine without a GPU and report what ptxas says
(registers, spills), the dynamic shared memory (for union also the words its raw-PTX regions take, map + 32 + codes,
which must equal it: no other shared memory), and the shared-memory atomics / index loads in the PTX and SASS, for
the dense path's shapes: topk 2048, 16384 slots, G 8 / 4 / 2, with and without topk_length.

    PYTHONPATH=src python bench/grouping_smem_check.py [--kernel map|union] [--slots 16384] [--topk 2048]
        [--groups 8 4 2]
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402

from dsattn.ops.sparse_mla import grouping, grouping_smem  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sm90 import BIN, PTXAS, Intercept, ptxas_report  # noqa: E402


def sass_counts(ptx: str) -> collections.Counter:
    with tempfile.TemporaryDirectory() as d:
        path, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        open(path, "w").write(ptx)
        subprocess.run([PTXAS, "--gpu-name", "sm_90a", path, "-o", cubin], check=True, capture_output=True)
        sass = subprocess.run([os.path.join(BIN, "nvdisasm"), "-c", cubin], capture_output=True, text=True).stdout
    return collections.Counter(re.findall(r"\b(ATOMS\.\w+|RED\w*\.\w+|LDG\.E[.\w]*|STS[.\w]*|LDS[.\w]*|STL|LDL)\b",
                                          sass))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--slots", type=int, default=16384)
    p.add_argument("--topk", type=int, default=2048)
    p.add_argument("--groups", type=int, nargs="+", default=[8, 4, 2])
    p.add_argument("--kernel", choices=("map", "union"), default="map")
    p.add_argument("--warps", type=int, default=None, help="union: grouping_smem.UNION_WARPS (8 or 16; default: by shared memory)")
    args = p.parse_args(argv)
    if args.warps:
        grouping_smem.UNION_WARPS = args.warps
    for g in args.groups:
        for with_len in (False, True):
            t = 4 * g
            idx = torch.zeros(t, args.topk, dtype=torch.int32)
            lens = torch.full((t,), args.topk, dtype=torch.int32) if with_len else None
            masks = torch.zeros(1, g * args.topk, dtype=torch.int32)
            counts = torch.zeros(1, dtype=torch.int32)
            sink = []
            gp, spw, d = grouping.dense_layout(args.slots, g)

            def fast(kernel, grid, *a, **kw):
                Intercept(kernel, lambda f, compiled, o: sink.append(compiled), source=GluonASTSource)[grid](*a, **kw)
            if args.kernel == "map":
                grouping_smem.launch_map(idx, lens, args.slots, g, 0, t, masks, counts, 1, gp, spw, d, fast)
                extra = ""
            else:
                ent = torch.zeros_like(masks)
                grouping_smem.launch_union(idx, lens, args.slots, g, 0, t, ent, masks, counts, 1, gp, spw, d, fast)
                nw = grouping_smem.union_warps(d, g, args.topk)
                dw = max(1 << max(0, (d - 1).bit_length()), 32 * nw)
                outw = grouping_smem.union_out_words(g, args.topk, nw)
                extra = f" warps {nw} raw_words {dw + grouping_smem.tot_words(nw) + outw}"
            c = sink[0]
            ptx = c.asm["ptx"]
            pc = collections.Counter(re.findall(r"\b(red\.shared\.or\.b32|st\.shared\.b32|ld\.shared\.b32|"
                                                r"ld\.global[.\w]*)\b", ptx))
            print(f"G {g} len {int(with_len)} words {d}{extra}: {ptxas_report(ptx)} shared={c.metadata.shared} "
                  f"ptx={dict(pc)} sass={dict(sass_counts(ptx))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
