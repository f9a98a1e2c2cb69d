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


# ---------------------------------------------------------------------------------------------------
# launch costs on a fixed chunk grid, and the indexer cost model (distributed/cost_model.py)
# ---------------------------------------------------------------------------------------------------

from dsattn.distributed.cost_model import KEYS_ONLY, IndexerCostModel, default_cost_model  # noqa: E402


def brute_force_with_launches(costs, parts, starts, launch):
    """Smallest largest-slice cost, a slice paying `launch` per chunk of the grid it touches."""
    costs = [int(c) for c in costs]
    n = len(costs)
    chunk = np.searchsorted(np.asarray(starts), np.arange(n), side="right") - 1

    def cost(i, j):
        return sum(costs[i:j]) + (launch * int(chunk[j - 1] - chunk[i] + 1) if j > i else 0)

    @functools.lru_cache(maxsize=None)
    def best(i, p):
        if p == 1:
            return cost(i, n)
        return min(max(cost(i, j), best(j, p - 1)) for j in range(i, n + 1))

    return best(0, parts)


def test_launch_costs_against_brute_force():
    rng = np.random.default_rng(3)
    for trial in range(150):
        n = int(rng.integers(1, 13))
        costs = rng.integers(0, 20, n) if trial % 3 else np.arange(1, n + 1)
        cuts = sorted(set(rng.integers(1, n, int(rng.integers(0, n))).tolist())) if n > 1 else []
        starts = [0] + cuts
        launch = int(rng.integers(0, 15))
        for parts in (1, 2, 3, 4):
            b = plan_row_shards(costs, parts, chunk_starts=starts, launch_cost=launch)
            check_plan(costs, parts, b)
            got = max(slice_costs(costs, b, chunk_starts=starts, launch_cost=launch))
            assert got == brute_force_with_launches(costs, parts, starts, launch), (costs, starts, launch, parts, b)


def test_launch_costs_prefer_chunk_edges():
    # two chunks of 4 equal rows: a cut on the chunk edge pays no extra launch, so it is the optimum
    costs, starts = [10] * 8, [0, 4]
    assert plan_row_shards(costs, 2, chunk_starts=starts, launch_cost=7) == [0, 4, 8]
    assert slice_costs(costs, [0, 3, 8], chunk_starts=starts, launch_cost=7) == [37, 64]
    assert cost_balance(costs, [0, 4, 8], chunk_starts=starts, launch_cost=7) == 1.0
    # launch cost 0 or no grid: the plain planner
    assert plan_row_shards(costs, 3, chunk_starts=starts, launch_cost=0) == plan_row_shards(costs, 3)
    for bad in ([1, 4], [0, 4, 4], [0, 9], [], "x"):
        with pytest.raises(ValueError, match="chunk_starts"):
            plan_row_shards(costs, 2, chunk_starts=bad, launch_cost=1)
    with pytest.raises(ValueError, match="launch_cost"):
        plan_row_shards(costs, 2, chunk_starts=starts, launch_cost=-1)


def test_million_rows_with_launches():
    """1M causal rows in 512-row chunks into 2/4/8: balanced for the model (exactness: the brute-force test); time printed."""
    n = 1 << 20
    keys = np.arange(1, n + 1, dtype=np.int64)
    chunks = [(a, min(a + 512, n), int(keys[min(a + 512, n) - 1])) for a in range(0, n, 512)]
    model = default_cost_model(2048)
    for parts in (2, 4, 8):
        t0 = time.perf_counter()
        b = model.plan(keys, chunks, parts)
        ms = (time.perf_counter() - t0) * 1e3
        check_boundaries(b, n, parts)
        assert model.balance(keys, chunks, b) < 1.001
        print(f"model plan of {n} rows into {parts}: {ms:.1f} ms, balance {model.balance(keys, chunks, b):.6f}")


def test_cost_model_row_costs():
    m = IndexerCostModel(per_row=5, fill=0.5, unaligned=0.25, per_launch=3, resolution=2)
    keys = [0, 4, 8, 16, 10]
    chunks = [(0, 3, 8), (3, 5, 17)]  # widths 8 (not a multiple of 16) and 17
    # row: R * ((1 - fill) * L + fill * W + unaligned * W * [W % 16 != 0] + per_row)
    want = [2 * (0.5 * L + 0.5 * W + 0.25 * W + 5) for L, W in zip(keys, [8, 8, 8, 17, 17])]
    units = m.row_costs(keys, chunks).tolist()
    assert units == [round(x) for x in want]
    assert m.launch_units == 6
    # the modelled slice costs include a launch per touched chunk
    assert m.slice_costs(keys, chunks, [0, 2, 5]) == [sum(units[:2]) / 2 + 3, sum(units[2:]) / 2 + 6]
    # keys only: the row costs are the keys, and plans match the plain planner
    assert KEYS_ONLY.keys_only and KEYS_ONLY.row_costs(keys, chunks).tolist() == keys
    assert KEYS_ONLY.plan(keys, chunks, 2) == plan_row_shards(keys, 2)
    # an aligned width pays no unaligned term
    assert m.row_costs([4], [(0, 1, 16)]).tolist() == [round(2 * (2 + 8 + 5))]
    assert m.row_costs([], []).tolist() == [] and m.plan([], [], 3) == [0, 0, 0, 0]


def test_cost_model_bad_input():
    m = default_cost_model(512)
    assert m.per_row > default_cost_model(16).per_row  # larger top-k: more per-row work
    for chunks in ([(0, 2, 8)], [(1, 3, 8)], [(0, 2, 8), (1, 3, 8)], [(0, 3, -1)], [(0, 0, 8), (0, 3, 8)], [(0, 3)]):
        with pytest.raises(ValueError, match="chunks"):
            m.row_costs([1, 2, 3], chunks)
    with pytest.raises(ValueError, match="width"):
        m.row_costs([1, 2, 9], [(0, 3, 8)])  # a row with more keys than its chunk's width
    with pytest.raises(ValueError, match="per_row"):
        IndexerCostModel(per_row=-1)
    with pytest.raises(ValueError, match="fill"):
        IndexerCostModel(fill=float("nan"))
    with pytest.raises(ValueError, match="fill"):
        IndexerCostModel(fill=1.5)  # would give rows negative costs
    with pytest.raises(ValueError, match="resolution"):
        IndexerCostModel(resolution=0)
    with pytest.raises(ValueError, match="select"):
        default_cost_model(0)
    with pytest.raises(ValueError, match="costs"):
        m.row_costs([1.5], [(0, 1, 2)])
