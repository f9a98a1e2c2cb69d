"""Tensor-parallel indexer prefill (SPEC 8) over gloo, in 2, 3 and 4 CPU processes.

Each world size spawns its processes once and runs every scenario in them: the variable-size row
all-gather (both exchange methods, width 2051, several staging rounds, strided rows), the gate, and the
indexer driver's use of ``sharded_prefill_topk`` on mixed batches (decodes first) for the plain and
the k-pool indexer, above and below the gate, compared with the replicated result exactly; then the
``dsattn bench tp`` entry point. Single-process tests cover TP = 1 and argument checks.

Inputs of the indexer scenarios are small integers (weights multiples of 1/4): every logit is then an
exact fp32 sum whatever the summation order, so equality checks the sharding and the exchange, not
the BLAS; ties are frequent, which also checks that ties resolve the same way on every rank.
"""
from __future__ import annotations

import datetime
import json
import os
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dsattn.bench import tp as bench_tp
from dsattn.distributed import (all_gather_rows, group_size, plan_row_shards, sharded_prefill_topk, should_shard,
                                staging_spec, usable_group)
from dsattn.ops.indexer.reference import indexer_topk_reference, kpool_topk_reference

POISON = -7
TIMEOUT_S = 120


# ---------------------------------------------------------------------------------------------------
# scenarios, run on every rank
# ---------------------------------------------------------------------------------------------------

def _random_boundaries(g, rows, world):
    cuts = torch.randint(0, rows + 1, (world - 1,), generator=g).sort().values.tolist()
    return [0, *cuts, rows]


def check_all_gather(rank, world):
    g = torch.Generator().manual_seed(1000 + world)  # same on every rank
    for width in (5, 2051):
        for trial in range(4):
            rows = int(torch.randint(0, 3 * world + 6, (1,), generator=g))
            b = _random_boundaries(g, rows, world) if trial else plan_row_shards(torch.arange(rows) + 1, world)
            full = torch.randint(-1, 1 << 20, (rows, width), generator=g, dtype=torch.int32)
            local = full[b[rank]:b[rank + 1]].clone()
            longest = max(y - x for x, y in zip(b, b[1:]))
            big = torch.empty(staging_spec(max(rows, 1), width, world)[0], dtype=torch.int32)
            tiny = torch.empty(world * width + 3, dtype=torch.int32)  # one row per rank per round
            two = torch.empty(staging_spec(rows, width, world, max_bytes=world * width * 4 * 2)[0], dtype=torch.int32)
            assert two.shape[0] == world * min(2, max(rows, 1))
            for name, staging, pad in (("broadcast", None, 0), ("padded", big, 0), ("padded-1-row", tiny, 0),
                                       ("padded-2-rows", two, 0), ("strided", None, 3), ("strided-padded", tiny, 3)):
                buf = torch.full((rows, width + pad), POISON, dtype=torch.int32)
                out = buf[:, :width]
                res = all_gather_rows(local, b, out, None, staging)
                assert res is out
                assert torch.equal(out, full), (name, width, b, longest)
                assert (buf[:, width:] == POISON).all(), name
            # local may be the rank's own rows of out
            out = torch.full((rows, width), POISON, dtype=torch.int32)
            out[b[rank]:b[rank + 1]] = local
            all_gather_rows(out[b[rank]:b[rank + 1]], b, out)
            assert torch.equal(out, full)


