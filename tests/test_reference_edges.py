"""Edge cases of SPEC sections 3 to 5 on the reference twins, against naive float64 loops written here
from the SPEC's definitions (one row, one entry at a time: slow, obviously right)."""
from __future__ import annotations

import math

import pytest
import torch

from dsattn.formats import KVLayout, new_indexer_cache, new_kv_cache, slots_from_positions
from dsattn.ops.cache.reference import write_indexer_cache_reference, write_kv_cache_reference
from dsattn.ops.indexer.reference import (indexer_logits_paged_reference, indexer_logits_reference,
                                          indexer_topk_reference, kpool_expand, kpool_pooled_keys, kpool_topk_reference)
from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference, sparse_mla_reference
from dsattn.ops.topk.reference import topk_reference


# ---------------------------------------------------------------------------------------------------
# SPEC 3: sparse MLA
# ---------------------------------------------------------------------------------------------------

def _naive_mla(q, kv, indices, sm_scale, d_v, topk_length=None):
    t_, h_, _ = q.shape
    out = torch.zeros(t_, h_, d_v, dtype=torch.float64)
    lse = torch.full((t_, h_), -math.inf, dtype=torch.float64)
    for t in range(t_):
        used = [int(i) for j, i in enumerate(indices[t].tolist())
                if (topk_length is None or j < int(topk_length[t])) and 0 <= i < kv.shape[0]]
        if not used:
            continue
        rows = kv[used].double()
        for h in range(h_):
            s = sm_scale * (rows @ q[t, h].double())
            lse[t, h] = torch.logsumexp(s, 0)
            out[t, h] = torch.softmax(s, 0) @ rows[:, :d_v]
    return out, lse


