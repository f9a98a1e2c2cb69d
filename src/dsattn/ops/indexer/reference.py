"""Reference twins of the lightning indexer (SPEC section 4) and the k-pool indexer (SPEC section 5).

    logit[t, n] = sum_h w[t, h] * relu(<q[t, h], k[n]>)

The model's scales (Hi ** -0.5 * 128 ** -0.5, and any fp8 scale of q) are folded into w. Row t scores
only keys ks[t] <= n < ke[t]; everything else is -inf. Keys may come flat (prefill: keys gathered into
one array, ragged per request) or from the paged 132-byte cache (decode).
"""
from __future__ import annotations

import torch

from ..._checks import FLOAT_DTYPES, INDEX_DTYPES, check_int, check_same_device, check_tensor, check_values
from ...formats import dequantize_indexer_cache, indexer_cache_views, quantize_fp8, slots_from_positions
from ..topk.reference import topk_reference

_CHUNK_ELEMS = 1 << 26
# q and k may arrive fp8 (the quantized kernels' inputs): the reference upcasts everything to fp32
_QK_DTYPES = FLOAT_DTYPES + (torch.float8_e4m3fn,)


def _check_q_weights(q, weights):
    check_tensor("q", q, dtype=_QK_DTYPES, ndim=3, last_dim_contiguous=False)
    check_tensor("weights", weights, dtype=FLOAT_DTYPES, shape=q.shape[:2], last_dim_contiguous=False)


def _check_ranges(t, n, ks, ke, names=("ks", "ke")):
    check_tensor(names[0], ks, dtype=INDEX_DTYPES, shape=(t,), last_dim_contiguous=False)
    check_tensor(names[1], ke, dtype=INDEX_DTYPES, shape=(t,), last_dim_contiguous=False)
    check_same_device(**{names[0]: ks, names[1]: ke})
    check_values(names[0], ks, lo=0)
    check_values(names[1], ke, hi=n)
    check_values(f"{names[1]} - {names[0]}", ke.long() - ks.long(), lo=0)


def indexer_logits_reference(q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor, ks: torch.Tensor,
                             ke: torch.Tensor) -> torch.Tensor:
    """q [T, Hi, D], weights [T, Hi], k [N, D] (dequantized), ks/ke [T] -> fp32 logits [T, N] (-inf outside).

    Requires 0 <= ks[t] <= ke[t] <= N.
    """
    _check_q_weights(q, weights)
    t, hi, d = q.shape
    check_tensor("k", k, dtype=_QK_DTYPES, ndim=2, shape=(None, d), last_dim_contiguous=False)
    n = k.shape[0]
    check_same_device(q=q, weights=weights, k=k, ks=ks, ke=ke)
    _check_ranges(t, n, ks, ke)
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
    _check_q_weights(q, weights)
    values, _ = indexer_cache_views(indexer_cache)
    num_blocks, bs, d = values.shape
    t = q.shape[0]
    if q.shape[2] != d:
        raise ValueError(f"q must have head dim {d} (the indexer cache's), got {q.shape[2]}")
    check_tensor("block_table", block_table, dtype=INDEX_DTYPES, ndim=2, last_dim_contiguous=False)
    check_tensor("row_req", row_req, dtype=INDEX_DTYPES, shape=(t,), last_dim_contiguous=False)
    check_tensor("row_len", row_len, dtype=INDEX_DTYPES, shape=(t,), last_dim_contiguous=False)
    check_same_device(q=q, weights=weights, indexer_cache=indexer_cache, block_table=block_table,
                      row_req=row_req, row_len=row_len)
    check_values("row_req", row_req, lo=0, hi=block_table.shape[0] - 1)
    check_values("row_len", row_len, lo=0, hi=block_table.shape[1] * bs)
    if max_len is not None:
        check_int("max_len", max_len, lo=0)
    # The blocks a row reads must exist; unused tail entries of a block table may hold anything.
    used = torch.arange(block_table.shape[1], device=q.device)[None, :] * bs < row_len[:, None].long()
    check_values("block_table (entries in use)", block_table[row_req.long()][used], lo=0, hi=num_blocks - 1)
    keys = dequantize_indexer_cache(indexer_cache)
    if max_len is None:
        max_len = int(row_len.max()) if t > 0 else 0
    if num_blocks == 0:  # then every row_len is 0 (checked above): nothing is visible
        return torch.full((t, max_len), float("-inf"), dtype=torch.float32, device=q.device)
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
    check_int("topk", topk, lo=1)
    return topk_reference(indexer_logits_reference(q, weights, k, ks, ke), ks, ke, topk)