def check_rejected_everywhere(rank, world):
    """A bad call raises on every rank before any collective, so the group stays usable."""
    out = torch.zeros(8, 4, dtype=torch.int32)
    b = plan_row_shards([1] * 8, world)
    local = out[b[rank]:b[rank + 1]]
    for kwargs, word in (({"staging": torch.zeros(world * 4 - 1, dtype=torch.int32)}, "staging"),
                         ({"staging": torch.zeros(world * 4, dtype=torch.int64)}, "staging")):
        with pytest.raises(ValueError, match=word):
            all_gather_rows(local, b, out, None, **kwargs)
    with pytest.raises(ValueError, match="boundaries"):
        all_gather_rows(local, [0] * world + [7], out)
    with pytest.raises(ValueError, match="local"):
        all_gather_rows(torch.zeros(b[rank + 1] - b[rank] + 1, 4, dtype=torch.int32), b, out)
    with pytest.raises(ValueError, match="costs"):
        sharded_prefill_topk(lambda a, c, o: None, [1] * 7, out, None, 0)
    t = torch.tensor([rank])
    dist.all_reduce(t)
    assert int(t) == world * (world - 1) // 2


def check_gate(rank, world):
    assert usable_group() and group_size() == world
    assert not should_shard(None, 16384 * world - 1)
    assert should_shard(None, 16384 * world)
    assert should_shard(None, 40, min_rows_per_rank=10) == (40 >= 10 * world)
    assert not should_shard(None, 0, min_rows_per_rank=0)
    assert should_shard(None, 1, min_rows_per_rank=0)
    assert should_shard(None, 5 * world, min_rows_per_rank=5, device="cpu")


def _int_inputs(g, rows, keys, heads=3, dim=16):
    q = torch.randint(-3, 4, (rows, heads, dim), generator=g).float()
    w = torch.randint(-8, 9, (rows, heads), generator=g).float() / 4
    k = torch.randint(-3, 4, (keys, dim), generator=g).float()
    return q, w, k


def _mixed_batch(g, kpool):
    """Decodes first (one token each), then prefill chunks; -> (positions, request of each row, contexts,
    number of decode rows)."""
    decodes = [int(x) for x in torch.randint(1, 60, (3,), generator=g)]
    prefills = [(0, 25), (10, 20), (37, 9), (3, 1)]  # (tokens cached, tokens scheduled)
    positions, req, contexts = [], [], []
    for r, ctx in enumerate(decodes):
        positions.append(ctx - 1)
        req.append(r)
        contexts.append(ctx)
    for cached, new in prefills:
        r = len(contexts)
        positions += range(cached, cached + new)
        req += [r] * new
        contexts.append(cached + new)
    return torch.tensor(positions), torch.tensor(req), contexts, len(decodes)


def _drive(rank, world, oracle_rows, width, costs, decode_rows, min_rows, staging):
    """What the backend's indexer driver does: decode rows replicated, prefill rows through the entry point."""
    total = costs.numel()
    out = torch.full((total, width), POISON, dtype=torch.int32)
    out[:decode_rows] = oracle_rows(0, decode_rows)

    def compute_rows(a, b, o):
        o.copy_(oracle_rows(decode_rows + a, decode_rows + b))

    sharded = sharded_prefill_topk(compute_rows, costs[decode_rows:], out[decode_rows:], None, min_rows, staging)
    return out, sharded


