"""Compile topk.gluon_select.select_rows_kernel for sm_90a on a machine without a GPU and report what ptxas says
(registers, spills), the dynamic shared memory against the words its raw-PTX regions take (they must be equal: no
other shared memory), and the shared-memory instructions in the SASS, for the capacities the select takes.

    PYTHONPATH=src python bench/topk_gluon_check.py [--caps 1024 2048 4096 8192] [--warps 0] [--ctas 1] [--sass DIR]

--ctas: CTAs a row (a cluster); the report then adds the PTX's cluster directives.
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

from dsattn.ops.topk import gluon_select  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sm90 import BIN, PTXAS, Intercept, ptxas_report  # noqa: E402


def sass_of(ptx: str) -> str:
    with tempfile.TemporaryDirectory() as d:
        path, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        open(path, "w").write(ptx)
        subprocess.run([PTXAS, "--gpu-name", "sm_90a", path, "-o", cubin], check=True, capture_output=True)
        return subprocess.run([os.path.join(BIN, "nvdisasm"), "-c", cubin], capture_output=True, text=True).stdout


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--caps", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    p.add_argument("--warps", type=int, nargs="+", default=[0], help="0: the launcher's (gluon_select.default_warps)")
    p.add_argument("--ctas", type=int, nargs="+", default=[1], help="CTAs a row (a thread-block cluster)")
    p.add_argument("--sass", default=None, help="write each build's SASS and PTX into this folder")
    args = p.parse_args(argv)
    for ctas, warps, cap in ((c, w, cap) for c in args.ctas for w in args.warps for cap in args.caps):
        if cap // ctas < 256:
            continue
        cols = gluon_select.cluster_columns(cap, cap, ctas)[1]  # (a full row's)
        if cols > gluon_select.MAX_CTA_COLS:
            print(f"cap {cap} ctas {ctas}: skipped, {cols} columns a CTA (the launcher takes at most "
                  f"{gluon_select.MAX_CTA_COLS})")
            continue
        nw = warps or gluon_select.default_warps(cols)
        k = min(cap // 2, 8192)  # topk()'s largest (MAX_TOPK); k is not a compile-time value of the kernel
        logits = torch.zeros(2, cap)
        lengths = torch.zeros(2, dtype=torch.int32)
        out = torch.zeros(2, k, dtype=torch.int32)
        sink = []
        gluon_select.launch_select_rows(logits, lengths, k, out, cap, num_warps=nw, ctas=ctas, launch=lambda f: (
            Intercept(f, lambda fn, compiled, o: sink.append(compiled), source=GluonASTSource)))
        c = sink[0]
        ptx = c.asm["ptx"]
        sass = sass_of(ptx)
        ops = collections.Counter(re.findall(r"\b(ATOMS\.\w+|ATOM\.E\.\w+|RED\w*\.\w+|UCGABAR\w*|STS[.\w]*|LDS[.\w]*|"
                                             r"BAR\.\w+|SHFL\.\w+|"
                                             r"STL[.\w]*|LDL[.\w]*)\b", sass))
        words = gluon_select.smem_words(cols, nw, gluon_select.default_bits(cols, nw), ctas)
        cluster = [ln.strip() for ln in ptx.splitlines() if ln.strip().startswith((".explicitcluster",
                                                                                  ".reqnctapercluster"))]
        print(f"cap {cap} warps {nw}{f' ctas {ctas} {cluster}' if ctas > 1 else ''}: {ptxas_report(ptx)} "
              f"shared={c.metadata.shared} raw_bytes={4 * words} sass={dict(ops)}")
        if args.sass:
            os.makedirs(args.sass, exist_ok=True)
            name = f"cap{cap}_w{nw}" + (f"_c{ctas}" if ctas > 1 else "")
            open(os.path.join(args.sass, f"{name}.sass"), "w").write(sass)
            open(os.path.join(args.sass, f"{name}.ptx"), "w").write(ptx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
