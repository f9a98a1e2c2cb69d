"""Compile the k-pool update kernels (ops/indexer/kpool.py) for sm_90a on a machine without a GPU (Triton's bundled
ptxas, bench/_sm90.py) and print registers and spills: a check after a change to them that no device can run yet
(session 51: the tail kernel keeps the members of a pool its step completed).

    PYTHONPATH=src python bench/kpool_compile_check.py
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.pop("TRITON_INTERPRET", None)

from _sm90 import Intercept, ptxas_report  # noqa: E402

from dsattn.ops.indexer import kpool  # noqa: E402


def main() -> int:
    seen = []
    for name in ("_pool_kernel", "_tail_kernel", "_update_kernel"):
        setattr(kpool, name, Intercept(getattr(kpool, name), lambda fn, c, o: seen.append((fn.__name__, c))))
    t, p = 6, 4
    i32 = torch.int32
    args = (torch.randn(t, 128).bfloat16(), torch.randn(t, 128), torch.randn(p, 128), torch.arange(t, dtype=i32),
            torch.zeros(t, dtype=i32), torch.zeros(1, 4, dtype=i32), torch.zeros(4, 4, 132, dtype=torch.uint8),
            torch.zeros(2, p - 1, 256), torch.zeros(1, dtype=i32))
    for single in (False, True):
        kpool.launch_kpool_update(*args, single_token_requests=single)
    bad = 0
    for name, compiled in seen:
        report = ptxas_report(compiled.asm["ptx"])
        bad += "FAILED" in report
        print(f"{name:16s} {report}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
