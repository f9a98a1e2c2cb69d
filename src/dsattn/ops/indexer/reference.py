"""Reference twins of the lightning indexer (SPEC section 4) and the k-pool indexer (SPEC section 5).

    logit[t, n] = sum_h w[t, h] * relu(<q[t, h], k[n]>)

The model's scales (Hi ** -0.5 * 128 ** -0.5, and any fp8 scale of q) are folded into w. Row t scores
only keys ks[t] <= n < ke[t]; everything else is -inf. Keys may come flat (prefill: keys gathered into
one array, ragged per request) or from the paged 132-byte cache (decode).
"""
from __future__ import annotations

import torch

from ...formats import dequantize_indexer_cache
from ..topk.reference import topk_reference

_CHUNK_ELEMS = 1 << 26


def indexer_logits_reference(q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, ks: torch.Tensor,
                             ke: torch.Tensor) -> torch.Tensor:
    """q [T, Hi, D], weights [T, Hi], k [N, D] (dequantized), ks/ke [T] -> fp32 logits [T, N] (-inf outside)."""
    t, hi, _ = q.shape
    n = k.shape[0]
    out = torch.empty((t, n), dtype=torch.float32, device=q.device)
    kf = k.float()
    col = torch.arange(n, device=q.device)
    chunk = max(1, _CHUNK_ELEMS // max(1, hi * n))
    for s in range(0, t, chunk):
        e = min(t, s + chunk)
        scores = torch.relu(torch.einsum("thd,nd->thn", q[s:e].float(), kf))
        logits = torch.einsum("th,thn->tn", weights[s:e].float(), scores)
        valid = (col[None, :] >= ks[s:e, None].long()) & (col[None, :] < ke[s:e, None].long())
        out[s:e] = logits.masked_fill(~valid, float("-inf"))
    return out


def indexer_logits_paged_reference(q: torch.Tensor, weights: torch.Tensor, indexer_cache: torch.Tensor,
                                   block_table: torch.Tensor, row_req: torch.Tensor, row_len: torch.Tensor,
                                   max_len: int | None = None) -> torch.Tensor:
    """Logits of query rows against the paged indexer cache (decode).

    q [T, Hi, 128], weights [T, Hi], indexer_cache uint8 [blocks, bs, 132], block_table [B, M] int32,
    row_req [T] (request of each row), row_len [T] (row t sees positions 0 .. row_len[t] - 1).
    Returns fp32 [T, max_len] indexed by position (default max_len = max(row_len)), -inf past row_len.
    """
    bs = indexer_cache.shape[1]
    keys = dequantize_indexer_cache(indexer_cache)
    max_len = int(row_len.max()) if max_len is None else max_len
    pos = torch.arange(max_len, device=q.device)
    blk = block_table.long()[row_req.long()][:, (pos // bs).clamp_max(block_table.shape[1] - 1)]
    slots = blk * bs + pos % bs  # [T, max_len]
    visible = pos[None, :] < row_len[:, None].long()
    gathered = keys[torch.where(visible, slots, 0)]  # [T, max_len, 128]
    scores = torch.relu(torch.einsum("thd,tnd->thn", q.float(), gathered))
    logits = torch.einsum("th,thn->tn", weights.float(), scores)
    return logits.masked_fill(~visible, float("-inf"))


def indexer_topk_reference(q, weights, k, ks, ke, topk: int) -> torch.Tensor:
    """Logits then top-k over a flat key array: int32 [T, topk] positions relative to ks (-1 padded)."""
    return topk_reference(indexer_logits_reference(q, weights, k, ks, ke), ks, ke, topk)


# ---------------------------------------------------------------------------------------------------
# k-pool (GLM-5.3-Flash)
# ---------------------------------------------------------------------------------------------------

def kpool_pooled_keys(keys: torch.Tensor, gates: torch.Tensor, ape: torch.Tensor) -> torch.Tensor:
    """Pooled keys of complete pools.

    keys, gates [M, P, D] (a pool's members in order), ape [P, D] -> fp32 [M, D]: per channel, the
    softmax over members of gate + ape weights the members' keys.
    """
    p = torch.softmax(gates.float() + ape.float()[None], dim=1)
    return (p * keys.float()).sum(dim=1)


def kpool_expand(pool_topk: torch.Tensor, positions: torch.Tensor, kpool: int) -> torch.Tensor:
    """Tokens of selected pools, then the visible incomplete tail.

    pool_topk [T, K / P] int (pool numbers, -1 unused), positions [T] (query position in its request)
    -> int32 [T, K + P - 1]: pool p gives tokens pP .. pP + P - 1; the tail is the tokens after the
    last complete pool up to the query, (positions + 1) % P of them; unused entries are -1.
    """
    t, kp = pool_topk.shape
    member = torch.arange(kpool, device=pool_topk.device)
    pools = pool_topk.long()
    toks = pools[..., None] * kpool + member
    toks = torch.where(pools[..., None] >= 0, toks, -1).reshape(t, kp * kpool)
    vis = positions.long() + 1
    tail_start = vis - vis % kpool
    off = torch.arange(kpool - 1, device=pool_topk.device)
    tail = tail_start[:, None] + off
    tail = torch.where(off[None, :] < (vis % kpool)[:, None], tail, -1)
    return torch.cat([toks, tail], dim=1).to(torch.int32)


def kpool_topk_reference(q: torch.Tensor, weights: torch.Tensor, pooled: torch.Tensor, pool_start: torch.Tensor,
                         positions: torch.Tensor, topk: int, kpool: int) -> torch.Tensor:
    """K-pool indexer over a flat array of pooled keys.

    q [T, Hi, D], weights [T, Hi], pooled [Np, D] (all requests' complete pools, each request's pools
    contiguous from pool_start[t]), positions [T] (query position in its request). Pool p of row t is
    visible iff p < (positions[t] + 1) // kpool. Returns int32 [T, topk + kpool - 1] token positions.
    """
    ks = pool_start.long()
    ke = ks + (positions.long() + 1) // kpool
    pool_sel = indexer_topk_reference(q, weights, pooled, ks, ke, topk // kpool)
    return kpool_expand(pool_sel, positions, kpool)
