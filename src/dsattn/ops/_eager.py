"""How the public ops call their torch.library custom ops: the op itself where torch.compile traces (its fake
implementation keeps the graph whole), its body directly in eager mode, skipping the dispatcher's host cost
(measured on the 2-core CPU box with the kernels stubbed out: a public decode call 84 -> 21 us, a top-k call
44 -> 10.9 us; notes/sparse_mla.md, sessions 11-12)."""
from __future__ import annotations

from typing import Callable

import torch


def op_or_body(name: str, body: Callable) -> Callable:
    """torch.ops.dsattn.<name> while torch.compile traces, else body (the function the op was made from)."""
    return getattr(torch.ops.dsattn, name) if torch.compiler.is_compiling() else body
