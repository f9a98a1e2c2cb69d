"""A twin of gluon_pair's softmax recurrence in PyTorch (the per-step arithmetic of `_wg_pair`, both warpgroups, one
64-row program, scores already in log2 units), with PrefillConfig.lazy 0 and 1, against a plain softmax: the lazy
form (O rescaled only when a row's max rises more than 2^LAZY_LOG2 above the max in use) gives the same attention
and lse, keeps P at most 2^LAZY_LOG2, and skips the rescales it should (tests/gpu/test_sparse_mla_prefill_gpu.py
test_pair_options runs the kernel itself). Both column halves of O are followed, each by its own warpgroup's route.
A change to the kernel's recurrence needs the same change here."""
import math

import pytest
import torch

LAZY_LOG2 = 8.0  # gluon_pair.LAZY_LOG2
NEG_INF = float("-inf")


def _up(m_new, m_used):
    return (m_new - m_used) > LAZY_LOG2  # NaN (both -inf) compares false, as in the kernel


def pair_softmax(s, v, lazy):
    """s: [rows, n] scores (log2 units, -inf = invalid), v: [n, d]; blocks of 64, step i: warpgroup 0 block 2 i,
    warpgroup 1 block 2 i + 1. Returns (o by warpgroup 0's route, o by warpgroup 1's, lse2, p_max, rescales issued,
    rescales skipped)."""
    rows, n = s.shape
    blocks = [s[:, j:j + 64] for j in range(0, n, 64)]
    vb = [v[j:j + 64] for j in range(0, n, 64)]
    if len(blocks) % 2:
        blocks.append(torch.full_like(blocks[0], NEG_INF))
        vb.append(torch.zeros_like(vb[0]))
    m = torch.full((rows,), NEG_INF)
    l0, l1 = torch.zeros(rows), torch.zeros(rows)
    acc = torch.zeros(rows, v.shape[1])  # warpgroup 0's route (the kernel's columns 0..255; all of v's here)
    acc1 = torch.zeros(rows, v.shape[1])  # warpgroup 1's route (columns 256..511)
    p_max, issued, skipped = 0.0, 0, 0
    nz = lambda x: torch.where(x == NEG_INF, torch.zeros_like(x), x)  # noqa: E731

    def rescale(acc, f, need):
        nonlocal issued, skipped
        if need:
            issued += 1
            return None if acc is None else acc * f[:, None]
        skipped += 1
        return acc

    for i in range(len(blocks) // 2):
        s0, s1 = blocks[2 * i], blocks[2 * i + 1]
        m0 = torch.maximum(m, s0.max(1).values)  # warpgroup 0
        up0 = _up(m0, m) if lazy else torch.ones(rows, dtype=torch.bool)
        mp = torch.where(up0, m0, m)
        alpha0 = torch.exp2(m - nz(mp))
        p0 = torch.exp2(s0 - nz(mp)[:, None])
        l0 = l0 * alpha0 + p0.sum(1)
        acc = rescale(acc, alpha0, not lazy or bool((up0 & (m != NEG_INF)).any()))
        mc = torch.maximum(mp, s1.max(1).values)  # warpgroup 1, given mp
        up1 = _up(mc, mp) if lazy else torch.ones(rows, dtype=torch.bool)
        mc = torch.where(up1, mc, mp)
        alpha1 = torch.exp2(m - nz(mc))
        p1 = torch.exp2(s1 - nz(mc)[:, None])
        l1 = l1 * alpha1 + p1.sum(1)
        acc1 = rescale(acc1, alpha1, not lazy or bool(((mc != m) & (m != NEG_INF)).any()))
        # the two column halves of O reach the same values by two routes: warpgroup 0's half alpha0, + P0 V, beta,
        # + P1 V; warpgroup 1's alpha1 (= alpha0 beta), + (P0 beta) V, + P1 V
        beta = torch.where(mp == NEG_INF, torch.ones(rows), torch.exp2(mp - nz(mc)))
        tile = (p0 * beta[:, None]).half()
        acc1 = acc1 + tile.float() @ vb[2 * i] + p1.half().float() @ vb[2 * i + 1]
        acc = acc + p0.half().float() @ vb[2 * i]
        acc = rescale(acc, beta, not lazy or bool(((mc != mp) & (mp != NEG_INF)).any()))
        l0 = l0 * beta
        acc = acc + p1.half().float() @ vb[2 * i + 1]
        p_max = max(p_max, p0.max().item(), p1.max().item())
        m = mc
    l = l0 + l1
    empty = l == 0
    o = acc / torch.where(empty, torch.ones_like(l), l)[:, None]
    o1 = acc1 / torch.where(empty, torch.ones_like(l), l)[:, None]
    lse = torch.where(empty, torch.full_like(l, NEG_INF), m + torch.log2(torch.where(empty, torch.ones_like(l), l)))
    return o, o1, lse, p_max, issued, skipped


@pytest.mark.parametrize("spread, n", [(1.0, 2048), (16.0, 2048), (16.0, 320), (40.0, 1000)])
def test_lazy_matches_softmax(spread, n):
    g = torch.Generator().manual_seed(int(spread) * 7 + n)
    rows = 64
    s = torch.randn(rows, n, generator=g) * spread
    s[:, n // 2:] += torch.linspace(0, 3 * spread, n - n // 2)  # maxima rising along the list
    s[torch.rand(rows, n, generator=g) < 0.2] = NEG_INF  # invalid entries
    s[3] = NEG_INF  # a row with no valid entry
    s[5, :700] = NEG_INF  # a row whose first valid entry comes late
    v = torch.randn(n, 32, generator=g)
    keep = ~torch.isneginf(s).all(1)
    ref = torch.softmax(s[keep] * math.log(2), 1) @ v
    ref_lse = torch.logsumexp(s[keep] * math.log(2), 1) / math.log(2)
    for lazy in (0, 1):
        o, o1, lse, p_max, issued, skipped = pair_softmax(s, v, lazy)
        for got in (o, o1):
            torch.testing.assert_close(got[keep], ref, atol=3e-3, rtol=3e-3)
            assert got[~keep].eq(0).all()
        torch.testing.assert_close(lse[keep], ref_lse, atol=1e-5, rtol=1e-5)
        assert torch.isneginf(lse[~keep]).all()
        assert p_max <= 2.0 ** (LAZY_LOG2 if lazy else 0)
        if not lazy:
            assert skipped == 0
    steps = math.ceil(math.ceil(n / 64) / 2)
    _, _, _, _, issued, skipped = pair_softmax(s, v, 1)
    assert issued + skipped == 3 * steps  # warpgroup 0's two rescales a step, warpgroup 1's one
    if spread == 1.0:  # maxima within 2^8 of the first ones: nothing rescaled (a row's first max, from -inf, is free)
        assert issued == 0
    else:
        assert 0 < issued < 3 * steps
