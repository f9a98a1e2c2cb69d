"""k-pool kernels (ops/indexer/kpool.py) under TRITON_INTERPRET=1 against the reference twins, and the
k-pool top-k built from the public ops (logits over pooled keys -> top-k -> expand)."""

from dsattn.ops._triton import allow_runtime_loop_bounds

allow_runtime_loop_bounds()

import pytest
import torch

from dsattn import formats
from dsattn.ops.indexer import indexer_logits, kpool_expand, kpool_update
from dsattn.ops.indexer import reference as ref
from dsattn.ops.topk import topk

pytestmark = pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)

P, BS = 4, 8  # kpool, token block size: the pooled cache has BS // P pools per block


def _steps(schedule, num_req, seed=0):
    """Per step: (k, gate, positions, token_req) from a schedule [[(req, n_tokens), ...], ...]."""
    g = torch.Generator().manual_seed(seed)
    done = [0] * num_req
    steps = []
    for step in schedule:
        pos, req = [], []
        for r, n in step:
            pos += list(range(done[r], done[r] + n))
            req += [r] * n
            done[r] += n
        t = len(pos)
        steps.append((torch.randn(t, 128, generator=g).bfloat16(), torch.randn(t, 128, generator=g),
                      torch.tensor(pos, dtype=torch.int32), torch.tensor(req, dtype=torch.int32)))
    return steps, done


