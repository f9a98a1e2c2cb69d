"""Reference twin of sparse MLA attention (SPEC section 3), plain PyTorch, fp32 math.

    s_j      = sm_scale * <q[t, h], c[idx_j]>            (all D_qk dims)
    out[t,h] = sum_j softmax_j(s) * c[idx_j][:d_v]
    lse[t,h] = ln(sum_j exp(s_j))

Entry j of row t is valid iff j < topk_length[t] (when given) and 0 <= indices[t, j] < N. Invalid
entries are never dereferenced. A row with no valid entry gives out = 0, lse = -inf.
"""
from __future__ import annotations

import torch

from ...formats import KVLayout, as_layout, kv_cache_flat, unpack_latent_rows

# Tokens per chunk, so that the gathered [chunk, topk, D_qk] fp32 block stays small.
_CHUNK_ELEMS = 1 << 25


def valid_entries(indices: torch.Tensor, num_slots: int, topk_length: torch.Tensor | None) -> torch.Tensor:
    """Bool [T, K]: which index entries are used (SPEC 3)."""
    valid = (indices >= 0) & (indices < num_slots)
    if topk_length is not None:
        j = torch.arange(indices.shape[1], device=indices.device)
        valid &= j[None, :] < topk_length[:, None].to(indices.device)
    return valid


def _attend(q: torch.Tensor, rows: torch.Tensor, valid: torch.Tensor, sm_scale: float, d_v: int):
    """q [T, H, D] fp32, rows [T, K, D] fp32 (gathered), valid [T, K] -> (out [T, H, d_v], lse [T, H])."""
    s = torch.einsum("thd,tkd->thk", q, rows) * sm_scale
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None].masked_fill(torch.isinf(lse)[..., None], 0.0))
    p = p.masked_fill(~valid[:, None, :], 0.0)
    out = torch.einsum("thk,tkd->thd", p, rows[..., :d_v])
    return out, lse


def _run(q, gather, num_slots, indices, sm_scale, d_v, topk_length):
    t, h, d = q.shape
    k = indices.shape[1]
    out = torch.empty((t, h, d_v), dtype=torch.float32, device=q.device)
    lse = torch.empty((t, h), dtype=torch.float32, device=q.device)
    valid = valid_entries(indices, num_slots, topk_length)
    chunk = max(1, _CHUNK_ELEMS // max(1, k * d))
    for s in range(0, t, chunk):
        e = min(t, s + chunk)
        idx = torch.where(valid[s:e], indices[s:e].long(), 0)
        rows = gather(idx.reshape(-1)).reshape(e - s, k, -1)[..., :d]
        out[s:e], lse[s:e] = _attend(q[s:e].float(), rows, valid[s:e], sm_scale, d_v)
    return out, lse


def sparse_mla_reference(q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, sm_scale: float,
                         d_v: int = 512, topk_length: torch.Tensor | None = None):
    """Sparse MLA over a flat latent view.

    q [T, H, D_qk], kv [N, D_qk] (or [N, 1, D_qk]), indices [T, K] int (slots in [0, N); others skipped),
    topk_length [T] or None. Returns fp32 (out [T, H, d_v], lse [T, H]).
    """
    if kv.dim() == 3:
        kv = kv.squeeze(1)
    if indices.dim() == 3:
        indices = indices.squeeze(1)
    return _run(q, lambda i: kv[i].float(), kv.shape[0], indices, sm_scale, d_v, topk_length)


def sparse_mla_paged_reference(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, sm_scale: float,
                               layout: KVLayout | str, d_v: int = 512, topk_length: torch.Tensor | None = None):
    """Sparse MLA over a paged cache of any layout; indices are flat slots (block * block_size + offset).

    q [T, H, D_qk] with D_qk 512 or 576; kv_cache [num_blocks, block_size, row]. The gathered rows are
    dequantized to fp32 (so a kernel sees exactly what the reference sees). Returns fp32 (out, lse).
    """
    layout = as_layout(layout)
    flat = kv_cache_flat(kv_cache)
    d = q.shape[-1]
    return _run(q, lambda i: unpack_latent_rows(flat[i], layout, d), flat.shape[0], indices, sm_scale, d_v,
                topk_length)
