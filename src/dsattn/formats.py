"""Cache layouts of SPEC section 2: latent KV rows (bf16, fp8_ds_mla, fp8_ds_mla_nope), the indexer's
132-byte fp8 key cache, fp8 quantization and paged slot arithmetic.

A paged cache is ``[num_blocks, block_size, row]``; a token lives at slot ``block * block_size + offset``.

fp8_ds_mla row (656 bytes, byte-compatible with FlashMLA's documented layout)::

    [0, 512)    512 fp8 e4m3 latent values
    [512, 528)  4 fp32 scales, one per 128 values
    [528, 656)  64 bf16 RoPE values (zeros for NoPE models)

fp8_ds_mla_nope drops the RoPE part (528 bytes). The indexer key cache stores, inside each block, the
128 fp8 values of all ``block_size`` tokens first, then their fp32 scales (DeepGEMM's paged layout).
"""
from __future__ import annotations

import enum

import torch

from ._checks import check_tensor

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
GROUP = 128  # values per quantization scale
LATENT_DIM = 512  # kv_lora_rank of every supported model
ROPE_DIM = 64
INDEX_DIM = 128
INDEX_ROW_BYTES = INDEX_DIM + 4  # 132


class KVLayout(str, enum.Enum):
    BF16 = "bf16"
    FP8_DS_MLA = "fp8_ds_mla"
    FP8_DS_MLA_NOPE = "fp8_ds_mla_nope"

    @property
    def is_fp8(self) -> bool:
        return self is not KVLayout.BF16

    def row_bytes(self, d_qk: int) -> int:
        """Bytes one token takes in a cache of this layout."""
        if self is KVLayout.BF16:
            return 2 * d_qk
        return 656 if self is KVLayout.FP8_DS_MLA else 528

    def max_d_qk(self) -> int | None:
        """Widest latent query the layout can serve (None: whatever the bf16 cache holds)."""
        return {KVLayout.BF16: None, KVLayout.FP8_DS_MLA: 576, KVLayout.FP8_DS_MLA_NOPE: 512}[self]


def as_layout(layout: "KVLayout | str", name: str = "layout") -> KVLayout:
    try:
        return KVLayout(layout)
    except ValueError:
        raise ValueError(f"{name} must be one of {[v.value for v in KVLayout]}, got {layout!r}") from None


# ---------------------------------------------------------------------------------------------------
# fp8 quantization (per 128-value group, power-of-two scales)
# ---------------------------------------------------------------------------------------------------

def group_scales(x: torch.Tensor) -> torch.Tensor:
    """Power-of-two scales ``2 ** ceil(log2(amax / 448))`` per 128-value group of the last dim.

    x [..., G * 128] (any float dtype) -> fp32 [..., G]; an all-zero group gets scale 1, and a group with
    amax < 448 * 2 ** -126 (~5.3e-36) the smallest normal fp32, 2 ** -126, as the write kernels do (a
    subnormal scale's reciprocal is not finite, and amax / 448 rounds there). Finite x only: the groups of
    a non-finite value get unspecified contents (the kernels and this twin differ).
    """
    if x.shape[-1] % GROUP != 0:
        raise ValueError(f"x last dim must be a multiple of {GROUP}, got {x.shape[-1]}")
    amax = x.float().unflatten(-1, (-1, GROUP)).abs().amax(-1)
    # frexp gives amax/448 = m * 2**e with m in [0.5, 1): ceil(log2) is e, or e - 1 when m == 0.5
    # exactly (a power of two). Exact, unlike log2 + ceil in floating point.
    mant, exp = torch.frexp(amax / FP8_MAX)
    exp = torch.where(mant == 0.5, exp - 1, exp).clamp_min(-126)
    scale = torch.ldexp(torch.ones_like(amax), exp)
    return torch.where(amax > 0, scale, torch.ones_like(amax))


