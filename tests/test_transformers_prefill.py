"""dsattn's reference ops against transformers 5.24.0's DSA layers: padding-free causal prefill.

Each kind's tiny random attention module runs every request alone (transformers, batch 1); dsattn runs
all requests as one ragged batch (keys concatenated, per-row ranges ks/ke), from the same weights and
inputs. Top-k sets must agree (up to exact score ties, see _hf_models.assert_same_selection) and the
layer outputs must agree in fp32 to 1e-5 of their largest value.
"""
from __future__ import annotations

import pytest
import torch

from conftest import needs_transformers

pytestmark = needs_transformers

import _hf_models as hf  # noqa: E402
from dsattn.config import from_hf_config  # noqa: E402
from dsattn.ops.indexer.reference import (indexer_logits_reference, indexer_topk_reference,  # noqa: E402
                                          kpool_pooled_keys, kpool_topk_reference)
from dsattn.ops.sparse_mla.reference import sparse_mla_reference  # noqa: E402

REL = 1e-5

# (kind, kpool, topk, request lengths): lengths shorter and longer than topk (in tokens, or in pools)
CASES = [
    ("deepseek_v32", 1, 8, [5, 13, 21]),
    ("glm_moe_dsa", 1, 8, [5, 13, 21]),
    ("glm5_next", 4, 8, [3, 14, 41]),
    ("glm5_next", 16, 32, [7, 40, 70]),
]


def _run_requests(attn, lengths):
    """transformers per request, pieces for dsattn; returns (hf outputs, hf top-k rows, pieces)."""
    outs, tops, parts = [], [], []
    for n in lengths:
        x = torch.randn(1, n, hf.HIDDEN)
        pos = torch.arange(n)
        out, top = hf.run_hf(attn, x, pos)
        outs.append(out)
        tops.append(top)
        parts.append(hf.pieces(attn, x, pos))
    return outs, tops, parts


def _ragged(lengths):
    """Per row: start of its request in the concatenated batch, and its position in the request."""
    starts = torch.cat([torch.full((n,), s) for s, n in zip(torch.tensor([0] + lengths[:-1]).cumsum(0).tolist(),
                                                             lengths)])
    positions = torch.cat([torch.arange(n) for n in lengths])
    return starts, positions


