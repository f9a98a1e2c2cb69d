"""What a slice of indexer prefill rows costs, for the row-shard planner (SPEC section 8).

Counting only the keys a row scores (``ke - ks``) left the measured slices of a balanced plan up to
21% apart (notes/tp.md, "Cost model"), most of it from unaligned logits widths (below). The model
here, in key-equivalents (1 = one key scored by one row, all 32 or 64 heads), for a row of ``L`` keys
run in a chunk of the indexer's fixed chunk grid whose logits are ``W`` columns wide:

    L + fill * (W - L) + unaligned * W * [W % 16 != 0] + per_row        (additive: one row)
    + per_launch for every chunk a slice touches                         (the planner's launch cost)

- ``L``: the logits products (compute-bound) and the top-k pass over the row's valid columns.
- ``fill``: the -inf the logits kernel stores past a row's keys up to the chunk width (a store only).
- ``unaligned``: a logits row stride that is not a multiple of 16 elements (Triton specializes integer
  arguments on divisibility by 16) made whole chunks slower; the chunks of the earlier bench started at
  each slice's first row, so every slice but the first ran unaligned (tp_tp1_h200.json of d63315c:
  glm-5 256K TP4 slices 59.4 / 72.7 / 73.8 / 73.3 ms; at 1M TP4, whose boundaries 0 and 33296 are
  multiples of 16, 590 / 675 / 592 / 685 ms). It is the top-k's: one 2048-row chunk of 262143 keys
  took 2.99 ms of top-k at width 262144 and 4.43 ms at 262143 (logits 5.41 / 5.22 ms; meta
  ``align_probe`` of bench/results/tp_tp1_h200.json). A grid of widths padded to 16 never pays it.
- ``per_row``: the top-k select in registers (grows with its candidate capacity), the k-pool
  expansion and the row's share of fixed per-row work.
- ``per_launch``: per chunk run (launches, the last partial wave of each kernel, the key gather).

The chunk grid is the driver's (``backend.metadata.plan_indexer_chunks``) or the bench's: it does not
move with the slices, so a slice that starts inside a chunk runs its rows at that chunk's width, and a
row's cost does not depend on the plan. Plans are exact for the model (``row_shard.plan_row_shards``
with the launch costs of the grid).

The coefficients (``default_cost_model``) come from fitting per-slice times; see notes/tp.md for the
fit, its data and its residuals. They are relative to the per-key time, which varies between contexts
(L2 reuse of the key array), so one model serves every context of a preset.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .._checks import check_int
from .row_shard import _as_costs, check_boundaries, plan_row_shards, slice_costs

ALIGN = 16  # a logits width (row stride, fp32 elements) multiple of this runs at the fast rate


@dataclasses.dataclass(frozen=True)
class IndexerCostModel:
    """Coefficients in key-equivalents (module docstring); ``resolution`` integer units per key-equivalent."""

    per_row: float = 0.0
    fill: float = 0.0
    unaligned: float = 0.0
    per_launch: float = 0.0
    resolution: int = 10

    def __post_init__(self):
        for name in ("per_row", "fill", "unaligned", "per_launch"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if self.fill > 1:  # a padded column costing more than a scored key would make rows' costs negative
            raise ValueError(f"fill must be at most 1 (a fraction of a key's cost), got {self.fill!r}")
        check_int("resolution", self.resolution, lo=1)

    @property
    def keys_only(self) -> bool:
        return not (self.per_row or self.fill or self.unaligned or self.per_launch)

    @property
    def launch_units(self) -> int:
        return int(round(self.per_launch * self.resolution))

    def row_costs(self, keys, chunks: Sequence[tuple[int, int, int]]) -> np.ndarray:
        """int64 [n] cost of each row. keys: [n] keys each row scores; chunks: (first row, end row,
        width) of the grid, covering rows 0 .. n in order (empty list when n == 0)."""
        k = _as_costs(keys)
        sizes, width = _grid(chunks, k.size)
        if not k.size:
            return k
        if self.fill and (np.maximum.reduceat(k, np.cumsum(sizes) - sizes) > width).any():
            raise ValueError("keys must not exceed the width of their row's chunk")
        # per row: its keys times (1 - fill) units, rounded to whole units; per chunk (rounded):
        # fill * W + unaligned * W * [W % 16 != 0] + per_row
        w = width.astype(np.float64)
        const = self.resolution * (self.fill * w + self.unaligned * w * (width % ALIGN != 0) + self.per_row)
        cost = k * int(round(self.resolution * (1.0 - self.fill)))
        cost += np.repeat(np.rint(const).astype(np.int64), sizes)
        return cost

    def plan(self, keys, chunks: Sequence[tuple[int, int, int]], parts: int) -> list[int]:
        """Boundaries (parts + 1) minimizing the largest modelled slice cost."""
        costs = self.row_costs(keys, chunks)
        if costs.size == 0:
            return plan_row_shards(costs, parts)
        return plan_row_shards(costs, parts, chunk_starts=[c[0] for c in chunks], launch_cost=self.launch_units)

    def slice_costs(self, keys, chunks: Sequence[tuple[int, int, int]], boundaries: Sequence[int]) -> list[float]:
        """Modelled cost of each slice of a plan, in key-equivalents."""
        costs = self.row_costs(keys, chunks)
        check_boundaries(boundaries, costs.size, len(boundaries) - 1)
        starts = [c[0] for c in chunks] if costs.size else None
        units = slice_costs(costs, boundaries, chunk_starts=starts, launch_cost=self.launch_units)
        return [u / self.resolution for u in units]

    def balance(self, keys, chunks, boundaries) -> float:
        """Largest modelled slice cost over the mean (1.0: perfect)."""
        s = self.slice_costs(keys, chunks, boundaries)
        return max(s) * len(s) / sum(s) if sum(s) else 1.0


KEYS_ONLY = IndexerCostModel(resolution=1)


def _grid(chunks, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows of each chunk, width of each chunk) after checking the chunks tile rows 0 .. n in order."""
    try:
        arr = np.array([(int(a), int(b), int(w)) for a, b, w in chunks], dtype=np.int64).reshape(-1, 3)
    except (TypeError, ValueError):
        raise ValueError("chunks must be a sequence of (first row, end row, width) ints") from None
    a, b, w = arr.T
    if (n == 0) != (arr.shape[0] == 0) or (arr.shape[0] and (a[0] != 0 or b[-1] != n or (b <= a).any()
                                                             or (a[1:] != b[:-1]).any() or (w < 0).any())):
        raise ValueError(f"chunks must tile rows 0 .. {n} in order with widths >= 0, got "
                         f"{arr[:4].tolist()}{' ...' if arr.shape[0] > 4 else ''}")
    return b - a, w


