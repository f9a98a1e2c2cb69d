"""The row-shard planner (SPEC 8): optimal largest slice cost, contiguity, every row once, edge cases."""
import functools
import time

import numpy as np
import pytest
import torch

from dsattn.distributed.row_shard import check_boundaries, cost_balance, plan_row_shards, slice_costs


def brute_force_optimum(costs, parts):
    """Smallest largest-slice cost over every split of the rows into `parts` contiguous slices."""
    costs = [int(c) for c in costs]
    n = len(costs)

    @functools.lru_cache(maxsize=None)
    def best(i, p):  # rows i.. into p slices (empty slices allowed)
        if p == 1:
            return sum(costs[i:])
        return min(max(sum(costs[i:j]), best(j, p - 1)) for j in range(i, n + 1))

    return best(0, parts)


def check_plan(costs, parts, bounds):
    n = len(costs)
    assert len(bounds) == parts + 1
    assert bounds[0] == 0 and bounds[-1] == n
    assert all(x <= y for x, y in zip(bounds, bounds[1:])), bounds
    owner = np.full(n, -1)
    for r, (x, y) in enumerate(zip(bounds, bounds[1:])):
        assert (owner[x:y] == -1).all()
        owner[x:y] = r
    assert (owner >= 0).all(), "every row assigned"
    assert slice_costs(costs, bounds) == [int(np.sum(costs[x:y], dtype=np.int64)) for x, y in zip(bounds, bounds[1:])]


def adversarial_cases():
    yield [1] * 10
    yield [0] * 7
    yield [5]
    yield [10**9] + [1] * 9
    yield [1] * 9 + [10**9]
    yield [1, 100, 1, 100, 1, 100, 1]
    yield list(range(1, 12))  # causal prefill: row t scores t + 1 keys
    yield list(range(11, 0, -1))
    yield [0, 0, 7, 0, 0, 7, 0, 0]
    yield [2**k for k in range(10)]
    yield [3, 3, 3, 4, 4, 4, 5, 5]


@pytest.mark.parametrize("parts", [1, 2, 3, 4, 5])
def test_adversarial_against_brute_force(parts):
    for costs in adversarial_cases():
        costs = np.array(costs, dtype=np.int64)
        bounds = plan_row_shards(costs, parts)
        check_plan(costs, parts, bounds)
        assert max(slice_costs(costs, bounds)) == brute_force_optimum(costs, parts), (costs.tolist(), bounds)


def test_random_against_brute_force():
    rng = np.random.default_rng(1234)
    for trial in range(300):
        n = int(rng.integers(0, 11))
        parts = int(rng.integers(1, 6))
        high = int(rng.choice([2, 10, 1000, 10**12]))
        costs = rng.integers(0, high, n)
        if trial % 3 == 0:  # heavy-tailed: a few rows dominate
            costs = costs * (rng.random(n) < 0.2) * 50 + rng.integers(0, 3, n)
        bounds = plan_row_shards(costs, parts)
        check_plan(costs, parts, bounds)
        assert max(slice_costs(costs, bounds), default=0) == brute_force_optimum(costs, parts), (costs, parts)


def test_empty_and_tiny():
    assert plan_row_shards([], 1) == [0, 0]
    assert plan_row_shards([], 4) == [0, 0, 0, 0, 0]
    assert plan_row_shards(np.zeros(0, dtype=np.int32), 2) == [0, 0, 0]
    assert plan_row_shards([7], 1) == [0, 1]
    assert plan_row_shards([7], 3) == [0, 1, 1, 1]
    assert plan_row_shards([2, 3], 4) == [0, 1, 2, 2, 2]
    assert plan_row_shards([0, 0, 0], 2) == [0, 3, 3]
    assert cost_balance([0, 0], [0, 1, 2]) == 1.0


def test_inputs_torch_numpy_list_agree():
    costs = [4, 1, 7, 7, 2, 9, 3, 3, 1, 8]
    want = plan_row_shards(costs, 3)
    assert plan_row_shards(np.array(costs, dtype=np.uint16), 3) == want
    assert plan_row_shards(torch.tensor(costs, dtype=torch.int32), 3) == want
    assert all(isinstance(x, int) for x in want)


def test_bad_input():
    with pytest.raises(ValueError, match="costs"):
        plan_row_shards([1, -1], 2)
    with pytest.raises(ValueError, match="costs"):
        plan_row_shards(np.array([1.5, 2.0]), 2)
    with pytest.raises(ValueError, match="costs"):
        plan_row_shards(torch.ones(4), 2)
    with pytest.raises(ValueError, match="costs"):
        plan_row_shards(np.ones((2, 2), dtype=np.int64), 2)
    with pytest.raises(ValueError, match="parts"):
        plan_row_shards([1, 2], 0)
    with pytest.raises(ValueError, match="parts"):
        plan_row_shards([1, 2], 2.0)
    with pytest.raises(ValueError, match="boundaries"):
        check_boundaries([0, 3, 2, 4], 4, 3)
    with pytest.raises(ValueError, match="boundaries"):
        check_boundaries([0, 4], 4, 2)
    with pytest.raises(ValueError, match="boundaries"):
        check_boundaries([1, 4], 4, 1)


def test_million_rows_causal_and_random():
    """A 1M-row plan is exact (its largest slice cannot shrink) and balanced; the time is printed, not asserted."""
    n = 1_000_000
    rng = np.random.default_rng(7)
    for costs in (np.arange(1, n + 1, dtype=np.int64),  # one causal prefill
                  rng.integers(1, 1_000_000, n),  # rows of many requests
                  np.repeat(rng.integers(1, 2_000_000, 64), n // 64)):  # chunked tails of 64 requests
        for parts in (2, 4, 8):
            t0 = time.perf_counter()
            bounds = plan_row_shards(costs, parts)
            ms = (time.perf_counter() - t0) * 1e3
            check_boundaries(bounds, costs.size, parts)
            worst = max(slice_costs(costs, bounds))
            # exact: one less than the largest slice cost does not fit in `parts` greedy slices
            prefix = np.concatenate([[0], np.cumsum(costs)])
            i = 0
            for _ in range(parts):
                i = int(np.searchsorted(prefix, prefix[i] + worst - 1, side="right")) - 1
            assert i < costs.size
            assert cost_balance(costs, bounds) < 1.01
            print(f"plan of {n} rows into {parts}: {ms:.1f} ms, balance {cost_balance(costs, bounds):.6f}")
