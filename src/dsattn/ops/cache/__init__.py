"""Cache writes: latent rows into a latent KV cache (bf16 / fp8_ds_mla / fp8_ds_mla_nope) and indexer
keys, quantized, into the 132-byte indexer cache, each at a slot mapping (SPEC section 2).

Both are ``torch.library`` custom ops (``dsattn::write_kv_cache``, ``dsattn::write_indexer_cache``)
with fake implementations. On a CUDA tensor (or on the CPU under ``TRITON_INTERPRET=1``) they run the
Triton kernels of ``write.py``; otherwise the reference twins. Arguments are checked before anything
is written: bad input raises ValueError naming it and leaves the cache untouched.
"""
from __future__ import annotations

import torch

from ..._checks import INDEX_DTYPES, check_same_device, check_tensor
from ...formats import INDEX_DIM, INDEX_ROW_BYTES, LATENT_DIM, ROPE_DIM, KVLayout, infer_layout
from .._eager import op_or_body
from .._triton import kernels_available
from .reference import write_indexer_cache_reference, write_kv_cache_reference

__all__ = ["write_kv_cache", "write_indexer_cache", "write_kv_and_indexer_cache"]


def _squeeze_cache(name: str, cache: torch.Tensor) -> torch.Tensor:
    if not isinstance(cache, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(cache).__name__}")
    if cache.dim() == 4 and cache.shape[2] == 1:
        cache = cache.squeeze(2)
    if cache.dim() != 3:
        raise ValueError(f"{name} must have shape [num_blocks, block_size, row], got {list(cache.shape)}")
    if not cache.is_contiguous():
        raise ValueError(f"{name} must be contiguous")
    return cache


