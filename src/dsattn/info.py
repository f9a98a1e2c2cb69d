"""``dsattn info``: the presets, heads per rank at each TP size, bytes per token of each cache layout,
and where kernels run on this machine."""
from __future__ import annotations

import argparse

import torch

from .config import PRESETS
from .formats import INDEX_ROW_BYTES, KVLayout
from .ops._triton import HAVE_TRITON, interpreting


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="dsattn info", description=__doc__.splitlines()[0]).parse_args(argv)
    print("presets (heads per rank at TP 1/2/4/8):")
    for name, g in PRESETS.items():
        per_rank = "/".join(str(g.heads_per_rank(tp)) for tp in (1, 2, 4, 8))
        layouts = ", ".join(f"{lay.value} {lay.row_bytes(g.d_qk)} B" for lay in KVLayout
                            if lay.max_d_qk() is None or lay.max_d_qk() >= g.d_qk)
        print(f"  {name:14s} heads {g.num_heads:3d} ({per_rank})  D_qk {g.d_qk}  indexer "
              f"{g.index_n_heads}x{g.index_head_dim}  topk {g.index_topk}  kpool {g.kpool}  "
              f"sm_scale {g.softmax_scale:.5f}")
        print(f"  {'':14s} latent cache per token: {layouts}; indexer keys {INDEX_ROW_BYTES} B"
              + (f" per pool of {g.kpool}" if g.kpool > 1 else ""))
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        where = f"CUDA: {p.name}, {p.multi_processor_count} SMs, {p.total_memory / 2**30:.0f} GiB"
    elif HAVE_TRITON and interpreting():
        where = "CPU: Triton kernels under the interpreter (TRITON_INTERPRET=1)"
    else:
        where = "CPU: reference ops (set TRITON_INTERPRET=1 to run the Triton kernels interpreted)"
    print(f"kernels: {where}; torch {torch.__version__}"
          + (f", triton {__import__('triton').__version__}" if HAVE_TRITON else ", no triton"))
    return 0