def check_indexer_mixed(rank, world, kpool, topk):
    g = torch.Generator().manual_seed(77 + 10 * world + kpool + topk)
    positions, req, contexts, nd = _mixed_batch(g, kpool)
    keys_per_req = [c // kpool for c in contexts]  # tokens (plain) or complete pools (k-pool)
    start = torch.tensor([0, *torch.tensor(keys_per_req).cumsum(0).tolist()])[req]
    q, w, k = _int_inputs(g, positions.numel(), max(1, sum(keys_per_req)))
    if kpool == 1:
        ks, ke = start, start + positions + 1

        def oracle_rows(a, b):
            return indexer_topk_reference(q[a:b], w[a:b], k, ks[a:b], ke[a:b], topk)
    else:
        ks, ke = start, start + (positions + 1) // kpool

        def oracle_rows(a, b):
            return kpool_topk_reference(q[a:b], w[a:b], k, start[a:b], positions[a:b], topk, kpool)
    width = topk + kpool - 1
    want = oracle_rows(0, positions.numel())
    assert want.shape[1] == width
    costs = ke - ks
    prefill_rows = positions.numel() - nd
    spec = staging_spec(prefill_rows, width, world, max_bytes=world * width * 4 * 5)
    for min_rows, staging in ((4, None), (4, torch.empty(spec[0], dtype=torch.int32)), (0, None),
                              (prefill_rows // world, None), (prefill_rows // world + 1, None), (16384, None)):
        out, sharded = _drive(rank, world, oracle_rows, width, costs, nd, min_rows, staging)
        assert sharded == (prefill_rows >= max(1, min_rows * world)), (min_rows, sharded)
        assert torch.equal(out, want), (kpool, topk, min_rows, staging is not None)


def check_bench(rank, world, out_dir):
    name = f"tp_gloo{world}"
    assert bench_tp.main(["--tiny", "--min-rows-per-rank", "12", "--out", out_dir, "--name", name]) == 0
    assert bench_tp.main(["--tiny", "--rows", "30", "--contexts", "64", "--presets", "glm-5", "--out", out_dir,
                          "--name", name + "_chunk"]) == 0
    dist.barrier()


def _worker(rank, world, init_file, out_dir):
    torch.set_num_threads(1)
    # a rank that fails makes the others fail their next collective within the timeout, not hang
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    try:
        check_gate(rank, world)
        check_all_gather(rank, world)
        check_rejected_everywhere(rank, world)
        for kpool, topk in ((1, 16), (1, 2048), (4, 8), (4, 2048)):
            check_indexer_mixed(rank, world, kpool, topk)
        check_bench(rank, world, out_dir)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 3, 4])
def test_gloo(world, tmp_path):
    ctx = mp.spawn(_worker, args=(world, str(tmp_path / "init"), str(tmp_path)), nprocs=world, join=False)
    deadline = time.monotonic() + 2 * TIMEOUT_S
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"gloo workers still running after {2 * TIMEOUT_S} s")
    with open(tmp_path / f"tp_gloo{world}.json") as f:
        res = json.load(f)
    assert res["meta"]["world_size"] == world and res["meta"]["backend"] == "gloo"
    assert {r["preset"] for r in res["rows"]} == {"glm-5", "glm-5.3-flash"}
    for r in res["rows"]:
        assert r["equal"] is True
        assert r["mode"] == ("sharded" if r["rows"] >= 12 * world else "replicated"), r
        assert r["width"] == (8 if r["preset"] == "glm-5" else 11)
        if r["mode"] == "sharded":
            assert r["tp"] == world and r["speedup"] > 0 and 1.0 <= r["cost_balance"] < 2
            assert r["gather_equal"] is True
            assert r["boundaries"][0] == 0 and r["boundaries"][-1] == r["rows"] and len(r["boundaries"]) == world + 1
            if r["plan"] == "model":  # exact for the model: no plan of it is better balanced than 1 + one row's share
                assert r["model_balance"] <= 1.0 + world * 0.5, r
    sharded = [(r["preset"], r["context"], r["plan"]) for r in res["rows"] if r["mode"] == "sharded"]
    assert sharded and {p for *_, p in sharded} == {"keys", "model"}  # one row per plan
    with open(tmp_path / f"tp_gloo{world}_chunk.json") as f:
        rows = json.load(f)["rows"]
    assert [r["plan"] for r in rows] == ["keys", "model"]
    for r in rows:
        assert (r["context"], r["rows"], r["mode"], r["equal"]) == (64, 30, "sharded", True)


# ---------------------------------------------------------------------------------------------------
# one process: TP = 1 and argument checks
# ---------------------------------------------------------------------------------------------------

