"""Whether a Gluon kernel can run as a thread-block cluster with distributed shared memory (for a top-k select that
splits one row over several CTAs: notes/indexer.md, session 48, "Left"), checked by compiling a toy kernel for sm_90a
on a machine without a GPU: num_ctas=2 with layouts whose CGA dimension broadcasts (cga_layout [[0]]), and inline PTX
that adds into CTA 0's shared memory from both CTAs (mapa.shared::cluster + red.shared::cluster), waits on a cluster
barrier and reads the word back. Prints whether it compiled, the PTX's cluster directives and ptxas's registers.
Not run on a GPU (session 48 had no device time left).

    PYTHONPATH=src python bench/cluster_check.py
"""
from __future__ import annotations

import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sm90 import Intercept, ptxas_report  # noqa: E402


@gluon.jit
def cluster_toy(x_ptr, out_ptr, num_warps: gl.constexpr):
    L: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0], [[0]])
    i = gl.arange(0, 64 * num_warps, L)
    v = gl.load(x_ptr + i)
    res = gl.allocate_shared_memory(gl.int32, [64], gl.SwizzledSharedLayout(1, 1, 1, [0], [[0]]))
    d = gl.inline_asm_elementwise(
        "{ .reg .u32 a, r; mov.u32 a, global_smem; mapa.shared::cluster.u32 r, a, 0; "
        "red.shared::cluster.add.u32 [r], $1; barrier.cluster.arrive; barrier.cluster.wait; "
        "ld.shared::cluster.u32 $0, [r]; }", "=r,r", [v], dtype=gl.int32, is_pure=False, pack=1)
    gl.store(out_ptr + i, d)
    res.store(gl.zeros([64], gl.int32, L))


def main() -> int:
    sink = []
    x = torch.zeros(1024, dtype=torch.int32)
    Intercept(cluster_toy, lambda f, c, o: sink.append((c, o)), source=GluonASTSource)[(2,)](x, x, num_warps=4,
                                                                                            num_ctas=2)
    compiled, options = sink[0]
    ptx = compiled.asm["ptx"]
    print(f"compiled, num_ctas {options.num_ctas}: {ptxas_report(ptx)}")
    print("cluster directives:", [ln.strip() for ln in ptx.splitlines() if ln.strip().startswith((".explicitcluster",
                                                                                                 ".reqnctapercluster"))])
    return 0


if __name__ == "__main__":
    sys.exit(main())
