"""Reference twins of the cache writes: latent rows into a KV cache of any layout, and indexer keys
(quantized) into the 132-byte indexer cache, each at a slot mapping. Slots < 0 are skipped (padding).
"""
from __future__ import annotations

import torch

from ..._checks import FLOAT_DTYPES, INDEX_DTYPES, check_same_device, check_tensor, check_values
from ...formats import INDEX_DIM, KVLayout, as_layout, indexer_cache_views, infer_layout, pack_latent_rows, quantize_fp8


def write_kv_cache_reference(latent: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor,
                             layout: KVLayout | str) -> None:
    """latent [T, D_qk] -> kv_cache rows at slot_mapping [T] (in place).

    kv_cache [num_blocks, block_size, row] (or [.., 1, row]); a bf16 cache's row width must equal D_qk.
    """
    layout = as_layout(layout)
    check_tensor("latent", latent, dtype=FLOAT_DTYPES, ndim=2, last_dim_contiguous=False)
    check_tensor("kv_cache", kv_cache, ndim=(3, 4), last_dim_contiguous=False)
    cache = kv_cache.squeeze(2) if kv_cache.dim() == 4 and kv_cache.shape[2] == 1 else kv_cache
    if cache.dim() != 3:
        raise ValueError(f"kv_cache must have shape [num_blocks, block_size, row], got {list(kv_cache.shape)}")
    if infer_layout(cache) is not layout:
        raise ValueError(f"kv_cache holds {infer_layout(cache).value} rows ({cache.dtype} x {cache.shape[-1]}), "
                         f"not layout {layout.value}")
    if layout is KVLayout.BF16 and latent.shape[1] != cache.shape[2]:
        raise ValueError(f"latent must have {cache.shape[2]} columns (the bf16 cache's row), got {latent.shape[1]}")
    nb, bs, _ = cache.shape
    check_tensor("slot_mapping", slot_mapping, dtype=INDEX_DTYPES, shape=(latent.shape[0],), last_dim_contiguous=False)
    check_same_device(latent=latent, kv_cache=kv_cache, slot_mapping=slot_mapping)
    check_values("slot_mapping", slot_mapping, hi=nb * bs - 1)
    keep = slot_mapping >= 0
    rows = pack_latent_rows(latent[keep], layout)
    slots = slot_mapping[keep].long()
    # (block, offset) indexing writes through any strides; a flattening reshape of a padded
    # (non-contiguous) cache would be a copy and the write would be lost
    cache[slots // bs, slots % bs] = rows.to(cache.dtype)


def write_indexer_cache_reference(k: torch.Tensor, indexer_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Indexer keys k [T, 128] -> fp8 values and fp32 scales at slot_mapping [T] (in place)."""
    check_tensor("k", k, dtype=FLOAT_DTYPES, ndim=2, shape=(None, INDEX_DIM), last_dim_contiguous=False)
    values, scales = indexer_cache_views(indexer_cache)
    nb, bs, _ = values.shape
    check_tensor("slot_mapping", slot_mapping, dtype=INDEX_DTYPES, shape=(k.shape[0],), last_dim_contiguous=False)
    check_same_device(k=k, indexer_cache=indexer_cache, slot_mapping=slot_mapping)
    check_values("slot_mapping", slot_mapping, hi=nb * bs - 1)
    keep = slot_mapping >= 0
    q, s = quantize_fp8(k[keep])
    slots = slot_mapping[keep].long()
    # both are strided views into the byte buffer: index by (block, offset) to write in place
    values[slots // bs, slots % bs] = q
    scales[slots // bs, slots % bs] = s[:, 0]