def _to_slots(rows: torch.Tensor, starts: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Positions in each row's request -> flat slots of the concatenated batch; anything not visible
    (transformers also lists masked positions when the context is shorter than top-k) -> -1."""
    r = rows.long()
    ok = (r >= 0) & (r <= positions[:, None])
    return torch.where(ok, starts[:, None] + r, -1).to(torch.int32)


@pytest.mark.parametrize("kind,kpool,topk,lengths", CASES, ids=[f"{c[0]}-P{c[1]}" for c in CASES])
def test_prefill_matches_transformers(kind, kpool, topk, lengths):
    cfg = hf.tiny_config(kind, index_topk=topk, kpool=kpool)
    geo = from_hf_config(cfg.to_dict())
    assert (geo.index_topk, geo.kpool, geo.d_qk) == (topk, kpool, 512 + cfg.qk_rope_head_dim)
    attn = hf.build_attention(cfg)
    assert geo.softmax_scale == pytest.approx(attn.scaling, rel=1e-12)

    outs, tops, parts = _run_requests(attn, lengths)
    cat = lambda name: torch.cat([getattr(p, name) for p in parts])  # noqa: E731
    starts, positions = _ragged(lengths)
    ks = starts.to(torch.int32)
    hf_top = torch.cat([torch.nn.functional.pad(t, (0, geo.topk_width - t.shape[1]), value=-1) for t in tops])

    if kpool == 1:
        ke = (starts + positions + 1).to(torch.int32)
        mine = indexer_topk_reference(cat("iq"), cat("iw"), cat("ik"), ks, ke, geo.index_topk)
        logits = indexer_logits_reference(cat("iq"), cat("iw"), cat("ik"), ks, ke)
        equal_rows = [hf.assert_same_selection(hf_top[t], mine[t], logits[t, starts[t]:], int(positions[t]) + 1,
                                               geo.index_topk) for t in range(len(positions))]
    else:
        ape = attn.indexer.index_kpool_compress_ape
        pooled, pool_start, s = [], [], 0
        for p, n in zip(parts, lengths):
            m = n // kpool
            pooled.append(kpool_pooled_keys(p.ik[:m * kpool].view(m, kpool, 128), p.gate[:m * kpool].view(m, kpool, 128),
                                            ape))
            pool_start += [s] * n
            s += m
        pooled = torch.cat(pooled)
        pool_start = torch.tensor(pool_start, dtype=torch.int32)
        mine = kpool_topk_reference(cat("iq"), cat("iw"), pooled, pool_start, positions.to(torch.int32),
                                    geo.index_topk, kpool)
        assert mine.shape[1] == geo.topk_width == topk + kpool - 1
        pool_ke = (pool_start.long() + (positions + 1) // kpool).to(torch.int32)
        pool_logits = indexer_logits_reference(cat("iq"), cat("iw"), pooled, pool_start, pool_ke)
        equal_rows = []
        for t in range(len(positions)):
            limit = int(positions[t]) + 1
            hf.assert_valid_row(mine[t], limit)
            (hp, htail), (mp, mtail) = hf.pool_split(hf_top[t], limit, kpool), hf.pool_split(mine[t], limit, kpool)
            assert htail == mtail == set(range(limit - limit % kpool, limit))
            sel = lambda pools: torch.tensor(sorted(pools) or [-1])  # noqa: E731
            equal_rows.append(hf.assert_same_selection(sel(hp), sel(mp), pool_logits[t, pool_start[t]:],
                                                       limit // kpool, geo.index_topk // kpool))
    # the comparison must not pass by ties alone
    assert sum(equal_rows) >= 0.8 * len(equal_rows)

    # Attention: with transformers' own selection on every row, and with dsattn's where the sets agree.
    expected = torch.cat(outs)
    q_latent, latent = cat("q_latent"), cat("latent")
    for rows in (_to_slots(hf_top, starts, positions),
                 torch.where(torch.tensor(equal_rows)[:, None], _to_slots(mine, starts, positions),
                             _to_slots(hf_top, starts, positions))):
        out, lse = sparse_mla_reference(q_latent, latent, rows, geo.softmax_scale, d_v=geo.d_v)
        assert torch.isfinite(lse).all()
        hf.assert_close_rel(hf.project_output(attn, out), expected, REL)


def test_prefill_yarn_softmax_scale():
    """DeepSeek-V3.2 runs yarn RoPE: the softmax scale carries mscale ** 2, read from the config."""
    cfg = hf.tiny_config("deepseek_v32", yarn=True)
    geo = from_hf_config(cfg.to_dict())
    attn = hf.build_attention(cfg)
    assert attn.scaling != (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim) ** -0.5
    assert geo.softmax_scale == pytest.approx(attn.scaling, rel=1e-12)
    n = 12
    x = torch.randn(1, n, hf.HIDDEN)
    pos = torch.arange(n)
    expected, top = hf.run_hf(attn, x, pos)
    p = hf.pieces(attn, x, pos)
    rows = _to_slots(top, torch.zeros(n, dtype=torch.long), pos)
    out, _ = sparse_mla_reference(p.q_latent, p.latent, rows, geo.softmax_scale)
    hf.assert_close_rel(hf.project_output(attn, out), expected, REL)


def test_shared_layer_reuses_full_layer_topk():
    """GLM-5 "shared" layers take the previous full layer's top-k: dsattn reads the schedule from the
    config and the shared layer's output matches with the full layer's dsattn top-k."""
    cfg = hf.tiny_config("glm_moe_dsa", num_layers=2, indexer_types=["full", "shared"])
    geo = from_hf_config(cfg.to_dict())
    assert geo.indexer_types == ("full", "shared")
    assert not geo.is_shared_layer(0) and geo.is_shared_layer(1)
    full, shared = hf.build_attention(cfg, 0), hf.build_attention(cfg, 1)
    assert shared.indexer is None
    n = 15
    x0, x1 = torch.randn(1, n, hf.HIDDEN), torch.randn(1, n, hf.HIDDEN)
    pos = torch.arange(n)
    _, top0 = hf.run_hf(full, x0, pos)
    expected, top1 = hf.run_hf(shared, x1, pos, prev_topk=top0)
    assert torch.equal(top1, top0)

    p0, p1 = hf.pieces(full, x0, pos), hf.pieces(shared, x1, pos)
    zeros = torch.zeros(n, dtype=torch.int32)
    mine = indexer_topk_reference(p0.iq, p0.iw, p0.ik, zeros, (pos + 1).to(torch.int32), geo.index_topk)
    logits = indexer_logits_reference(p0.iq, p0.iw, p0.ik, zeros, (pos + 1).to(torch.int32))
    equal = [hf.assert_same_selection(top0[t], mine[t], logits[t], t + 1, geo.index_topk) for t in range(n)]
    rows = torch.where(torch.tensor(equal)[:, None], _to_slots(mine, zeros.long(), pos), _to_slots(top0, zeros.long(), pos))
    out, _ = sparse_mla_reference(p1.q_latent, p1.latent, rows, geo.softmax_scale)
    hf.assert_close_rel(hf.project_output(shared, out), expected, REL)


@pytest.mark.parametrize("kpool", [4, 16])
def test_kpool_pooled_keys_match_transformers(kpool):
    """kpool_pooled_keys equals Glm5NextTextIndexer.get_pooled_states on complete pools."""
    cfg = hf.tiny_config("glm5_next", index_topk=2 * kpool, kpool=kpool)
    attn = hf.build_attention(cfg)
    n = 3 * kpool + kpool // 2  # three complete pools and an incomplete one
    x = torch.randn(1, n, hf.HIDDEN)
    p = hf.pieces(attn, x, torch.arange(n))
    packed = torch.cat([p.ik, p.gate, torch.ones(n, 1)], dim=-1)[None]
    keys, members, complete = attn.indexer.get_pooled_states(packed)
    assert complete[0].tolist() == [True, True, True]  # the incomplete pool is not a candidate
    assert members[0, :3].flatten().tolist() == list(range(3 * kpool))
    m = 3 * kpool
    mine = kpool_pooled_keys(p.ik[:m].view(3, kpool, 128), p.gate[:m].view(3, kpool, 128),
                             attn.indexer.index_kpool_compress_ape)
    torch.testing.assert_close(mine, keys[0, :3].float(), rtol=1e-6, atol=1e-6)