def _check_mla(got, want):
    out, lse = got
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    torch.testing.assert_close(out.double(), want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse.double(), want[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("heads", [1, 3, 16, 128])
def test_sparse_mla_skips_invalid_entries(heads):
    n, d, t, k = 20, 576, 6, 9
    q, kv = torch.randn(t, heads, d), torch.randn(n, d)
    idx = torch.randint(0, n, (t, k), dtype=torch.int32)
    idx[0, :3] = -1
    idx[1, 2] = n  # one past the end
    idx[1, 5] = 1 << 30
    idx[2, :] = torch.tensor([-1, -5, n, n + 7, -1, 2 * n, -1, -1, n])  # nothing valid
    idx[3, 1] = idx[3, 0]  # listed twice: counts twice
    _check_mla(sparse_mla_reference(q, kv, idx, 0.05, d_v=512), _naive_mla(q, kv, idx, 0.05, 512))
    out, lse = sparse_mla_reference(q, kv, idx, 0.05)
    assert (out[2] == 0).all() and torch.isneginf(lse[2]).all()


def test_sparse_mla_duplicate_counts_twice():
    kv = torch.randn(4, 512)
    q = torch.randn(1, 2, 512)
    once = sparse_mla_reference(q, kv, torch.tensor([[0, 1]]), 0.1)[1]
    twice = sparse_mla_reference(q, kv, torch.tensor([[0, 1, 1]]), 0.1)[1]
    s1 = 0.1 * (q[0] @ kv[1])
    torch.testing.assert_close(twice, torch.logaddexp(once, s1[None]))


def test_sparse_mla_topk_length():
    n, d, t, k = 30, 576, 5, 8
    q, kv = torch.randn(t, 4, d), torch.randn(n, d)
    idx = torch.randint(0, n, (t, k), dtype=torch.int32)
    idx[4, 1] = -1
    lengths = torch.tensor([0, 1, 5, 8, 3], dtype=torch.int32)
    got = sparse_mla_reference(q, kv, idx, 0.07, topk_length=lengths)
    _check_mla(got, _naive_mla(q, kv, idx, 0.07, 512, lengths))
    assert (got[0][0] == 0).all() and torch.isneginf(got[1][0]).all()
    # entries past topk_length are never dereferenced: garbage there changes nothing
    idx2 = idx.clone()
    for t in range(t):
        idx2[t, lengths[t]:] = torch.randint(-(1 << 30), 1 << 30, (k - int(lengths[t]),))
    torch.testing.assert_close(sparse_mla_reference(q, kv, idx2, 0.07, topk_length=lengths), got)


def test_sparse_mla_negative_topk_length_and_no_columns():
    """SPEC 3: a negative topk_length leaves its row no valid entry (as the kernels read it), and so does K = 0."""
    q, kv = torch.randn(3, 2, 576), torch.randn(10, 576)
    idx = torch.randint(0, 10, (3, 4), dtype=torch.int32)
    out, lse = sparse_mla_reference(q, kv, idx, 0.1, topk_length=torch.tensor([4, -1, 2], dtype=torch.int32))
    assert (out[1] == 0).all() and torch.isneginf(lse[1]).all() and torch.isfinite(lse[[0, 2]]).all()
    for out, lse in (sparse_mla_reference(q, kv, idx[:, :0], 0.1),
                     sparse_mla_paged_reference(q, new_kv_cache(3, 4, "fp8_ds_mla", 576), idx[:, :0], 0.1,
                                                "fp8_ds_mla")):
        assert out.shape == (3, 2, 512) and (out == 0).all() and torch.isneginf(lse).all()


def test_sparse_mla_large_logits_stay_finite():
    q = torch.randn(2, 2, 576) * 100
    kv = torch.randn(8, 576) * 100
    idx = torch.tensor([[0, 1, 2, 3], [4, 5, -1, 7]], dtype=torch.int32)
    out, lse = sparse_mla_reference(q, kv, idx, 1.0)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    _check_mla((out, lse), _naive_mla(q, kv, idx, 1.0, 512))


def test_sparse_mla_flashmla_shapes_and_nope():
    q, kv = torch.randn(3, 2, 512), torch.randn(10, 512)
    idx = torch.randint(-1, 10, (3, 4), dtype=torch.int64)
    want = _naive_mla(q, kv, idx, 0.1, 512)
    _check_mla(sparse_mla_reference(q, kv[:, None], idx[:, None], 0.1), want)  # [N, 1, D], [T, 1, K]
    _check_mla(sparse_mla_reference(q.bfloat16(), kv.bfloat16(), idx, 0.1),
               _naive_mla(q.bfloat16().float(), kv.bfloat16().float(), idx, 0.1, 512))


@pytest.mark.parametrize("layout,d", [("bf16", 576), ("bf16", 512), ("fp8_ds_mla", 576), ("fp8_ds_mla", 512),
                                      ("fp8_ds_mla_nope", 512)])
def test_sparse_mla_paged_equals_flat(layout, d):
    """Paged reference == flat reference over the rows the cache holds, for every layout; slots in
    unwritten (NaN) blocks are never read when their entries are invalid."""
    nb, bs = 6, 4
    row_d = 576 if layout == "fp8_ds_mla" else d
    cache = new_kv_cache(nb, bs, layout, row_d)
    cache.view(torch.uint8).fill_(0xFF)  # NaN everywhere until written
    latent = torch.randn(nb * bs, row_d)
    if row_d > d:
        latent[:, d:] = 0
    write_kv_cache_reference(latent, cache, torch.arange(nb * bs, dtype=torch.int32), layout)
    from dsattn.formats import kv_cache_flat, unpack_latent_rows
    rows = unpack_latent_rows(kv_cache_flat(cache), layout, d)
    q = torch.randn(5, 3, d)
    idx = torch.randint(-2, nb * bs + 3, (5, 7), dtype=torch.int32)
    _check_mla(sparse_mla_paged_reference(q, cache, idx, 0.1, layout), _naive_mla(q, rows, idx, 0.1, 512))


def test_sparse_mla_empty_kv():
    """N = 0: every entry is invalid, so every row gives out 0 and lse -inf (flat and paged)."""
    q = torch.randn(3, 2, 576)
    idx = torch.tensor([[-1, 0, 5], [2, -1, -1], [0, 0, 0]], dtype=torch.int32)
    for out, lse in (sparse_mla_reference(q, torch.empty(0, 576), idx, 0.1),
                     sparse_mla_paged_reference(q, new_kv_cache(0, 4, "fp8_ds_mla", 576), idx, 0.1, "fp8_ds_mla")):
        assert out.shape == (3, 2, 512) and (out == 0).all() and torch.isneginf(lse).all()


def test_sparse_mla_paged_never_reads_invalid_slots():
    cache = new_kv_cache(3, 4, "bf16", 576).fill_(float("nan"))
    latent = torch.randn(2, 576)
    write_kv_cache_reference(latent, cache, torch.tensor([5, 9], dtype=torch.int32), "bf16")
    q = torch.randn(2, 2, 576)
    idx = torch.tensor([[5, -1, 12, 9], [-1, -1, 40, -1]], dtype=torch.int32)
    out, lse = sparse_mla_paged_reference(q, cache, idx, 0.1, KVLayout.BF16)
    assert torch.isfinite(out[0]).all() and torch.isfinite(lse[0]).all()
    assert (out[1] == 0).all() and torch.isneginf(lse[1]).all()


# ---------------------------------------------------------------------------------------------------
# SPEC 4: indexer logits and top-k
# ---------------------------------------------------------------------------------------------------

def _naive_logits(q, w, k, ks, ke):
    t_, n = q.shape[0], k.shape[0]
    out = torch.full((t_, n), -math.inf, dtype=torch.float64)
    for t in range(t_):
        for j in range(int(ks[t]), int(ke[t])):
            out[t, j] = sum(float(w[t, h]) * max(0.0, float(q[t, h].double() @ k[j].double()))
                            for h in range(q.shape[1]))
    return out


def _naive_topk(logits_row, lo, hi, k):
    """Positions (relative to lo) of the k best of columns [lo, hi), lower position first on ties."""
    cand = sorted(range(lo, hi), key=lambda c: (-float(logits_row[c]), c))[:k]
    return [c - lo for c in cand] + [-1] * (k - len(cand))


def test_indexer_logits_ragged_ranges():
    t, hi, n = 7, 4, 19
    q, w, k = torch.randn(t, hi, 128), torch.randn(t, hi), torch.randn(n, 128)
    ks = torch.tensor([0, 0, 3, 3, 10, 19, 5], dtype=torch.int32)
    ke = torch.tensor([1, 4, 3, 9, 19, 19, 6], dtype=torch.int32)  # empty rows: 2 and 5
    got = indexer_logits_reference(q, w, k, ks, ke)
    want = _naive_logits(q, w, k, ks, ke)
    assert torch.equal(torch.isneginf(got), torch.isneginf(want))
    fin = torch.isfinite(want)
    torch.testing.assert_close(got.double()[fin], want[fin], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("topk", [1, 4, 8, 40])
def test_indexer_topk_short_contexts_and_relative_positions(topk):
    t, hi, n = 6, 3, 25
    q, w, k = torch.randn(t, hi, 128), torch.rand(t, hi), torch.randn(n, 128)
    ks = torch.tensor([0, 2, 10, 10, 24, 5], dtype=torch.int32)
    ke = torch.tensor([3, 9, 25, 10, 25, 25], dtype=torch.int32)
    got = indexer_topk_reference(q, w, k, ks, ke, topk)
    assert got.dtype == torch.int32 and got.shape == (t, topk)
    logits = _naive_logits(q, w, k, ks, ke)
    for r in range(t):
        assert sorted(got[r].tolist()) == sorted(_naive_topk(logits[r], int(ks[r]), int(ke[r]), topk))


def test_topk_ties_go_to_the_lower_position():
    logits = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0, 3.0, 0.0],
                           [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                           [5.0, -math.inf, -math.inf, 1.0, -math.inf, 2.0, 9.0]])
    starts = torch.tensor([0, 2, 1], dtype=torch.int32)
    ends = torch.tensor([7, 7, 6], dtype=torch.int32)
    got = topk_reference(logits, starts, ends, 3)
    assert got[0].tolist() == [1, 2, 4]  # four 3.0s: the three lowest positions
    assert got[1].tolist() == [0, 1, 2]  # columns 2..4, relative
    # a valid key whose logit is -inf still counts as valid: it beats padding
    got5 = topk_reference(logits, starts, ends, 5)
    assert set(got5[2].tolist()) == {0, 1, 2, 3, 4}
    assert topk_reference(logits, starts, ends, 8)[2].tolist()[5:] == [-1, -1, -1]


def test_topk_random_against_naive():
    t, w = 9, 33
    logits = torch.randint(-3, 4, (t, w)).float()  # many ties
    starts = torch.randint(0, w, (t,))
    ends = torch.minimum(starts + torch.randint(0, w, (t,)), torch.tensor(w))
    for k in (1, 5, 40):
        got = topk_reference(logits, starts.int(), ends.int(), k)
        for r in range(t):
            assert got[r].tolist() == _naive_topk(logits[r], int(starts[r]), int(ends[r]), k)


def test_indexer_paged_matches_flat_over_dequantized_keys():
    nb, bs = 9, 5  # the block size divides no length below
    lengths = [0, 3, 12, 17]
    table = torch.full((4, 4), -1, dtype=torch.int32)  # unused entries -1
    perm = torch.randperm(nb)
    used = 0
    for r, n in enumerate(lengths):
        m = -(-n // bs)
        table[r, :m] = perm[used:used + m]
        used += m
    cache = new_indexer_cache(nb, bs).fill_(255)
    keys = [torch.randn(n, 128) for n in lengths]
    for r, k in enumerate(keys):
        pos = torch.arange(len(k))
        write_indexer_cache_reference(k, cache, slots_from_positions(table, torch.full_like(pos, r), pos, bs))
    # every row of every request, decoding at each position (row_len = position + 1), plus an empty row
    row_req = torch.tensor([0] + [r for r, n in enumerate(lengths) for _ in range(n)], dtype=torch.int32)
    row_len = torch.tensor([0] + [i + 1 for n in lengths for i in range(n)], dtype=torch.int32)
    q, w = torch.randn(len(row_req), 4, 128), torch.randn(len(row_req), 4)
    got = indexer_logits_paged_reference(q, w, cache, table, row_req, row_len)
    assert got.shape == (len(row_req), max(lengths))
    from dsattn.formats import dequantize_fp8, quantize_fp8
    for t in range(len(row_req)):
        n = int(row_len[t])
        k = dequantize_fp8(*quantize_fp8(keys[int(row_req[t])]))[:n]
        want = _naive_logits(q[t:t + 1], w[t:t + 1], k, [0], [n])[0]
        torch.testing.assert_close(got[t, :n].double(), want, rtol=1e-5, atol=1e-5)
        assert torch.isneginf(got[t, n:]).all()
    wide = indexer_logits_paged_reference(q, w, cache, table, row_req, row_len, max_len=20)
    assert wide.shape[1] == 20 and torch.isneginf(wide[:, 17:]).all()
    # a cache of no blocks: only empty rows, any width
    none = indexer_logits_paged_reference(q[:2], w[:2], new_indexer_cache(0, bs), table, row_req[:2],
                                          torch.zeros(2, dtype=torch.int32), max_len=6)
    assert none.shape == (2, 6) and torch.isneginf(none).all()


# ---------------------------------------------------------------------------------------------------
# SPEC 5: k-pool
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kpool", [1, 4, 16])
def test_kpool_expand_tails_of_every_length(kpool):
    topk = 2 * kpool
    positions = torch.arange(3 * kpool + 1, dtype=torch.int32)  # tails 0 .. P-1, several times
    n_vis = (positions + 1) // kpool
    pool_topk = torch.stack([torch.tensor(([p for p in range(int(v))][::-1] + [-1, -1])[:2]) for v in n_vis])
    got = kpool_expand(pool_topk.to(torch.int32), positions, kpool)
    assert got.dtype == torch.int32 and got.shape == (len(positions), topk + kpool - 1)
    seen_tails = set()
    for i, row in enumerate(got.tolist()):
        pos = int(positions[i])
        tail_len = (pos + 1) % kpool
        seen_tails.add(tail_len)
        pools = [p for p in pool_topk[i].tolist() if p >= 0]
        want = [p * kpool + m for p in pools for m in range(kpool)]
        want += list(range(pos + 1 - tail_len, pos + 1))
        assert sorted(v for v in row if v >= 0) == sorted(want)
        assert row.count(-1) == topk + kpool - 1 - len(want)
        assert max(row) <= pos
    assert seen_tails == set(range(kpool))


def _naive_pools(keys, gates, ape, kpool):
    """Pooled keys of a request's complete pools, float64, one pool at a time."""
    out = []
    for p in range(len(keys) // kpool):
        mem = slice(p * kpool, (p + 1) * kpool)
        a = torch.softmax(gates[mem].double() + ape.double(), dim=0)  # per channel, over the members
        out.append((a * keys[mem].double()).sum(0))
    return out


def _naive_kpool(q, w, pools, pos, topk, kpool):
    """One query at position pos over one request's pooled keys: SPEC 5 from the definition."""
    n_pools = (pos + 1) // kpool  # pools whose last token pP + P - 1 <= pos
    scores = [float((w.double() * torch.relu(q.double() @ pools[p])).sum()) for p in range(n_pools)]
    best = sorted(range(n_pools), key=lambda p: (-scores[p], p))[: topk // kpool]
    toks = {p * kpool + m for p in best for m in range(kpool)}
    return toks | set(range(n_pools * kpool, pos + 1))


@pytest.mark.parametrize("kpool,topk", [(4, 8), (4, 16), (16, 32)])
def test_kpool_topk_against_naive(kpool, topk):
    lengths = [2, 5 * kpool + kpool // 2, topk // kpool * kpool + 3]  # shorter than topk, longer, around
    ape = torch.randn(kpool, 128)
    pooled, pool_start, rows = [], [], []
    for r, n in enumerate(lengths):
        keys, gates = torch.randn(n, 128), torch.randn(n, 128)
        m = n // kpool
        start = sum(len(p) for p in pooled)
        pooled.append(kpool_pooled_keys(keys[: m * kpool].view(m, kpool, 128), gates[: m * kpool].view(m, kpool, 128),
                                        ape))
        naive = _naive_pools(keys, gates, ape, kpool)
        torch.testing.assert_close(pooled[-1].double(), torch.stack(naive) if naive else torch.empty(0, 128).double(),
                                   rtol=1e-5, atol=1e-6)
        for pos in range(n):
            rows.append((r, pos, start, naive))
    pooled = torch.cat(pooled)
    q, w = torch.randn(len(rows), 4, 128), torch.rand(len(rows), 4)
    positions = torch.tensor([r[1] for r in rows], dtype=torch.int32)
    starts = torch.tensor([r[2] for r in rows], dtype=torch.int32)
    got = kpool_topk_reference(q, w, pooled, starts, positions, topk, kpool)
    assert got.shape == (len(rows), topk + kpool - 1)
    for t, (_, pos, _, naive) in enumerate(rows):
        row = [v for v in got[t].tolist() if v >= 0]
        assert len(row) == len(set(row)) and all(v <= pos for v in row)
        assert set(row) == _naive_kpool(q[t], w[t], naive, pos, topk, kpool)