# ---------------------------------------------------------------------------------------------------
# k-pool (GLM-5.3-Flash)
# ---------------------------------------------------------------------------------------------------

def kpool_pooled_keys(keys: torch.Tensor, gates: torch.Tensor, ape: torch.Tensor) -> torch.Tensor:
    """Pooled keys of complete pools.

    keys, gates [M, P, D] (a pool's members in order), ape [P, D] -> fp32 [M, D]: per channel, the
    softmax over members of gate + ape weights the members' keys.
    """
    check_tensor("keys", keys, dtype=FLOAT_DTYPES, ndim=3, last_dim_contiguous=False)
    check_tensor("gates", gates, dtype=FLOAT_DTYPES, shape=keys.shape, last_dim_contiguous=False)
    check_tensor("ape", ape, dtype=FLOAT_DTYPES, shape=keys.shape[1:], last_dim_contiguous=False)
    check_same_device(keys=keys, gates=gates, ape=ape)
    p = torch.softmax(gates.float() + ape.float()[None], dim=1)
    return (p * keys.float()).sum(dim=1)


def kpool_expand(pool_topk: torch.Tensor, positions: torch.Tensor, kpool: int) -> torch.Tensor:
    """Tokens of selected pools, then the visible incomplete tail.

    pool_topk [T, K / P] int (pool numbers, -1 unused), positions [T] (query position in its request)
    -> int32 [T, K + P - 1]: pool p gives tokens pP .. pP + P - 1; the tail is the tokens after the
    last complete pool up to the query, (positions + 1) % P of them; unused entries are -1.
    """
    check_tensor("pool_topk", pool_topk, dtype=INDEX_DTYPES, ndim=2, last_dim_contiguous=False)
    t, kp = pool_topk.shape
    check_tensor("positions", positions, dtype=INDEX_DTYPES, shape=(t,), last_dim_contiguous=False)
    check_int("kpool", kpool, lo=1)
    check_same_device(pool_topk=pool_topk, positions=positions)
    check_values("positions", positions, lo=0)
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
    check_int("kpool", kpool, lo=1)
    check_int("topk", topk, lo=kpool)
    if topk % kpool:
        raise ValueError(f"topk must be a multiple of kpool ({kpool}), got {topk}")
    _check_q_weights(q, weights)
    t = q.shape[0]
    check_tensor("positions", positions, dtype=INDEX_DTYPES, shape=(t,), last_dim_contiguous=False)
    check_tensor("pooled", pooled, dtype=_QK_DTYPES, ndim=2, shape=(None, q.shape[2]), last_dim_contiguous=False)
    check_tensor("pool_start", pool_start, dtype=INDEX_DTYPES, shape=(t,), last_dim_contiguous=False)
    check_same_device(q=q, weights=weights, pooled=pooled, pool_start=pool_start, positions=positions)
    check_values("positions", positions, lo=0)
    ks = pool_start
    ke = pool_start.long() + (positions.long() + 1) // kpool
    # names the caller's arguments: pool_start beyond the pooled array, or too few pools for a position
    _check_ranges(t, pooled.shape[0], ks, ke,
                  names=("pool_start", "pool_start + (positions + 1) // kpool"))
    pool_sel = indexer_topk_reference(q, weights, pooled, ks, ke, topk // kpool)
    return kpool_expand(pool_sel, positions, kpool)


# ---------------------------------------------------------------------------------------------------
# the public ops' conventions (DeepGEMM's relative columns; the k-pool cache update)
# ---------------------------------------------------------------------------------------------------

def indexer_logits_relative_reference(q: torch.Tensor, weights: torch.Tensor, k: torch.Tensor,
                                      k_scale: torch.Tensor | None, ks: torch.Tensor, ke: torch.Tensor,
                                      width: int) -> torch.Tensor:
    """DeepGEMM's output convention: fp32 [T, width] with column c = key ks[t] + c, -inf from ke - ks on.

    q [T, Hi, D] (fp8 or float), weights [T, Hi], k [N, D] fp8 with k_scale [N] fp32, or float with
    k_scale None; ks/ke [T] int (ke <= ks: an empty row). Keys past `width` columns are dropped.
    """
    kf = k.float() if k_scale is None else k.float() * k_scale.float()[:, None]
    t = q.shape[0]
    out = torch.full((t, width), float("-inf"), dtype=torch.float32, device=q.device)
    empty = ke <= ks  # wherever its ks lies (past N too): nothing to score
    if t == 0 or width == 0 or k.shape[0] == 0 or bool(empty.all()):
        return out
    # rows of one request share a key range: score the union of the non-empty rows' ranges once, then shift each
    # row to its start
    lo, hi = int(ks[~empty].min()), int(ke[~empty].max())
    ks, ke = torch.where(empty, lo, ks), torch.where(empty, lo, ke)
    sub = indexer_logits_reference(q, weights, kf[lo:hi], ks.long() - lo, ke.long() - lo)
    col = torch.arange(width, device=q.device)
    src = ks.long()[:, None] - lo + col[None, :]
    ok = col[None, :] < (ke.long() - ks.long())[:, None]
    vals = sub.gather(1, src.clamp(0, hi - lo - 1))
    return torch.where(ok, vals, out)


def pooled_slots(block_table: torch.Tensor, rows: torch.Tensor, pools: torch.Tensor, pooled_block_size: int
                 ) -> torch.Tensor:
    """Pooled-cache slots of pools: ``block_table[row, p // pbs] * pbs + p % pbs`` (the pooled cache has
    block size pbs = block_size // P and shares the token cache's block table), int64."""
    return slots_from_positions(block_table, rows, pools, pooled_block_size).long()


def kpool_update_reference(k: torch.Tensor, gate: torch.Tensor, ape: torch.Tensor, positions: torch.Tensor,
                           token_req: torch.Tensor, block_table: torch.Tensor, pooled_cache: torch.Tensor,
                           tail_state: torch.Tensor, state_slot: torch.Tensor) -> None:
    """One step of the k-pool key cache, in place.

    k [T, D] (this step's indexer keys), gate [T, D], ape [P, D], positions [T] (position in the request;
    a request's tokens are contiguous and consecutive), token_req [T] (block-table row), block_table
    [B, M], pooled_cache uint8 [blocks, bs // P, 132], tail_state fp32 [S, P - 1, 2 * D] (keys then
    gates of the request's incomplete pool members), state_slot [B] (tail_state row of each request).

    Every token with pos % P == P - 1 completes pool pos // P: its pooled key (earlier members from this
    step or from tail_state) is quantized and written to the pooled cache. Then every other token of the step
    is stored in its request's tail_state row at index pos % P, unless a later token of the request in this
    step takes that index: the members of each request's incomplete pool, and of a pool the step completed, so
    that a rejected speculative token that completed a pool can be scheduled again (its pool's members are
    still there).
    """
    kpool = ape.shape[0]
    d = k.shape[1]
    pos = positions.long()
    req = token_req.long()
    kf, gf = k.float(), gate.float()
    # the tokens that complete a pool this step
    done = torch.nonzero(pos % kpool == kpool - 1).flatten().tolist()
    values, scales = indexer_cache_views(pooled_cache)
    pbs = values.shape[1]
    old_tail = tail_state.clone()  # members come from the state as it was before this step
    for i in done:
        r = int(req[i])
        keys, gates = [], []
        for m in range(kpool):
            j = i - (kpool - 1) + m
            if j >= 0 and int(req[j]) == r and int(pos[j]) == int(pos[i]) - (kpool - 1) + m:
                keys.append(kf[j])
                gates.append(gf[j])
            else:
                slot = int(state_slot[r])
                keys.append(old_tail[slot, m, :d])
                gates.append(old_tail[slot, m, d:])
        pooled = kpool_pooled_keys(torch.stack(keys)[None], torch.stack(gates)[None], ape)
        qv, sc = quantize_fp8(pooled)
        s = int(pooled_slots(block_table, req[i:i + 1], pos[i:i + 1] // kpool, pbs)[0])
        values[s // pbs, s % pbs] = qv[0]
        scales[s // pbs, s % pbs] = sc[0, 0]
    for i in range(k.shape[0]):
        # every member but a pool's last goes to its request's tail state at index pos % P, unless a later token of
        # the request in this step takes that index: the members of its incomplete pool, and those of a pool this
        # step completed (an engine that rejects the completing, speculative token schedules it again and needs them)
        r, m = int(req[i]), int(pos[i]) % kpool
        if m == kpool - 1:
            continue
        j = i + kpool
        if j < k.shape[0] and int(req[j]) == r and int(pos[j]) == int(pos[i]) + kpool:
            continue
        slot = int(state_slot[r])
        tail_state[slot, m, :d] = kf[i]
        tail_state[slot, m, d:] = gf[i]