def quantize_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., G * 128] -> (fp8 e4m3 [..., G * 128], fp32 scales [..., G]); value = fp8 * scale."""
    scale = group_scales(x)
    q = (x.float().unflatten(-1, (-1, GROUP)) / scale[..., None]).clamp(-FP8_MAX, FP8_MAX)
    return q.flatten(-2).to(FP8), scale


def dequantize_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Inverse of quantize_fp8, in fp32."""
    return (q.float().unflatten(-1, (-1, GROUP)) * scale.float()[..., None]).flatten(-2)


# ---------------------------------------------------------------------------------------------------
# latent KV rows
# ---------------------------------------------------------------------------------------------------

def pack_latent_rows(latent: torch.Tensor, layout: "KVLayout | str") -> torch.Tensor:
    """Rows of a latent KV cache from latent vectors.

    latent [N, D_qk] (D_qk 512 or 576, any float dtype) -> bf16 [N, D_qk] for ``bf16``, or uint8
    [N, 656] / [N, 528] for the fp8 layouts. A 512-wide latent in ``fp8_ds_mla`` gets zero RoPE values.
    """
    layout = as_layout(layout)
    check_tensor("latent", latent, ndim=2)
    n, d = latent.shape
    if layout is KVLayout.BF16:
        return latent.to(torch.bfloat16)
    if d not in (LATENT_DIM, LATENT_DIM + ROPE_DIM):
        raise ValueError(f"latent must have 512 or 576 columns, got {d}")
    if layout is KVLayout.FP8_DS_MLA_NOPE and d != LATENT_DIM:
        raise ValueError("latent must have 512 columns for fp8_ds_mla_nope (it stores no RoPE part)")
    q, scale = quantize_fp8(latent[:, :LATENT_DIM])
    parts = [q.view(torch.uint8), scale.contiguous().view(torch.uint8)]
    if layout is KVLayout.FP8_DS_MLA:
        rope = latent[:, LATENT_DIM:].to(torch.bfloat16) if d > LATENT_DIM else latent.new_zeros(
            (n, ROPE_DIM), dtype=torch.bfloat16)
        parts.append(rope.contiguous().view(torch.uint8))
    return torch.cat(parts, dim=1)


def unpack_latent_rows(rows: torch.Tensor, layout: "KVLayout | str", d_qk: int | None = None) -> torch.Tensor:
    """Dequantized fp32 latent vectors [N, d_qk] from cache rows [N, row_bytes] (or bf16 [N, D]).

    d_qk defaults to the layout's full width; 512 drops the RoPE part of a 656-byte row.
    """
    layout = as_layout(layout)
    if layout is KVLayout.BF16:
        check_tensor("rows", rows, dtype=torch.bfloat16, ndim=2, last_dim_contiguous=False)
        return rows[:, : (d_qk or rows.shape[1])].float()
    check_tensor("rows", rows, dtype=torch.uint8, ndim=2, shape=(None, layout.row_bytes(0)),
                 last_dim_contiguous=False)
    rows = rows.contiguous()
    latent = dequantize_fp8(rows[:, :LATENT_DIM].view(FP8), rows[:, LATENT_DIM:LATENT_DIM + 16].view(torch.float32))
    d_qk = d_qk or (576 if layout is KVLayout.FP8_DS_MLA else 512)
    if d_qk == LATENT_DIM:
        return latent
    if layout is not KVLayout.FP8_DS_MLA or d_qk != 576:
        raise ValueError(f"d_qk must be 512 or (fp8_ds_mla only) 576, got {d_qk}")
    rope = rows[:, LATENT_DIM + 16:].view(torch.bfloat16).float()
    return torch.cat([latent, rope], dim=1)


def new_kv_cache(num_blocks: int, block_size: int, layout: "KVLayout | str", d_qk: int,
                 device="cpu") -> torch.Tensor:
    """An empty latent KV cache [num_blocks, block_size, row] (bf16 rows, or uint8 bytes)."""
    layout = as_layout(layout)
    if layout is KVLayout.BF16:
        return torch.empty((num_blocks, block_size, d_qk), dtype=torch.bfloat16, device=device)
    return torch.empty((num_blocks, block_size, layout.row_bytes(d_qk)), dtype=torch.uint8, device=device)


