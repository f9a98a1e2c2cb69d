"""Reference twins of the cache writes: latent rows into a KV cache of any layout, and indexer keys
(quantized) into the 132-byte indexer cache, each at a slot mapping. Slots < 0 are skipped (padding).
"""
from __future__ import annotations

import torch

from ...formats import (KVLayout, as_layout, indexer_cache_views, kv_cache_flat, pack_latent_rows,
                        quantize_fp8)


def write_kv_cache_reference(latent: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor,
                             layout: KVLayout | str) -> None:
    """latent [T, D_qk] -> kv_cache rows at slot_mapping [T] (in place)."""
    layout = as_layout(layout)
    flat = kv_cache_flat(kv_cache)
    keep = slot_mapping >= 0
    rows = pack_latent_rows(latent[keep], layout)
    flat[slot_mapping[keep].long()] = rows.to(flat.dtype)


def write_indexer_cache_reference(k: torch.Tensor, indexer_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Indexer keys k [T, 128] -> fp8 values and fp32 scales at slot_mapping [T] (in place)."""
    values, scales = indexer_cache_views(indexer_cache)
    bs = values.shape[1]
    keep = slot_mapping >= 0
    q, s = quantize_fp8(k[keep])
    slots = slot_mapping[keep].long()
    # both are strided views into the byte buffer: index by (block, offset) to write in place
    values[slots // bs, slots % bs] = q
    scales[slots // bs, slots % bs] = s[:, 0]