def _slots_inside(slot_mapping: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
    """slot_mapping with slots past the cache set to -1: the reference twins reject them, the ops skip them."""
    return torch.where(slot_mapping < cache.shape[0] * cache.shape[1], slot_mapping, -1)


def write_kv_cache(latent: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Write latent rows into a paged latent KV cache, in place.

    latent [T, D_qk] bf16 (or fp32); kv_cache [num_blocks, block_size, row] (FlashMLA's [.., 1, row]
    accepted), contiguous: bf16 rows of D_qk values, or uint8 rows of 656 (fp8_ds_mla: D_qk 512 or 576;
    a 512-wide latent gets zero RoPE values) or 528 bytes (fp8_ds_mla_nope: D_qk 512); the layout is
    inferred from dtype and row width. slot_mapping [T] int32/int64: token t goes to slot
    ``block * block_size + offset``; slots < 0 (padding) or >= num_blocks * block_size are skipped. A slot
    listed twice in one call holds an unspecified mix of those tokens' rows (each token's program stores its
    values, scales and RoPE part separately): slot mappings name each slot once.
    fp8 rows are quantized as ``formats.pack_latent_rows`` (per-128 power-of-two scales).
    """
    cache = _check_kv(latent, kv_cache, slot_mapping)
    if latent.shape[0]:
        op_or_body("write_kv_cache", _write_kv_impl)(latent, cache, slot_mapping)


def _check_kv(latent: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> torch.Tensor:
    """write_kv_cache's argument checks; returns the cache as [num_blocks, block_size, row]."""
    check_tensor("latent", latent, dtype=(torch.bfloat16, torch.float32), ndim=2)
    t, d = latent.shape
    cache = _squeeze_cache("kv_cache", kv_cache)
    layout = infer_layout(cache)
    if layout is KVLayout.BF16:
        if d != cache.shape[2]:
            raise ValueError(f"latent must have {cache.shape[2]} columns (the bf16 cache row), got {d}")
    elif layout is KVLayout.FP8_DS_MLA and d not in (LATENT_DIM, LATENT_DIM + ROPE_DIM):
        raise ValueError(f"latent must have 512 or 576 columns for fp8_ds_mla, got {d}")
    elif layout is KVLayout.FP8_DS_MLA_NOPE and d != LATENT_DIM:
        raise ValueError(f"latent must have 512 columns for fp8_ds_mla_nope, got {d}")
    check_tensor("slot_mapping", slot_mapping, dtype=INDEX_DTYPES, shape=(t,))
    check_same_device(latent=latent, kv_cache=cache, slot_mapping=slot_mapping)
    return cache


def _write_kv_impl(latent: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    if kernels_available(latent.device):
        from .write import launch_write_kv
        launch_write_kv(latent, kv_cache, slot_mapping)
    else:
        write_kv_cache_reference(latent, kv_cache, _slots_inside(slot_mapping, kv_cache), infer_layout(kv_cache))


_write_kv_op = torch.library.custom_op("dsattn::write_kv_cache", _write_kv_impl, mutates_args=("kv_cache",))


@_write_kv_op.register_fake
def _(latent, kv_cache, slot_mapping) -> None:
    return None


def write_indexer_cache(k: torch.Tensor, indexer_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Quantize indexer keys and write them into the 132-byte indexer cache, in place.

    k [T, 128] bf16 or fp32; indexer_cache uint8 [num_blocks, block_size, 132] contiguous (FlashMLA's
    [.., 1, 132] accepted; ``formats.indexer_cache_views`` layout); slot_mapping [T] int32/int64, slots
    < 0 or >= num_blocks * block_size skipped. Each key becomes 128 fp8 e4m3 values and one fp32 scale
    (``formats.quantize_fp8``).
    """
    cache = _check_indexer(k, indexer_cache, slot_mapping)
    if k.shape[0]:
        op_or_body("write_indexer_cache", _write_indexer_impl)(k, cache, slot_mapping)


def _check_indexer(k: torch.Tensor, indexer_cache: torch.Tensor, slot_mapping: torch.Tensor) -> torch.Tensor:
    """write_indexer_cache's argument checks; returns the cache as [num_blocks, block_size, 132]."""
    check_tensor("k", k, dtype=(torch.bfloat16, torch.float32), ndim=2, shape=(None, INDEX_DIM))
    cache = _squeeze_cache("indexer_cache", indexer_cache)
    check_tensor("indexer_cache", cache, dtype=torch.uint8, shape=(None, None, INDEX_ROW_BYTES))
    check_tensor("slot_mapping", slot_mapping, dtype=INDEX_DTYPES, shape=(k.shape[0],))
    check_same_device(k=k, indexer_cache=cache, slot_mapping=slot_mapping)
    return cache


def _write_indexer_impl(k: torch.Tensor, indexer_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    if kernels_available(k.device):
        from .write import launch_write_indexer
        launch_write_indexer(k, indexer_cache, slot_mapping)
    else:
        write_indexer_cache_reference(k, indexer_cache, _slots_inside(slot_mapping, indexer_cache))


_write_indexer_op = torch.library.custom_op("dsattn::write_indexer_cache", _write_indexer_impl,
                                            mutates_args=("indexer_cache",))


@_write_indexer_op.register_fake
def _(k, indexer_cache, slot_mapping) -> None:
    return None


def write_kv_and_indexer_cache(latent: torch.Tensor, kv_cache: torch.Tensor, k: torch.Tensor,
                               indexer_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """write_kv_cache(latent, kv_cache, slot_mapping) and write_indexer_cache(k, indexer_cache, slot_mapping) in one
    kernel launch: the same tokens (latent and k have as many rows) at the same slots, as a layer's step writes
    them. Both argument sets are checked before either cache is written; the bytes written are those of the two
    ops."""
    kv = _check_kv(latent, kv_cache, slot_mapping)
    check_tensor("k", k, dtype=(torch.bfloat16, torch.float32), ndim=2)
    if k.shape[0] != latent.shape[0]:
        raise ValueError(f"k must have as many rows as latent ({latent.shape[0]}), got {k.shape[0]}")
    ix = _check_indexer(k, indexer_cache, slot_mapping)
    if latent.shape[0]:
        op_or_body("write_kv_and_indexer_cache", _write_both_impl)(latent, kv, k, ix, slot_mapping)


def _write_both_impl(latent: torch.Tensor, kv_cache: torch.Tensor, k: torch.Tensor, indexer_cache: torch.Tensor,
                     slot_mapping: torch.Tensor) -> None:
    if kernels_available(latent.device):
        from .write import launch_write_both
        launch_write_both(latent, kv_cache, k, indexer_cache, slot_mapping)
    else:
        write_kv_cache_reference(latent, kv_cache, _slots_inside(slot_mapping, kv_cache), infer_layout(kv_cache))
        write_indexer_cache_reference(k, indexer_cache, _slots_inside(slot_mapping, indexer_cache))


_write_both_op = torch.library.custom_op("dsattn::write_kv_and_indexer_cache", _write_both_impl,
                                         mutates_args=("kv_cache", "indexer_cache"))


@_write_both_op.register_fake
def _(latent, kv_cache, k, indexer_cache, slot_mapping) -> None:
    return None