def kv_cache_flat(cache: torch.Tensor) -> torch.Tensor:
    """[num_blocks, block_size, row] (or FlashMLA's [.., 1, row]) -> [num_slots, row].

    A view of a contiguous cache; for a padded (non-contiguous) cache it is a copy, so write through
    ``cache[slot // block_size, slot % block_size]`` instead.
    """
    if cache.dim() == 4 and cache.shape[2] == 1:
        cache = cache.squeeze(2)
    if cache.dim() != 3:
        raise ValueError(f"kv_cache must have shape [num_blocks, block_size, row], got {list(cache.shape)}")
    return cache.reshape(cache.shape[0] * cache.shape[1], cache.shape[2])


def infer_layout(cache: torch.Tensor) -> KVLayout:
    """The layout a cache tensor holds, from its dtype and row width."""
    row = cache.shape[-1]
    if cache.dtype == torch.bfloat16:
        return KVLayout.BF16
    if cache.dtype == torch.uint8 and row == 656:
        return KVLayout.FP8_DS_MLA
    if cache.dtype == torch.uint8 and row == 528:
        return KVLayout.FP8_DS_MLA_NOPE
    raise ValueError(f"kv_cache must be bf16 rows or uint8 rows of 656/528 bytes, got {cache.dtype} x {row}")


# ---------------------------------------------------------------------------------------------------
# indexer key cache (132 bytes per token, values then scales inside each block)
# ---------------------------------------------------------------------------------------------------

def new_indexer_cache(num_blocks: int, block_size: int, device="cpu") -> torch.Tensor:
    """An empty indexer key cache, uint8 [num_blocks, block_size, 132]."""
    return torch.empty((num_blocks, block_size, INDEX_ROW_BYTES), dtype=torch.uint8, device=device)


def indexer_cache_views(cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(fp8 values [num_blocks, block_size, 128], fp32 scales [num_blocks, block_size]), views of `cache`."""
    if isinstance(cache, torch.Tensor) and cache.dim() == 4 and cache.shape[2] == 1:
        cache = cache.squeeze(2)
    check_tensor("indexer_cache", cache, dtype=torch.uint8, ndim=3, shape=(None, None, INDEX_ROW_BYTES))
    nb, bs, _ = cache.shape
    if not cache.is_contiguous():
        raise ValueError("indexer_cache must be contiguous")
    blocks = cache.view(nb, bs * INDEX_ROW_BYTES)
    values = blocks[:, : bs * INDEX_DIM].view(FP8).view(nb, bs, INDEX_DIM)
    scales = blocks[:, bs * INDEX_DIM:].view(torch.float32)
    return values, scales


def dequantize_indexer_cache(cache: torch.Tensor) -> torch.Tensor:
    """All keys of an indexer cache, fp32 [num_blocks * block_size, 128] in slot order."""
    values, scales = indexer_cache_views(cache)
    return (values.float() * scales[..., None]).reshape(-1, INDEX_DIM)


# ---------------------------------------------------------------------------------------------------
# slots
# ---------------------------------------------------------------------------------------------------

def slots_from_positions(block_table: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor,
                         block_size: int) -> torch.Tensor:
    """Cache slots of tokens: ``block_table[rows, pos // bs] * bs + pos % bs``; -1 where pos < 0.

    block_table [B, max_blocks] int32, rows [...] (request of each entry), positions [...] int. A position
    past the table (pos // bs >= max_blocks) reads the table's last column, a wrong block, without an error:
    callers keep positions inside (``ops.gather.positions_to_slots`` maps them to -1 first).
    """
    pos = positions.long()
    valid = pos >= 0
    safe = pos.clamp_min(0)
    blk = block_table.long()[rows.long(), (safe // block_size).clamp_max(block_table.shape[1] - 1)]
    slots = blk * block_size + safe % block_size
    return torch.where(valid, slots, torch.full_like(slots, -1)).to(torch.int32)
