"""Reference twin of sparse MLA attention (SPEC section 3), plain PyTorch, fp32 math.

    s_j      = sm_scale * <q[t, h], c[idx_j]>            (all D_qk dims)
    out[t,h] = sum_j softmax_j(s) * c[idx_j][:d_v]
    lse[t,h] = ln(sum_j exp(s_j))

Entry j of row t is valid iff j < topk_length[t] (when given; a negative length leaves no valid entry)
and 0 <= indices[t, j] < N. Invalid entries never reach the result, whatever their slot holds. A row with
no valid entry gives out = 0, lse = -inf (so does every row when N = 0 or K = 0).
"""
from __future__ import annotations

import torch

from ..._checks import FLOAT_DTYPES, INDEX_DTYPES, check_int, check_positive, check_same_device, check_tensor
from ...formats import KVLayout, as_layout, infer_layout, kv_cache_flat, unpack_latent_rows

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


def _check_args(q, indices, sm_scale, d_v, topk_length):
    """Shared argument checks; returns indices as [T, K] (FlashMLA's [T, 1, K] accepted)."""
    check_tensor("q", q, dtype=FLOAT_DTYPES, ndim=3, last_dim_contiguous=False)
    check_tensor("indices", indices, dtype=INDEX_DTYPES, ndim=(2, 3), last_dim_contiguous=False)
    if indices.dim() == 3:
        if indices.shape[1] != 1:
            raise ValueError(f"indices must have shape [T, K] or [T, 1, K], got {list(indices.shape)}")
        indices = indices.squeeze(1)
    if indices.shape[0] != q.shape[0]:
        raise ValueError(f"indices must have one row per query token ({q.shape[0]}), got {indices.shape[0]}")
    check_positive("sm_scale", sm_scale)
    check_int("d_v", d_v, lo=1)
    if d_v > q.shape[-1]:
        raise ValueError(f"d_v must be <= D_qk ({q.shape[-1]}), got {d_v}")
    if topk_length is not None:
        check_tensor("topk_length", topk_length, dtype=INDEX_DTYPES, shape=(q.shape[0],), last_dim_contiguous=False)
    check_same_device(q=q, indices=indices, topk_length=topk_length)
    return indices


def _run(q, gather, num_slots, indices, sm_scale, d_v, topk_length):
    t, h, d = q.shape
    k = indices.shape[1]
    out = torch.empty((t, h, d_v), dtype=torch.float32, device=q.device)
    lse = torch.empty((t, h), dtype=torch.float32, device=q.device)
    if num_slots == 0 or k == 0:  # no slot to stand in for the invalid entries, or no entry: none is valid
        return out.zero_(), lse.fill_(float("-inf"))
    valid = valid_entries(indices, num_slots, topk_length)
    chunk = max(1, _CHUNK_ELEMS // max(1, k * d))
    for s in range(0, t, chunk):
        e = min(t, s + chunk)
        idx = torch.where(valid[s:e], indices[s:e].long(), 0)
        rows = gather(idx.reshape(-1)).reshape(e - s, k, -1)[..., :d]
        # Invalid entries gathered slot 0 as a stand-in; zero them so whatever slot 0 holds (NaN in an
        # unused block) cannot reach the output through 0 * NaN.
        rows = rows.masked_fill(~valid[s:e, :, None], 0.0)
        out[s:e], lse[s:e] = _attend(q[s:e].float(), rows, valid[s:e], sm_scale, d_v)
    return out, lse


def sparse_mla_reference(q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, sm_scale: float,
                         d_v: int = 512, topk_length: torch.Tensor | None = None):
    """Sparse MLA over a flat latent view.

    q [T, H, D_qk], kv [N, D_qk] (or [N, 1, D_qk]), indices [T, K] int (slots in [0, N); others skipped),
    topk_length [T] or None. Returns fp32 (out [T, H, d_v], lse [T, H]).
    """
    indices = _check_args(q, indices, sm_scale, d_v, topk_length)
    check_tensor("kv", kv, dtype=FLOAT_DTYPES, ndim=(2, 3), last_dim_contiguous=False)
    if kv.dim() == 3:
        if kv.shape[1] != 1:
            raise ValueError(f"kv must have shape [N, D_qk] or [N, 1, D_qk], got {list(kv.shape)}")
        kv = kv.squeeze(1)
    if kv.shape[-1] < q.shape[-1]:
        raise ValueError(f"kv must have at least D_qk = {q.shape[-1]} columns, got {kv.shape[-1]}")
    check_same_device(q=q, kv=kv)
    return _run(q, lambda i: kv[i].float(), kv.shape[0], indices, sm_scale, d_v, topk_length)


def sparse_mla_paged_reference(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, sm_scale: float,
                               layout: KVLayout | str, d_v: int = 512, topk_length: torch.Tensor | None = None):
    """Sparse MLA over a paged cache of any layout; indices are flat slots (block * block_size + offset).

    q [T, H, D_qk] with D_qk 512 or 576; kv_cache [num_blocks, block_size, row]. The gathered rows are
    dequantized to fp32 (so a kernel sees exactly what the reference sees). Returns fp32 (out, lse).
    """
    layout = as_layout(layout)
    indices = _check_args(q, indices, sm_scale, d_v, topk_length)
    check_tensor("kv_cache", kv_cache, ndim=(3, 4), last_dim_contiguous=False)
    if infer_layout(kv_cache) is not layout:
        raise ValueError(f"kv_cache holds {infer_layout(kv_cache).value} rows "
                         f"({kv_cache.dtype} x {kv_cache.shape[-1]}), not layout {layout.value}")
    flat = kv_cache_flat(kv_cache)
    d = q.shape[-1]
    widest = flat.shape[-1] if layout is KVLayout.BF16 else layout.max_d_qk()
    if d > widest or (layout.is_fp8 and d not in (512, widest)):
        raise ValueError(f"q must have D_qk 512 or {widest} for a {layout.value} cache, got {d}")
    check_same_device(q=q, kv_cache=kv_cache)
    return _run(q, lambda i: unpack_latent_rows(flat[i], layout, d), flat.shape[0], indices, sm_scale, d_v,
                topk_length)
