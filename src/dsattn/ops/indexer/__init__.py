"""Lightning indexer (SPEC section 4) and the k-pool indexer's cache pieces (SPEC section 5).

    logit[t, n] = sum_h weights[t, h] * relu(<q[t, h], k[n]>)   (times k_scale[n] for fp8 keys)

Public functions (each a ``torch.library`` custom op with a fake implementation; all write into
caller-given buffers and allocate only an ``out`` that is not given):

- ``indexer_logits``: ragged rows over a flat key array (prefill), DeepGEMM's output convention.
- ``indexer_logits_paged``: rows over the paged 132-byte indexer cache (decode).
- ``kpool_update``: pooled keys of completed pools into the pooled cache, plus the incomplete tail.
- ``kpool_expand``: selected pools -> token positions, plus the visible incomplete tail.

On a CUDA tensor (or on the CPU under ``TRITON_INTERPRET=1``) they run the Triton kernels; otherwise
the reference twins. Every argument is checked first: bad input raises ValueError naming it, before
anything is written. Index values that only a device sync could read (key ranges, table entries, state
slots) are trusted where a function's docstring says so.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..._checks import check_int, check_same_device, check_tensor
from ...formats import FP8, INDEX_DIM, INDEX_ROW_BYTES
from .._eager import op_or_body
from .._triton import kernels_available
from . import reference as _ref

__all__ = ["indexer_logits", "indexer_logits_paged", "kpool_update", "kpool_expand"]

_INT = (torch.int32,)


# ---------------------------------------------------------------------------------------------------
# indexer_logits (ragged, flat keys)
# ---------------------------------------------------------------------------------------------------

def _check_q_weights(q, weights):
    check_tensor("q", q, dtype=(FP8, torch.bfloat16), ndim=3)
    t, hi, d = q.shape
    if d != INDEX_DIM:
        raise ValueError(f"q must have head dim {INDEX_DIM} (last dim), got {d}")
    if not 1 <= hi <= 128:
        raise ValueError(f"q must have 1 to 128 indexer heads (dim 1), got {hi}")
    check_tensor("weights", weights, dtype=torch.float32, shape=(t, hi), last_dim_contiguous=False)
    return t, hi


def _check_out(out, t):
    if out is None:
        return
    check_tensor("out", out, dtype=torch.float32, ndim=2)
    if out.shape[0] != t:
        raise ValueError(f"out must have one row per query row ({t}), got {out.shape[0]}")


def _new_out(t, width, default_width, device):
    """fp32 [t, width] for a call without `out`; default_width() (a host sync) only when width is None."""
    if width is None:
        width = default_width() if t else 0
    width = check_int("width", width, lo=0)
    return torch.empty((t, width), dtype=torch.float32, device=device)


def indexer_logits(q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, k_scale: Optional[torch.Tensor],
                   ks: torch.Tensor, ke: torch.Tensor, out: Optional[torch.Tensor] = None,
                   width: Optional[int] = None) -> torch.Tensor:
    """Indexer logits of ragged query rows against a flat key array (prefill).

    q [T, Hi, 128] fp8 e4m3 or bf16; weights [T, Hi] fp32 (every scale folded in, including a per-(t, h)
    fp8 scale of q); k [N, 128] fp8 e4m3 with k_scale [N] fp32, or bf16 with k_scale None; ks, ke [T]
    int32: row t scores keys ks[t] <= n < ke[t] (ke <= ks: no keys). The keys must exist, 0 <= ks and
    ke <= N: reading the values would cost a device sync, so the kernel trusts them.

    out [T, W] fp32 (any row stride, contiguous last dim) gets DeepGEMM's convention:
    ``out[t, c]`` = logit of key ``ks[t] + c`` for ``c < ke[t] - ks[t]``, and -inf for the rest of the
    row (so a column is a position relative to the request's first key). Keys beyond W columns are
    dropped. When out is None, W = ``width`` (default max(ke - ks), which reads ks/ke on the host).
    Returns out.
    """
    t, hi = _check_q_weights(q, weights)
    check_tensor("k", k, dtype=(FP8, torch.bfloat16), ndim=2, shape=(None, INDEX_DIM))
    if k.dtype == FP8:
        if k_scale is None:
            raise ValueError("k_scale must be given (fp32 [N]) when k is fp8")
        check_tensor("k_scale", k_scale, dtype=torch.float32, shape=(k.shape[0],))
    elif k_scale is not None:
        raise ValueError("k_scale must be None when k is bf16")
    check_tensor("ks", ks, dtype=_INT, shape=(t,))
    check_tensor("ke", ke, dtype=_INT, shape=(t,))
    _check_out(out, t)
    check_same_device(q=q, weights=weights, k=k, k_scale=k_scale, ks=ks, ke=ke, out=out)
    if out is None:
        out = _new_out(t, width, lambda: int((ke.long() - ks.long()).clamp_min(0).max()), q.device)
    if t and out.shape[1]:
        op_or_body("indexer_logits", _logits_impl)(q, weights, k, k_scale, ks, ke, out)
    return out


def _logits_impl(q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, k_scale: Optional[torch.Tensor],
                 ks: torch.Tensor, ke: torch.Tensor, out: torch.Tensor) -> None:
    if kernels_available(q.device):
        from .logits import launch_logits
        launch_logits(q, weights, k, k_scale, ks, ke, out)
    else:
        out.copy_(_ref.indexer_logits_relative_reference(q, weights, k, k_scale, ks, ke, out.shape[1]))


_logits_op = torch.library.custom_op("dsattn::indexer_logits", _logits_impl, mutates_args=("out",))


@_logits_op.register_fake
def _(q, weights, k, k_scale, ks, ke, out) -> None:
    return None


# ---------------------------------------------------------------------------------------------------
# indexer_logits_paged (decode over the 132-byte cache)
# ---------------------------------------------------------------------------------------------------

def indexer_logits_paged(q: torch.Tensor, weights: torch.Tensor, indexer_cache: torch.Tensor,
                         block_table: torch.Tensor, row_req: torch.Tensor, row_len: torch.Tensor,
                         out: Optional[torch.Tensor] = None, width: Optional[int] = None) -> torch.Tensor:
    """Indexer logits of query rows against the paged indexer key cache (decode, any tokens per request).

    q [T, Hi, 128] fp8 e4m3 or bf16; weights [T, Hi] fp32; indexer_cache uint8 [num_blocks, block_size,
    132] (``formats.indexer_cache_views`` layout, contiguous; FlashMLA's [.., 1, 132] accepted);
    block_table [B, M] int32; row_req [T] int32 (block-table row of each query row, 0 <= row_req < B:
    trusted, like ks/ke of indexer_logits); row_len [T] int32 (row t sees positions 0 .. row_len[t] - 1
    of its request).

    out [T, W] fp32 (any row stride, contiguous last dim): ``out[t, c]`` = logit of position c for
    c < row_len[t], -inf for the rest; positions past W are dropped, and so are positions whose block
    lies past the block table's M columns. When out is None, W = ``width`` (default max(row_len)).
    Block ids outside [0, num_blocks) are never dereferenced (their logits are -inf). Returns out.
    """
    t, hi = _check_q_weights(q, weights)
    if isinstance(indexer_cache, torch.Tensor) and indexer_cache.dim() == 4 and indexer_cache.shape[2] == 1:
        indexer_cache = indexer_cache.squeeze(2)
    check_tensor("indexer_cache", indexer_cache, dtype=torch.uint8, ndim=3, shape=(None, None, INDEX_ROW_BYTES))
    if not indexer_cache.is_contiguous():
        raise ValueError("indexer_cache must be contiguous")
    check_tensor("block_table", block_table, dtype=_INT, ndim=2)
    check_tensor("row_req", row_req, dtype=_INT, shape=(t,))
    check_tensor("row_len", row_len, dtype=_INT, shape=(t,))
    _check_out(out, t)
    check_same_device(q=q, weights=weights, indexer_cache=indexer_cache, block_table=block_table,
                      row_req=row_req, row_len=row_len, out=out)
    if out is None:
        out = _new_out(t, width, lambda: int(row_len.max().clamp_min(0)), q.device)
    if t and out.shape[1]:
        op_or_body("indexer_logits_paged", _paged_impl)(q, weights, indexer_cache, block_table, row_req, row_len,
                                                        out)
    return out


def _paged_reference(q, weights, indexer_cache, block_table, row_req, row_len, out):
    nb, bs, _ = indexer_cache.shape
    w = out.shape[1]
    # positions whose block is missing or out of range score -inf, like the kernel
    pos = torch.arange(w, device=q.device)
    col = (pos // bs).clamp_max(block_table.shape[1] - 1)
    blk = block_table.long()[row_req.long()][:, col]
    ok = (pos[None, :] < row_len.long()[:, None]) & (pos[None, :] // bs < block_table.shape[1])
    ok &= (blk >= 0) & (blk < nb)
    safe_table = block_table.long().clamp(0, max(nb - 1, 0)).to(torch.int32)
    lens = row_len.long().clamp(0, min(w, block_table.shape[1] * bs)).to(torch.int32)
    logits = _ref.indexer_logits_paged_reference(q.float(), weights, indexer_cache, safe_table, row_req, lens,
                                                 max_len=w)
    out.copy_(logits.masked_fill(~ok, float("-inf")))


def _paged_impl(q: torch.Tensor, weights: torch.Tensor, indexer_cache: torch.Tensor, block_table: torch.Tensor,
                row_req: torch.Tensor, row_len: torch.Tensor, out: torch.Tensor) -> None:
    if kernels_available(q.device):
        from .logits import launch_logits_paged
        launch_logits_paged(q, weights, indexer_cache, block_table, row_req, row_len, out)
    else:
        _paged_reference(q, weights, indexer_cache, block_table, row_req, row_len, out)


_paged_op = torch.library.custom_op("dsattn::indexer_logits_paged", _paged_impl, mutates_args=("out",))


@_paged_op.register_fake
def _(q, weights, indexer_cache, block_table, row_req, row_len, out) -> None:
    return None


# ---------------------------------------------------------------------------------------------------
# k-pool
# ---------------------------------------------------------------------------------------------------

def kpool_update(k: torch.Tensor, gate: torch.Tensor, ape: torch.Tensor, positions: torch.Tensor,
                 token_req: torch.Tensor, block_table: torch.Tensor, pooled_cache: torch.Tensor,
                 tail_state: torch.Tensor, state_slot: torch.Tensor, single_token_requests: bool = False) -> None:
    """Write this step's completed pools into the pooled key cache and keep the incomplete tail.

    k [T, 128] bf16 or fp32 (this step's indexer keys), gate [T, 128] fp32, ape [P, 128] fp32 (P = kpool
    >= 2), positions [T] int32 (position of each token in its request; a request's tokens are contiguous
    and consecutive), token_req [T] int32 (block-table row), block_table [B, M] int32, pooled_cache
    uint8 [blocks, bs // P, 132] (an indexer cache with P times fewer slots per block, addressed with
    the same block table: pool p sits at ``block_table[r, p // (bs // P)] * (bs // P) + p % (bs // P)``),
    tail_state fp32 [S, P - 1, 256] (keys then gates of each request's incomplete-pool members),
    state_slot [B] int32 (tail_state row of each request).

    A token with pos % P == P - 1 completes pool pos // P: its pooled key (per channel, the softmax over
    members of gate + ape weighting the members' keys; earlier members from this step or tail_state) is
    quantized as ``formats.quantize_fp8`` and written at the pool's slot. Then every other token is stored in
    its request's tail_state row at index pos % P, unless a later token of the request in this step takes that
    index: the members of each request's incomplete pool, and those of a pool the step completed, so that an
    engine that rejects a speculative token which completed a pool can schedule it again (num_cached rolled
    back by one) and the pool is built from the same members. A rollback of r > 1 tokens keeps the state right
    when the rejected tokens do not reach back into an earlier index of the pool being rebuilt (r <= P - pos % P
    for the first rejected position pos); for a deeper one the engine restores the tail_state row it saved before
    the speculative step and schedules that step's accepted tokens again (num_cached back to the step's start).
    The index values (positions, token_req, block-table entries, state_slot < S) are trusted: reading them
    would cost a device sync, so the kernels do not bound-check them (the backend builds them from
    validated metadata and checks state_slot against tail_state: ``IndexerDriver.check_inputs``).
    single_token_requests: the caller knows that no request has more than one token in this step (a decode
    step without speculative tokens); the update then runs in one kernel launch instead of two (ops/indexer/
    kpool.py). Also trusted: with a request of several tokens it could read tail entries its own step rewrites.
    """
    check_tensor("k", k, dtype=(torch.bfloat16, torch.float32), ndim=2, shape=(None, INDEX_DIM))
    t = k.shape[0]
    check_tensor("gate", gate, dtype=torch.float32, shape=(t, INDEX_DIM))
    check_tensor("ape", ape, dtype=torch.float32, ndim=2, shape=(None, INDEX_DIM))
    if not ape.is_contiguous():
        raise ValueError("ape must be contiguous")
    kpool = ape.shape[0]
    if kpool < 2:
        raise ValueError(f"ape must have kpool >= 2 rows, got {kpool}")
    check_tensor("positions", positions, dtype=_INT, shape=(t,))
    check_tensor("token_req", token_req, dtype=_INT, shape=(t,))
    check_tensor("block_table", block_table, dtype=_INT, ndim=2)
    check_tensor("pooled_cache", pooled_cache, dtype=torch.uint8, ndim=3, shape=(None, None, INDEX_ROW_BYTES))
    if not pooled_cache.is_contiguous():
        raise ValueError("pooled_cache must be contiguous")
    check_tensor("tail_state", tail_state, dtype=torch.float32, ndim=3, shape=(None, kpool - 1, 2 * INDEX_DIM))
    if not tail_state.is_contiguous():
        raise ValueError("tail_state must be contiguous")
    check_tensor("state_slot", state_slot, dtype=_INT, shape=(block_table.shape[0],))
    check_same_device(k=k, gate=gate, ape=ape, positions=positions, token_req=token_req, block_table=block_table,
                      pooled_cache=pooled_cache, tail_state=tail_state, state_slot=state_slot)
    if t:
        op_or_body("kpool_update", _kpool_update_impl)(k, gate, ape, positions, token_req, block_table, pooled_cache,
                                                       tail_state, state_slot, bool(single_token_requests))


def _kpool_update_impl(k: torch.Tensor, gate: torch.Tensor, ape: torch.Tensor, positions: torch.Tensor,
                       token_req: torch.Tensor, block_table: torch.Tensor, pooled_cache: torch.Tensor,
                       tail_state: torch.Tensor, state_slot: torch.Tensor, single_token_requests: bool) -> None:
    if kernels_available(k.device):
        from .kpool import launch_kpool_update
        launch_kpool_update(k, gate, ape, positions, token_req, block_table, pooled_cache, tail_state, state_slot,
                            single_token_requests)
    else:
        _ref.kpool_update_reference(k, gate, ape, positions, token_req, block_table, pooled_cache, tail_state,
                                    state_slot)


_kpool_update_op = torch.library.custom_op("dsattn::kpool_update", _kpool_update_impl,
                                           mutates_args=("pooled_cache", "tail_state"))


@_kpool_update_op.register_fake
def _(k, gate, ape, positions, token_req, block_table, pooled_cache, tail_state, state_slot,
      single_token_requests) -> None:
    return None


def kpool_expand(pool_topk: torch.Tensor, positions: torch.Tensor, kpool: int,
                 out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Selected pools -> token positions, then the visible incomplete tail.

    pool_topk [T, K / P] int32 pool numbers within the request (-1 unused), positions [T] int32 (query
    position in its request), kpool = P >= 1 -> out [T, K + P - 1] int32 (any row stride): pool p gives
    tokens pP .. pP + P - 1 in order; after the K pool tokens come the (positions + 1) % P tokens after
    the last complete pool; every other entry is -1. Returns out.
    """
    kpool = check_int("kpool", kpool, lo=1)
    check_tensor("pool_topk", pool_topk, dtype=_INT, ndim=2)
    t, kp = pool_topk.shape
    check_tensor("positions", positions, dtype=_INT, shape=(t,))
    width = kp * kpool + kpool - 1
    if out is None:
        out = torch.empty((t, width), dtype=torch.int32, device=pool_topk.device)
    check_tensor("out", out, dtype=torch.int32, shape=(t, width))
    check_same_device(pool_topk=pool_topk, positions=positions, out=out)
    if t:
        op_or_body("kpool_expand", _kpool_expand_impl)(pool_topk, positions, kpool, out)
    return out


def _kpool_expand_impl(pool_topk: torch.Tensor, positions: torch.Tensor, kpool: int, out: torch.Tensor) -> None:
    if kernels_available(pool_topk.device):
        from .kpool import launch_kpool_expand
        launch_kpool_expand(pool_topk, positions, kpool, out)
    else:
        out.copy_(_ref.kpool_expand(pool_topk, positions, kpool))


_kpool_expand_op = torch.library.custom_op("dsattn::kpool_expand", _kpool_expand_impl, mutates_args=("out",))


@_kpool_expand_op.register_fake
def _(pool_topk, positions, kpool, out) -> None:
    return None