def candidate_capacity(select: int) -> int:
    """The top-k's candidates held in registers (ops.topk.select.candidate_capacity, without the import)."""
    return max(16, 1 << (2 * select - 1).bit_length())


def default_cost_model(select: int) -> IndexerCostModel:
    """The fitted model (notes/tp.md, "Cost model") for a top-k of `select` per row (tokens, or pools)."""
    select = check_int("select", select, lo=1)
    cap = candidate_capacity(select)
    return IndexerCostModel(per_row=PER_ROW_BASE + PER_ROW_PER_CAP * cap, fill=FILL, unaligned=UNALIGNED,
                            per_launch=PER_LAUNCH)


# `dsattn bench tp --fit FILES` (per-case scale, least squares on log time), per preset, in key-equivalents:
#   top-k v3 (tp_tp1_h200.json of 649699d, tp_tp2_h200x2.json):  glm-5 per_row 6761, per_launch 23.8 M,
#     unaligned 0.247 (rms 1.9%); glm-5.3-flash 2832, 19.8 M, 0.136 (rms 3.9%)
#   top-k v4 (tp_tp1_h200.json and tp_tp1_h200_before.json of 95ec898): glm-5 6863, 17.2 M, 0.282 (rms 3.5%);
#     glm-5.3-flash 2519, 28.6 M, 0.148 (rms 4.3%)
# per_row: a line through the two presets' v3 values in the top-k's candidate capacity (4096 and 1024);
# per_launch and unaligned: round values between the fits. `fill` is a prediction (a 4-byte store
# against a scored key's 8 K flops at the measured per-key time), not fitted: in the bench's tail-chunk
# cases W - L is a few thousand columns, too few to tell it from the keys.
PER_ROW_BASE = 1500.0
PER_ROW_PER_CAP = 1.3
FILL = 0.1
UNALIGNED = 0.2
PER_LAUNCH = 20e6
