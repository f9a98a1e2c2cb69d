"""Tensor-parallel indexer prefill (SPEC section 8): each rank selects the top-k of a contiguous slice of
the prefill rows, then the ranks exchange the int32 indices.

The backend's indexer driver calls one function::

    sharded = sharded_prefill_topk(compute_rows, costs, out, group, min_rows_per_rank, staging)

``compute_rows(a, b, out_rows)`` is the driver's own replicated code restricted to prefill rows
``a .. b - 1``; it must give each row the same result whichever rows it is computed with (true of
per-row kernels; a cuBLAS GEMM whose algorithm depends on the row count is not guaranteed to be).
When the gate passes, every rank runs ``compute_rows`` on its planned slice and ``all_gather_rows``
restores ``out``; otherwise one ``compute_rows(0, rows, out)`` runs: the replicated path.

Every rank must call with the same rows, costs, threshold and staging size: the gate and the plan are
pure functions of them, so ranks agree without talking, and a ValueError raised on one rank is raised
on all of them before any collective starts.

Exchanging slices of different sizes, two ways (both on NCCL and gloo):

- ``staging=None``: one broadcast per rank, straight from its rows of ``out`` into the same rows on
  the others. No extra memory and no padding; needs rows of ``out`` to be contiguous (row stride ==
  width), else a staging buffer is allocated for this call.
- ``staging`` given (a workspace buffer, ``staging_spec``): each rank copies up to ``cap`` rows of its
  slice into its block of the buffer, one ``all_gather_into_tensor`` fills every block, and the
  valid rows are copied into ``out``; repeated when a slice is longer than ``cap`` rows, so the
  buffer size is bounded by ``max_bytes`` whatever the plan. Every round moves ``tp * cap`` rows,
  padding included.

These functions orchestrate host-side (a Python callback, a process group, a plan computed on the
host); they are not ``torch.library`` ops and are not meant for CUDA-graph capture (prefill runs eagerly).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from .._checks import check_int, check_same_device, check_tensor
from .group import group_rank, group_size, initialized, usable_group
from .row_shard import check_boundaries, plan_row_shards

DEFAULT_MIN_ROWS_PER_RANK = 16384
DEFAULT_STAGING_BYTES = 256 << 20
_ENV_MIN_ROWS = "DSATTN_TP_MIN_ROWS_PER_RANK"

# torch 2.13 renamed all_gather_into_tensor (same arguments); the GPU machine's torch 2.11 has only the old name
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

__all__ = ["DEFAULT_MIN_ROWS_PER_RANK", "DEFAULT_STAGING_BYTES", "should_shard", "staging_spec",
           "all_gather_rows", "sharded_prefill_topk"]


def resolve_min_rows_per_rank(min_rows_per_rank: int | None) -> int:
    """The gate threshold: the argument, else $DSATTN_TP_MIN_ROWS_PER_RANK, else 16384."""
    if min_rows_per_rank is None:
        env = os.environ.get(_ENV_MIN_ROWS)
        if env is None:
            return DEFAULT_MIN_ROWS_PER_RANK
        try:
            min_rows_per_rank = int(env)
        except ValueError:
            raise ValueError(f"{_ENV_MIN_ROWS} must be an int, got {env!r}") from None
    return check_int("min_rows_per_rank", min_rows_per_rank, lo=0)


def should_shard(group, num_prefill_rows: int, min_rows_per_rank: int | None = DEFAULT_MIN_ROWS_PER_RANK,
                 device: torch.device | str | None = None) -> bool:
    """The gate of SPEC 8: a usable group of TP > 1 ranks (for tensors on `device`, when given) and at
    least ``min_rows_per_rank * TP`` prefill rows (and at least one). None reads the threshold from
    $DSATTN_TP_MIN_ROWS_PER_RANK (default 16384)."""
    rows = check_int("num_prefill_rows", num_prefill_rows, lo=0)
    threshold = resolve_min_rows_per_rank(min_rows_per_rank)
    if not usable_group(group, device):
        return False
    tp = group_size(group)
    return tp > 1 and rows >= max(1, threshold * tp)


def staging_spec(rows: int, width: int, tp: int, max_bytes: int = DEFAULT_STAGING_BYTES
                 ) -> tuple[tuple[int, int], torch.dtype]:
    """Workspace spec ``(shape, dtype)`` of the staging buffer for ``all_gather_rows``.

    rows: the most prefill rows a step can hold; width: the top-k row width (2048, or 2051 for k-pool);
    tp: ranks. Shape ``[tp * cap, width]`` int32 with ``cap = min(rows, max_bytes // (tp * width * 4))``
    rows per rank and round (at least 1): no plan ever needs more than ``tp * rows`` rows, and a plan
    whose longest slice exceeds ``cap`` takes several rounds.
    """
    rows, max_bytes = check_int("rows", rows, lo=0), check_int("max_bytes", max_bytes, lo=0)
    width, tp = check_int("width", width, lo=1), check_int("tp", tp, lo=1)
    cap = max(1, min(rows, max_bytes // (tp * width * 4)))
    return (tp * cap, width), torch.int32


def _check_out(out):
    check_tensor("out", out, dtype=torch.int32, ndim=2)


def _check_staging(staging, out, tp: int) -> None:
    if staging is None:
        return
    check_tensor("staging", staging, dtype=torch.int32, last_dim_contiguous=False)
    check_same_device(out=out, staging=staging)
    if not staging.is_contiguous():
        raise ValueError("staging must be contiguous")
    need = tp * out.shape[1]
    if staging.numel() < need:
        raise ValueError(f"staging must hold at least tp * width = {need} int32 values (one row per rank), "
                         f"got {staging.numel()}; size it with staging_spec")


def all_gather_rows(local: torch.Tensor, boundaries: Sequence[int], out: torch.Tensor, group=None,
                    staging: torch.Tensor | None = None) -> torch.Tensor:
    """Variable-size all-gather of row slices into ``out``.

    local [b[r + 1] - b[r], width] int32: this rank's rows (may be ``out[b[r]:b[r + 1]]`` itself);
    boundaries b: ``tp + 1`` ints from 0 to rows (``plan_row_shards``); out [rows, width] int32
    (contiguous last dim; any row stride with staging); staging: None or a contiguous int32 buffer of
    at least ``tp * width`` values (``staging_spec``), see the module docstring. Returns out, with
    rows ``b[r] .. b[r + 1] - 1`` from rank r, on every rank. Without a process group (TP = 1) it
    copies local into out.
    """
    _check_out(out)
    if initialized() and not usable_group(group, out.device):
        raise ValueError(f"group must be a process group this rank belongs to, with a backend for "
                         f"{out.device} tensors")
    tp, rank = group_size(group), group_rank(group)
    rows, width = out.shape
    b = check_boundaries(boundaries, rows, tp)
    check_tensor("local", local, dtype=torch.int32, shape=(b[rank + 1] - b[rank], width))
    check_same_device(local=local, out=out)
    _check_staging(staging, out, tp)

    mine = out[b[rank]:b[rank + 1]]
    if local.numel() and (local.data_ptr() != mine.data_ptr() or local.stride() != mine.stride()):
        mine.copy_(local)
    if tp == 1 or rows == 0:
        return out
    rows_contiguous = rows <= 1 or out.stride(0) == width
    if staging is None and rows_contiguous:
        _gather_by_broadcast(b, out, group)
        return out
    if staging is None:  # strided rows: stage through a buffer sized for one round
        shape, dtype = staging_spec(max(y - x for x, y in zip(b, b[1:])), width, tp, max_bytes=1 << 62)
        staging = torch.empty(shape, dtype=dtype, device=out.device)
    _gather_padded(b, out, group, staging)
    return out


def _gather_by_broadcast(b: list[int], out: torch.Tensor, group) -> None:
    works = []
    for r, (x, y) in enumerate(zip(b, b[1:])):
        if y > x:
            src = r if group is None else dist.get_global_rank(group, r)
            works.append(dist.broadcast(out[x:y], src=src, group=group, async_op=True))
    for w in works:
        w.wait()


def _gather_padded(b: list[int], out: torch.Tensor, group, staging: torch.Tensor) -> None:
    tp, rank, width = len(b) - 1, group_rank(group), out.shape[1]
    flat = staging.view(-1)
    cap = flat.numel() // (tp * width)
    longest = max(y - x for x, y in zip(b, b[1:]))
    for start in range(0, longest, cap):
        c = min(cap, longest - start)  # rows per rank this round, padding included
        blocks = flat[:tp * c * width].view(tp, c, width)
        n = max(0, min(c, b[rank + 1] - b[rank] - start))
        if n:
            blocks[rank, :n].copy_(out[b[rank] + start:b[rank] + start + n])
        _all_gather_single(blocks.view(tp * c, width), blocks[rank], group=group)
        for r in range(tp):
            n = max(0, min(c, b[r + 1] - b[r] - start))
            if r != rank and n:
                out[b[r] + start:b[r] + start + n].copy_(blocks[r, :n])


def sharded_prefill_topk(compute_rows: Callable[[int, int, torch.Tensor], object], costs, out: torch.Tensor,
                         group=None, min_rows_per_rank: int | None = DEFAULT_MIN_ROWS_PER_RANK,
                         staging: torch.Tensor | None = None, *, boundaries: Sequence[int] | None = None) -> bool:
    """Top-k of all prefill rows into ``out``, sharded over the TP group when the gate passes.

    compute_rows(a, b, out_rows): writes the top-k rows a .. b - 1 of the prefill into out_rows
    [b - a, width] int32 (a view of ``out``); costs [rows] ints: the keys each row scores, ``ke - ks``
    (host memory avoids a device sync; only used to plan); out [rows, width] int32; group: the TP
    group (None: the default group); min_rows_per_rank: the gate threshold (None: the environment's,
    see ``should_shard``); staging: see ``all_gather_rows``; boundaries: a plan already made for
    these rows (``plan_row_shards(costs, tp)``; a driver may plan once per step and reuse it for
    every layer), then costs may be None.

    Returns True when it ran sharded, False when it ran the replicated path. ``out`` is the same either
    way, bit for bit, as long as compute_rows computes each row independently of the others.
    """
    _check_out(out)
    rows = out.shape[0]
    if costs is not None and len(costs) != rows:
        raise ValueError(f"costs must have one entry per row of out ({rows}), got {len(costs)}")
    if costs is None and boundaries is None:
        raise ValueError("costs must be given unless boundaries are")
    if not should_shard(group, rows, min_rows_per_rank, device=out.device):
        if rows:
            compute_rows(0, rows, out)
        return False
    tp, rank = group_size(group), group_rank(group)
    b = plan_row_shards(costs, tp) if boundaries is None else check_boundaries(boundaries, rows, tp)
    _check_staging(staging, out, tp)
    lo, hi = b[rank], b[rank + 1]
    if hi > lo:
        compute_rows(lo, hi, out[lo:hi])
    all_gather_rows(out[lo:hi], b, out, group, staging)
    return True