def _state(num_req):
    block_table = torch.randperm(3 * num_req).to(torch.int32).view(num_req, 3)
    pooled = formats.new_indexer_cache(3 * num_req, BS // P).fill_(0x5A)
    tail = torch.full((num_req + 2, P - 1, 256), float("nan"))
    state_slot = torch.randperm(num_req + 2)[:num_req].to(torch.int32)
    return block_table, pooled, tail, state_slot


SCHEDULE = [[(0, 6), (1, 1), (2, 3)],  # prefill chunks and a decode
            [(1, 1), (0, 1), (2, 9)],
            [(0, 1), (1, 1), (2, 1)],
            [(2, 2), (0, 5), (1, 2)]]


def test_kpool_update_matches_reference_over_steps():
    steps, _ = _steps(SCHEDULE, 3)
    ape = torch.randn(P, 128)
    block_table, pooled, tail, state_slot = _state(3)
    pooled_ref, tail_ref = pooled.clone(), tail.clone()
    for k, gate, pos, req in steps:
        kpool_update(k, gate, ape, pos, req, block_table, pooled, tail, state_slot)
        ref.kpool_update_reference(k, gate, ape, pos, req, block_table, pooled_ref, tail_ref, state_slot)
        assert torch.equal(tail.nan_to_num(7.0), tail_ref.nan_to_num(7.0))
        assert torch.equal(pooled, pooled_ref)


def test_kpool_update_one_launch_for_single_token_steps(monkeypatch):
    """single_token_requests (one token a request: a decode step) runs both halves in one launch (session 45): after a
    prefill chunk, P + 2 decode steps (every request completes a pool once and joins its tail otherwise) leave the
    pooled cache and the tail state as the reference's."""
    from dsattn.ops.indexer import kpool as kernels
    launched = []
    for name in ("_update_kernel", "_pool_kernel", "_tail_kernel"):
        kern = getattr(kernels, name)
        monkeypatch.setattr(kernels, name, type("K", (), {"__getitem__": lambda self, grid, n=name, k=kern: (
            launched.append(n), k[grid])[1]})())
    schedule = [[(0, 3), (1, 6), (2, 1)]] + [[(0, 1), (1, 1), (2, 1)]] * (P + 2)
    steps, _ = _steps(schedule, 3, seed=2)
    ape = torch.randn(P, 128)
    block_table, pooled, tail, state_slot = _state(3)
    pooled_ref, tail_ref = pooled.clone(), tail.clone()
    for i, (k, gate, pos, req) in enumerate(steps):
        launched.clear()
        kpool_update(k, gate, ape, pos, req, block_table, pooled, tail, state_slot, single_token_requests=i > 0)
        assert launched == (["_update_kernel"] if i > 0 else ["_pool_kernel", "_tail_kernel"])
        ref.kpool_update_reference(k, gate, ape, pos, req, block_table, pooled_ref, tail_ref, state_slot)
        assert torch.equal(tail.nan_to_num(7.0), tail_ref.nan_to_num(7.0))
        assert torch.equal(pooled, pooled_ref)


def test_kpool_pooled_keys_equal_pools_of_whole_sequence():
    """Step by step, the pooled cache holds the pooled keys of the whole sequence's complete pools."""
    steps, done = _steps(SCHEDULE, 3, seed=1)
    ape = torch.randn(P, 128)
    block_table, pooled, tail, state_slot = _state(3)
    for k, gate, pos, req in steps:
        kpool_update(k, gate, ape, pos, req, block_table, pooled, tail, state_slot)
    keys = torch.cat([s[0] for s in steps]).float()
    gates = torch.cat([s[1] for s in steps])
    reqs = torch.cat([s[3] for s in steps])
    allpos = torch.cat([s[2] for s in steps])
    deq = formats.dequantize_indexer_cache(pooled)
    for r in range(3):
        order = allpos[reqs == r].argsort()
        kr, gr = keys[reqs == r][order], gates[reqs == r][order]
        n_pools = done[r] // P
        want = ref.kpool_pooled_keys(kr[:n_pools * P].view(n_pools, P, 128), gr[:n_pools * P].view(n_pools, P, 128),
                                     ape)
        v, s = formats.quantize_fp8(want)
        slots = ref.pooled_slots(block_table, torch.full((n_pools,), r), torch.arange(n_pools), BS // P)
        assert torch.equal(deq[slots], formats.dequantize_fp8(v, s))


@pytest.mark.parametrize("kpool", [1, 2, 4])
def test_kpool_expand(kpool):
    t, kp = 5, 6
    pool_topk = torch.randint(-1, 20, (t, kp), dtype=torch.int32)
    positions = torch.tensor([0, 1, 2, 3, 50], dtype=torch.int32)
    out = torch.full((t, kp * kpool + kpool - 1), -9, dtype=torch.int32)
    kpool_expand(pool_topk, positions, kpool, out=out)
    assert torch.equal(out, ref.kpool_expand(pool_topk, positions, kpool))


def test_kpool_topk_pipeline():
    """indexer_logits over pooled keys (ks = request's first pool, ke = ks + (pos + 1) // P), topk of K / P
    pools, kpool_expand: equal to kpool_topk_reference on the same quantized pooled keys."""
    topk_k = 8  # K; K / P = 2 pools
    n_pools = [9, 3]
    pool_start = torch.tensor([0, 9], dtype=torch.int32)
    vals, scales = formats.quantize_fp8(torch.randn(sum(n_pools), 128))
    scales = scales[:, 0].contiguous()
    positions = torch.tensor([35, 20, 3, 2, 11, 13], dtype=torch.int32)
    req = torch.tensor([0, 0, 0, 0, 1, 1])
    ps = pool_start[req]
    q, w = torch.randn(6, 4, 128).to(formats.FP8), torch.randn(6, 4)
    ks, ke = ps, (ps + (positions + 1) // P).to(torch.int32)
    logits = indexer_logits(q, w, vals, scales, ks, ke)
    pools = topk(logits, (ke - ks).to(torch.int32), topk_k // P)
    got = kpool_expand(pools, positions, P)
    want = ref.kpool_topk_reference(q, w, formats.dequantize_fp8(vals, scales[:, None]), ps, positions, topk_k, P)
    assert torch.equal(got.sort(dim=1).values, want.sort(dim=1).values)


def test_kpool_rejects():
    block_table, pooled, tail, state_slot = _state(2)
    args = dict(k=torch.randn(3, 128), gate=torch.randn(3, 128), ape=torch.randn(P, 128),
                positions=torch.arange(3, dtype=torch.int32), token_req=torch.zeros(3, dtype=torch.int32),
                block_table=block_table, pooled_cache=pooled, tail_state=tail, state_slot=state_slot)
    before = pooled.clone()
    for name, bad, match in [("gate", torch.randn(3, 64), "gate must have shape"),
                             ("ape", torch.randn(1, 128), "kpool >= 2"),
                             ("tail_state", torch.zeros(4, 2, 256), "tail_state must have shape"),
                             ("state_slot", torch.zeros(3, dtype=torch.int32), "state_slot must have shape"),
                             ("positions", torch.arange(3), "positions must have dtype")]:
        with pytest.raises(ValueError, match=match):
            kpool_update(**{**args, name: bad})
    assert torch.equal(pooled, before)
    with pytest.raises(ValueError, match="kpool must be"):
        kpool_expand(torch.zeros(2, 3, dtype=torch.int32), torch.zeros(2, dtype=torch.int32), 0)
