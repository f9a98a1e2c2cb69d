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

Launch costs (``chunk_starts``, ``launch_cost``): when the rows run in chunks of a fixed grid (the
indexer driver's, which does not move with the slices), a slice also pays ``launch_cost`` once per
chunk it touches, so a cut inside a chunk costs one launch more than a cut on a chunk edge. The slice
``[i, j)`` then costs ``P[j] - P[i] + L * (g(j - 1) - g(i) + 1)`` with ``g`` the chunk of a row, which
still grows with ``j``: with ``Q[j] = P[j] + L * g(j - 1)`` (non-decreasing) each greedy step is still
one ``searchsorted``, and the plan stays exact. The search then runs over ``[lo, whole cost]`` (about
40 checks for a million rows).
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


def _greedy(prefix: np.ndarray, parts: int, cap: int, reach: np.ndarray | None = None,
            base: np.ndarray | None = None) -> list[int] | None:
    """Boundaries of greedy slices of cost <= cap (each slice as long as possible), or None if the rows
    do not fit in `parts` slices. Needs cap >= the largest single-row slice cost.

    Without launch costs a slice from row i reaches the last j with prefix[j] <= prefix[i] + cap. With
    them, reach[j] (the cost of rows 0 .. j - 1 plus the launches up to row j - 1's chunk) and base[i]
    (the same for a slice starting at i) give cost(i, j) = reach[j] - base[i] for j > i."""
    n = prefix.size - 1
    bounds = [0]
    i = 0
    for _ in range(parts):
        if i < n:
            if reach is None:
                # the last j with prefix[j] <= prefix[i] + cap: zero-cost rows join the current slice
                i = int(np.searchsorted(prefix, prefix[i] + cap, side="right")) - 1
            else:
                i = max(i, int(np.searchsorted(reach, base[i] + cap, side="right")) - 1)
        bounds.append(i)
    return bounds if i == n else None


def _chunk_index(chunk_starts, n: int) -> np.ndarray:
    """Chunk of every row, from the grid's first rows (0 first, strictly rising, all < n)."""
    try:
        starts = np.asarray([int(x) for x in chunk_starts], dtype=np.int64)
    except (TypeError, ValueError):
        raise ValueError(f"chunk_starts must be a sequence of ints, got {chunk_starts!r}") from None
    if starts.size == 0 or starts[0] != 0 or (np.diff(starts) <= 0).any() or starts[-1] >= n:
        raise ValueError(f"chunk_starts must rise strictly from 0 and stay below the {n} rows, "
                         f"got {starts[:8].tolist()}{' ...' if starts.size > 8 else ''}")
    sizes = np.diff(starts, append=n)
    return np.repeat(np.arange(starts.size, dtype=np.int64), sizes)


def plan_row_shards(costs, parts: int, *, chunk_starts=None, launch_cost: int = 0) -> list[int]:
    """Contiguous row slices minimizing the largest slice cost.

    costs: [n] non-negative integers (a torch tensor on any device, a numpy array or a list); parts >= 1.
    chunk_starts (optional): first row of every chunk of the fixed grid the rows run in (0 first,
    strictly rising); launch_cost: non-negative int a slice pays per chunk it touches (module docstring).
    Returns ``parts + 1`` boundaries ``0 = b[0] <= b[1] <= ... <= b[parts] = n``: slice r is rows
    ``b[r] .. b[r + 1] - 1``. Every row is in exactly one slice; slices may be empty (fewer rows than
    parts, or zero-cost rows). Among optimal plans this returns the one whose slices are each as long
    as possible from the front (deterministic, so every rank computes the same plan).
    """
    parts = check_int("parts", parts, lo=1)
    launch_cost = check_int("launch_cost", launch_cost, lo=0)
    c = _as_costs(costs)
    n = c.size
    prefix = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(c, out=prefix[1:])
    if n == 0:
        return [0] * (parts + 1)
    total, biggest = int(prefix[-1]), int(c.max())
    reach = base = None
    if chunk_starts is not None and launch_cost:
        g = _chunk_index(chunk_starts, n)
        g *= launch_cost
        reach = prefix.copy()
        reach[1:] += g  # reach[j] = prefix[j] + L * g(j - 1)
        base = prefix[:-1] + g
        base -= launch_cost  # base[i] = prefix[i] + L * (g(i) - 1): a slice from i pays the launch of g(i)
        chunks = len(chunk_starts)
        lo = max(biggest + launch_cost, -(-(total + launch_cost * chunks) // parts))
        hi = total + launch_cost * chunks  # one slice of everything: always feasible
    else:
        if chunk_starts is not None:
            _chunk_index(chunk_starts, n)  # checked even when launches cost nothing
        lo = max(biggest, -(-total // parts))
        hi = lo + biggest  # feasible, see the module docstring
    while lo < hi:
        mid = (lo + hi) // 2
        if _greedy(prefix, parts, mid, reach, base) is not None:
            hi = mid
        else:
            lo = mid + 1
    bounds = _greedy(prefix, parts, lo, reach, base)
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


def slice_costs(costs, boundaries: Sequence[int], *, chunk_starts=None, launch_cost: int = 0) -> list[int]:
    """Cost of each slice of a plan: [parts] ints (with the launches of the chunks it touches, if given)."""
    c = _as_costs(costs)
    b = check_boundaries(boundaries, c.size, len(boundaries) - 1)
    launch_cost = check_int("launch_cost", launch_cost, lo=0)
    prefix = np.zeros(c.size + 1, dtype=np.int64)
    np.cumsum(c, out=prefix[1:])
    out = [int(prefix[y] - prefix[x]) for x, y in zip(b, b[1:])]
    if chunk_starts is not None and c.size:
        g = _chunk_index(chunk_starts, c.size)
        out = [s + (launch_cost * int(g[y - 1] - g[x] + 1) if y > x else 0) for s, (x, y) in zip(out, zip(b, b[1:]))]
    return out


def cost_balance(costs, boundaries: Sequence[int], *, chunk_starts=None, launch_cost: int = 0) -> float:
    """Largest slice cost over the mean slice cost (1.0 is perfect; 1.0 when there is no cost)."""
    s = slice_costs(costs, boundaries, chunk_starts=chunk_starts, launch_cost=launch_cost)
    total = sum(s)
    return max(s) * len(s) / total if total else 1.0
