"""Indexer top-k (SPEC section 4): the k largest valid columns of each logits row, as a set.

``topk`` is a ``torch.library`` custom op (``dsattn::topk``) with a fake implementation. On a CUDA
tensor (or on the CPU under ``TRITON_INTERPRET=1``) it runs a radix select (``select.py``; no sort; on sm_90
rows that fit the candidate capacity go to the Gluon select, ``gluon_select.py``); otherwise the reference twin.
Every argument is checked first; bad input raises ValueError naming it.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..._checks import check_int, check_same_device, check_tensor
from .._eager import op_or_body
from .._triton import kernels_available
from .reference import in_column_order, topk_reference

__all__ = ["topk", "topk_scratch_spec", "MAX_TOPK"]

# The largest k topk takes: the ordered select's packed counts hold up to k 8192 (select.py), and k 8192 is
# the largest the GPU tests run (tests/gpu/test_indexer_gpu.py::test_topk_sets). The models use 2048.
MAX_TOPK = 8192


def topk_scratch_spec(num_rows: int, width: int, k: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """Scratch ``topk`` needs for rows of `width` columns: a list of (shape, dtype), in argument order.

    One int32 buffer [num_rows, 2 * cap + SCRATCH_META] that holds each row's candidate columns and keys,
    its threshold and candidate count, and the one-launch path's arrival count and table (cap = the select's
    candidate capacity for k; width 0 when every row fits it outright). Its contents need no initial value:
    every call writes what it reads first.
    """
    num_rows = check_int("num_rows", num_rows, lo=0)
    width = check_int("width", width, lo=0)
    k = check_int("k", k, lo=0)
    from .select import SCRATCH_META, candidate_capacity
    cap = candidate_capacity(k)
    return [((num_rows, 2 * cap + SCRATCH_META if width > cap else 0), torch.int32)]


def topk(logits: torch.Tensor, lengths: torch.Tensor, k: int, out: Optional[torch.Tensor] = None,
         scratch: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The k largest valid columns of each row.

    logits [T, W] fp32 (any row stride, contiguous last dim); lengths [T] int32: row t's valid columns
    are 0 .. lengths[t] - 1 (values past W are treated as W, negative as 0); 1 <= k <= MAX_TOPK (8192).
    -0.0 and +0.0 are equal logits (a tie).
    out [T, k] int32 (any row stride): the row's k largest valid columns as a set (order free), ties
    toward the lower column, padded with -1 when fewer than k are valid. The Triton and Gluon kernels list each set
    in ascending column order, the same in every run, for k <= 8192 (tests/test_topk.py::
    test_rows_come_out_in_column_order; the attention that reads the list sums in its order), and so does the
    fallback to the reference twin (CPU without TRITON_INTERPRET; the twin itself lists in its own order), so every
    path gives the same list. scratch: the int32 buffer of ``topk_scratch_spec(T, W, k)`` (allocated here when None
    and needed). Returns out.
    """
    k = check_int("k", k, lo=1)
    if k > MAX_TOPK:
        raise ValueError(f"k must be <= {MAX_TOPK}, got {k}")
    check_tensor("logits", logits, dtype=torch.float32, ndim=2)
    t, w = logits.shape
    check_tensor("lengths", lengths, dtype=torch.int32, shape=(t,))
    if out is None:
        out = torch.empty((t, k), dtype=torch.int32, device=logits.device)
    check_tensor("out", out, dtype=torch.int32, shape=(t, k))
    need = topk_scratch_spec(t, w, k)[0][0]
    if scratch is not None:
        check_tensor("scratch", scratch, dtype=torch.int32, ndim=2)
        if scratch.shape[0] < need[0] or scratch.shape[1] < need[1]:
            raise ValueError(f"scratch must be at least {list(need)} (topk_scratch_spec), got {list(scratch.shape)}")
    check_same_device(logits=logits, lengths=lengths, out=out, scratch=scratch)
    if t == 0:
        return out
    if scratch is None:
        scratch = torch.empty(need, dtype=torch.int32, device=logits.device)
    op_or_body("topk", _topk_impl)(logits, lengths, k, out, scratch)
    return out


def _topk_impl(logits: torch.Tensor, lengths: torch.Tensor, k: int, out: torch.Tensor, scratch: torch.Tensor) -> None:
    if kernels_available(logits.device):
        from .select import launch_topk
        launch_topk(logits, lengths, k, out, scratch)
    else:
        w = logits.shape[1]
        ends = lengths.long().clamp(0, w)
        out.copy_(in_column_order(topk_reference(logits, torch.zeros_like(ends), ends, k)))


_topk_op = torch.library.custom_op("dsattn::topk", _topk_impl, mutates_args=("out", "scratch"))


@_topk_op.register_fake
def _(logits, lengths, k, out, scratch) -> None:
    return None
