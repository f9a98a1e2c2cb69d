"""Row-shard planner of the tensor-parallel indexer prefill (SPEC section 8).

Split ``n`` rows into ``parts`` contiguous slices so that the largest slice cost is as small as
possible, where a row costs the keys it scores (``ke - ks``). Exact for integer costs.

How: with prefix sums ``P``, a cap ``C`` is feasible iff greedy slicing (each slice takes rows while
its cost stays <= C) covers every row in ``parts`` slices; each greedy step is one binary search in
``P``, so a check is O(parts * log n). The optimum lies in ``[lo, lo + max_cost]`` with
``lo = max(max_cost, ceil(total / parts))``: at ``C = lo + max_cost`` every greedy slice but the last
stops only when the next row would pass C, so it holds more than ``total / parts`` and the last slice
gets less than that. Binary search over that range takes ``log2(max_cost)`` checks, so a plan of a
million rows costs the prefix sum (a few milliseconds) plus a few hundred ``searchsorted`` calls.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .._checks import check_int


def _as_costs(costs) -> np.ndarray:
    """costs (torch tensor on any device, numpy array or sequence of ints) -> int64 numpy [n]."""
    if isinstance(costs, torch.Tensor):
        if costs.is_floating_point() or costs.is_complex() or costs.dtype == torch.bool:
            raise ValueError(f"costs must hold integers (keys scored per row), got dtype {costs.dtype}")
        arr = costs.detach().to("cpu", torch.int64).numpy()
    else:
        arr = np.asarray(costs)
        if arr.size == 0:
            arr = arr.astype(np.int64)
        if arr.dtype.kind not in "iu":
            raise ValueError(f"costs must hold integers (keys scored per row), got dtype {arr.dtype}")
        arr = arr.astype(np.int64, copy=False)
    if arr.ndim != 1:
        raise ValueError(f"costs must be 1-D (one cost per row), got shape {list(arr.shape)}")
    if arr.size and int(arr.min()) < 0:
        raise ValueError(f"costs must be >= 0, got a minimum of {int(arr.min())}")
    return arr


def _greedy(prefix: np.ndarray, parts: int, cap: int) -> list[int] | None:
    """Boundaries of greedy slices of cost <= cap (each slice as long as possible), or None if the rows
    do not fit in `parts` slices. Needs cap >= the largest single cost."""
    n = prefix.size - 1
    bounds = [0]
    i = 0
    for _ in range(parts):
        if i < n:
            # the last j with prefix[j] <= prefix[i] + cap: zero-cost rows join the current slice
            i = int(np.searchsorted(prefix, prefix[i] + cap, side="right")) - 1
        bounds.append(i)
    return bounds if i == n else None


def plan_row_shards(costs, parts: int) -> list[int]:
    """Contiguous row slices minimizing the largest slice cost.

    costs: [n] non-negative integers (a torch tensor on any device, a numpy array or a list); parts >= 1.
    Returns ``parts + 1`` boundaries ``0 = b[0] <= b[1] <= ... <= b[parts] = n``: slice r is rows
    ``b[r] .. b[r + 1] - 1``. Every row is in exactly one slice; slices may be empty (fewer rows than
    parts, or zero-cost rows). Among optimal plans this returns the one whose slices are each as long
    as possible from the front (deterministic, so every rank computes the same plan).
    """
    parts = check_int("parts", parts, lo=1)
    c = _as_costs(costs)
    n = c.size
    prefix = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(c, out=prefix[1:])
    if n == 0:
        return [0] * (parts + 1)
    total, biggest = int(prefix[-1]), int(c.max())
    lo = max(biggest, -(-total // parts))
    hi = lo + biggest  # feasible, see the module docstring
    while lo < hi:
        mid = (lo + hi) // 2
        if _greedy(prefix, parts, mid) is not None:
            hi = mid
        else:
            lo = mid + 1
    bounds = _greedy(prefix, parts, lo)
    assert bounds is not None
    return bounds


def check_boundaries(boundaries: Sequence[int], rows: int, parts: int) -> list[int]:
    """Validate a plan: parts + 1 non-decreasing ints from 0 to rows. Returns it as a list of ints."""
    try:
        b = [int(x) for x in boundaries]
    except (TypeError, ValueError):
        raise ValueError(f"boundaries must be a sequence of ints, got {boundaries!r}") from None
    if len(b) != parts + 1:
        raise ValueError(f"boundaries must have {parts + 1} entries (parts + 1), got {len(b)}")
    if b[0] != 0 or b[-1] != rows or any(x > y for x, y in zip(b, b[1:])):
        raise ValueError(f"boundaries must rise from 0 to {rows} (the rows), got {b}")
    return b


def slice_costs(costs, boundaries: Sequence[int]) -> list[int]:
    """Cost of each slice of a plan: [parts] ints."""
    c = _as_costs(costs)
    b = check_boundaries(boundaries, c.size, len(boundaries) - 1)
    prefix = np.zeros(c.size + 1, dtype=np.int64)
    np.cumsum(c, out=prefix[1:])
    return [int(prefix[y] - prefix[x]) for x, y in zip(b, b[1:])]


def cost_balance(costs, boundaries: Sequence[int]) -> float:
    """Largest slice cost over the mean slice cost (1.0 is perfect; 1.0 when there is no cost)."""
    s = slice_costs(costs, boundaries)
    total = sum(s)
    return max(s) * len(s) / total if total else 1.0