def test_tp1_falls_back(monkeypatch):
    assert not dist.is_initialized()
    assert not should_shard(None, 10**6, min_rows_per_rank=0)
    out = torch.full((5, 3), POISON, dtype=torch.int32)
    calls = []

    def compute_rows(a, b, o):
        calls.append((a, b))
        o.copy_(torch.arange(a * 3, b * 3, dtype=torch.int32).view(b - a, 3))

    assert sharded_prefill_topk(compute_rows, [1] * 5, out, None, 0) is False
    assert calls == [(0, 5)] and torch.equal(out.flatten(), torch.arange(15, dtype=torch.int32))
    local = torch.ones(5, 3, dtype=torch.int32)
    assert torch.equal(all_gather_rows(local, [0, 5], out), local)
    monkeypatch.setenv("DSATTN_TP_MIN_ROWS_PER_RANK", "3")
    assert not should_shard(None, 10, min_rows_per_rank=None)  # still TP = 1
    monkeypatch.setenv("DSATTN_TP_MIN_ROWS_PER_RANK", "x")
    with pytest.raises(ValueError, match="DSATTN_TP_MIN_ROWS_PER_RANK"):
        should_shard(None, 10, min_rows_per_rank=None)


def test_argument_checks():
    with pytest.raises(ValueError, match="num_prefill_rows"):
        should_shard(None, -1)
    with pytest.raises(ValueError, match="min_rows_per_rank"):
        should_shard(None, 1, min_rows_per_rank=-2)
    out = torch.zeros(4, 3, dtype=torch.int32)
    with pytest.raises(ValueError, match="out"):
        sharded_prefill_topk(lambda a, b, o: None, [1] * 4, out.float())
    with pytest.raises(ValueError, match="costs"):
        sharded_prefill_topk(lambda a, b, o: None, None, out)
    with pytest.raises(ValueError, match="out"):
        all_gather_rows(out, [0, 4], out.t())
    with pytest.raises(ValueError, match="boundaries"):
        all_gather_rows(out, [0, 3], out)
    with pytest.raises(ValueError, match="width"):
        staging_spec(10, 0, 2)
    assert staging_spec(10, 2051, 4) == ((40, 2051), torch.int32)
    assert staging_spec(10**6, 2048, 4, max_bytes=256 << 20) == ((4 * 8192, 2048), torch.int32)
    assert staging_spec(0, 2048, 2) == ((2, 2048), torch.int32)


def test_bench_tp1(tmp_path, capsys):
    assert bench_tp.main(["--tiny", "--out", str(tmp_path), "--name", "tp1"]) == 0
    printed = capsys.readouterr().out
    assert "TP=1" in printed and "fell back" in printed
    with open(os.path.join(tmp_path, "tp1.json")) as f:
        rows = json.load(f)["rows"]
    modes = [(r["preset"], r["context"], r["tp"], r["mode"]) for r in rows]
    for p in ("glm-5", "glm-5.3-flash"):
        for c in (40, 96):
            assert [m[2:] for m in modes if m[:2] == (p, c)] == [(1, "replicated")] + [(2, "projected")] * 2 + \
                [(4, "projected")] * 2
    assert all(r["equal"] for r in rows)
    assert [r["plan"] for r in rows if r["mode"] == "projected"] == ["keys", "model"] * 8
    for r in rows:
        if r["mode"] == "projected":
            assert len(r["rank_compute_ms"]) == r["tp"] == len(r["boundaries"]) - 1 and r["compute_balance"] >= 1.0


def test_bench_tp1_before_mode(tmp_path):
    """--chunking slice --width-align 1 --plans keys: the bench as it ran before the cost model."""
    assert bench_tp.main(["--tiny", "--contexts", "40", "--presets", "glm-5", "--plans", "keys", "--chunking",
                          "slice", "--width-align", "1", "--exclude", "glm-5.3-flash@40", "--out", str(tmp_path),
                          "--name", "before"]) == 0
    with open(os.path.join(tmp_path, "before.json")) as f:
        res = json.load(f)
    assert res["meta"]["chunking"] == "slice" and res["meta"]["width_align"] == 1
    assert [(r["tp"], r.get("plan")) for r in res["rows"]] == [(1, None), (2, "keys"), (4, "keys")]
    assert all(r["equal"] for r in res["rows"])
