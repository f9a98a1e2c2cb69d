"""Compile topk.gluon_select.select_rows_kernel for sm_90a on a machine without a GPU and report what ptxas says
(registers, spills), the dynamic shared memory against the words its raw-PTX regions take (they must be equal: no
other shared memory), and the shared-memory instructions in the SASS, for the capacities the select takes.

    PYTHONPATH=src python bench/topk_gluon_check.py [--caps 1024 2048 4096 8192] [--warps 0] [--sass DIR]
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
    p.add_argument("--sass", default=None, help="write each build's SASS and PTX into this folder")
    args = p.parse_args(argv)
    for warps in args.warps:
        for cap in args.caps:
            nw = warps or gluon_select.default_warps(cap)
            k = cap // 2
            logits = torch.zeros(2, cap)
            lengths = torch.zeros(2, dtype=torch.int32)
            out = torch.zeros(2, k, dtype=torch.int32)
            sink = []
            gluon_select.launch_select_rows(logits, lengths, k, out, cap, num_warps=nw, launch=lambda f: Intercept(
                f, lambda fn, compiled, o: sink.append(compiled), source=GluonASTSource))
            c = sink[0]
            ptx = c.asm["ptx"]
            sass = sass_of(ptx)
            ops = collections.Counter(re.findall(r"\b(ATOMS\.\w+|RED\w*\.\w+|STS[.\w]*|LDS[.\w]*|BAR\.\w+|SHFL\.\w+|"
                                                 r"STL[.\w]*|LDL[.\w]*)\b", sass))
            words = gluon_select.smem_words(cap, nw, gluon_select.default_bits(cap, nw))
            print(f"cap {cap} warps {nw}: {ptxas_report(ptx)} shared={c.metadata.shared} raw_bytes={4 * words} "
                  f"sass={dict(ops)}")
            if args.sass:
                os.makedirs(args.sass, exist_ok=True)
                open(os.path.join(args.sass, f"cap{cap}_w{nw}.sass"), "w").write(sass)
                open(os.path.join(args.sass, f"cap{cap}_w{nw}.ptx"), "w").write(ptx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
