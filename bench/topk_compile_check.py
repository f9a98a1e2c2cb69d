"""Compile the top-k v4 kernels for sm_90a on a machine without a GPU; report registers, spills, occupancy
and SASS instruction mix per kernel (what the select and the threshold stage cost before any device time),
plus the largest loops (a branch back to an earlier label: instructions, barriers, shuffles in the body;
the select's two-bit step loop is one of them).

    PYTHONPATH=src python bench/topk_compile_check.py [--variant name ...] [--sass DIR]

Variants are bench/topk_v3.py's VARIANTS (plus its stage cuts); the launch goes through launch_topk with
CPU tensors of the benchmark's shape (4096 x 65536, k 2048) and each kernel launch is compiled for the
target instead of run (the same interception as bench/mla_compile_check.py).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from topk_v3 import STAGE_CUTS, VARIANTS, launch_topk  # noqa: E402

from dsattn.ops.topk import select, topk_scratch_spec  # noqa: E402

from _sm90 import BIN, Intercept  # noqa: E402
KERNELS = ["_v4_tau", "_v4_filter", "_v4_select", "_v4_filter_tau", "_v4_fused", "_topk_kernel"]


def _intercept(fn, sink):
    return Intercept(fn, lambda f, compiled, options: sink.append((f.__name__, compiled, options.num_warps)))


def sass_loops(sass: str) -> list[tuple[int, int, int]]:
    """Innermost-first list of loops (a branch back to an earlier label): (instructions, BAR, SHFL)."""
    addr, ins, label_at = [], [], {}
    pending = []
    for line in sass.splitlines():
        m = re.match(r"(\.L_x_\d+):", line)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            for lab in pending:
                label_at[lab] = len(ins)
            pending = []
            addr.append(int(m.group(1), 16))
            ins.append(m.group(2))
    loops = []
    for i, text in enumerate(ins):
        m = re.search(r"BRA\b.*?(\.L_x_\d+)", text)
        if m and label_at.get(m.group(1), i + 1) < i:
            body = ins[label_at[m.group(1)]:i + 1]
            loops.append((len(body), sum("BAR" in b for b in body), sum("SHFL" in b for b in body)))
    return loops


def sass_report(compiled, warps: int, dump: str | None, tag: str) -> str:
    with tempfile.TemporaryDirectory() as d:
        cubin = os.path.join(d, "k.cubin")
        open(cubin, "wb").write(compiled.asm["cubin"])
        sass = subprocess.run([os.path.join(BIN, "nvdisasm"), "-c", cubin], capture_output=True, text=True).stdout
        res = subprocess.run([os.path.join(BIN, "cuobjdump"), "-res-usage", cubin], capture_output=True,
                             text=True).stdout
    if dump:
        os.makedirs(dump, exist_ok=True)
        open(os.path.join(dump, tag + ".sass"), "w").write(sass)
    ops = collections.Counter()
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
        if m:
            ops[m.group(2).split(".")[0]] += 1
    regs = int(re.search(r"REG:(\d+)", res).group(1))
    spills = re.search(r"STACK:(\d+)", res).group(1)
    smem = compiled.metadata.shared
    per_sm = min(65536 // max(1, regs * 32 * warps), 64 // warps, 32)
    if smem:
        per_sm = min(per_sm, (228 * 1024) // (smem + 1024))
    top = ", ".join(f"{k} {v}" for k, v in ops.most_common(8))
    loops = " ".join(f"{n}/{b}/{sh}" for n, b, sh in sorted(sass_loops(sass), reverse=True)[:8] if n > 8)
    return (f"regs={regs} spills={spills} smem={smem} warps={warps} programs/SM={per_sm} "
            f"({per_sm * warps} warps) sass={sum(ops.values())} BAR={ops['BAR']} SHFL={ops['SHFL']} | {top} | "
            f"largest loops (instr/BAR/SHFL): {loops}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", nargs="*", default=None)
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--width", type=int, default=65536)
    p.add_argument("--sass", default=None, help="folder to write each kernel's SASS to")
    args = p.parse_args(argv)
    names = args.variant or [n for n in list(VARIANTS) + list(STAGE_CUTS)]
    k = 2048
    x = torch.empty(args.rows, args.width)
    lengths = torch.full((args.rows,), args.width, dtype=torch.int32)
    out = torch.empty(args.rows, k, dtype=torch.int32)
    (shape, dtype), = topk_scratch_spec(args.rows, args.width, k)
    scratch = torch.empty(shape, dtype=dtype)
    saved = {n: getattr(select, n) for n in KERNELS if hasattr(select, n)}
    for name in names:
        kw = dict(VARIANTS.get(name) or STAGE_CUTS[name])
        sink = []
        buf = scratch
        if kw.get("cap") and 2 * kw["cap"] + select.SCRATCH_META > scratch.shape[1]:  # a wider candidate capacity
            buf = torch.empty(args.rows, 2 * kw["cap"] + select.SCRATCH_META, dtype=scratch.dtype)
        for n, fn in saved.items():
            setattr(select, n, _intercept(fn, sink))
        try:
            launch_topk(x, lengths, k, out, buf, **kw)  # topk_v3's: a variant's cluster_cap as its env
        except Exception as e:  # noqa: BLE001
            print(f"{name}: {type(e).__name__}: {str(e)[:400]}")
        finally:
            for n, fn in saved.items():
                setattr(select, n, fn)
        for kname, compiled, warps in sink:
            print(f"{name:18s} {kname:16s} {sass_report(compiled, warps, args.sass, f'{name}_{kname}')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
