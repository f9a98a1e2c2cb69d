"""Triton kernels of the cache writes (placeholder: reference until the kernels land)."""
from __future__ import annotations

import torch

from ...formats import infer_layout
from .reference import write_indexer_cache_reference, write_kv_cache_reference


def launch_write_kv(latent, kv_cache, slot_mapping):
    n = kv_cache.shape[0] * kv_cache.shape[1]
    write_kv_cache_reference(latent, kv_cache, torch.where(slot_mapping < n, slot_mapping, -1), infer_layout(kv_cache))


def launch_write_indexer(k, indexer_cache, slot_mapping):
    n = indexer_cache.shape[0] * indexer_cache.shape[1]
    write_indexer_cache_reference(k, indexer_cache, torch.where(slot_mapping < n, slot_mapping, -1))
