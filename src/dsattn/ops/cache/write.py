"""Triton kernels of the cache writes: one program per token, skipping slots outside the cache.

Quantization matches ``formats.quantize_fp8`` bit for bit on finite input: per 128 values, scale =
2 ** ceil(log2(amax / 448)) read off the exponent of the correctly rounded quotient (a power of two
exactly when its mantissa is zero; at least 2 ** -126, the smallest normal fp32), values divided by that
power of two (exact) and rounded to nearest-even fp8. A group holding inf or NaN gets unspecified bytes.
"""
from __future__ import annotations

import torch

from ...formats import LATENT_DIM, KVLayout, infer_layout
from .._triton import next_pow2, tl, triton

if triton is not None:

    @triton.jit
    def round_to_e4m3(x):
        """x (|x| <= 448) rounded to nearest-even on the fp8 e4m3 grid, still fp32.

        The conversion to fp8 then has nothing to round. The CPU interpreter's own fp8 rounding is wrong
        (31 -> 16: a mantissa carry is lost; ties go away from zero; subnormals), and the GPU's
        cvt.rn gives the same result as this.
        """
        bits = x.to(tl.int32, bitcast=True)
        lsb = (bits >> 20) & 1
        normal = ((bits + 0x7FFFF + lsb) & -1048576).to(tl.float32, bitcast=True)  # keep 3 mantissa bits
        magic = 12582912.0  # 1.5 * 2 ** 23: adding and subtracting it rounds |v| < 2 ** 22 to an integer
        sub = ((x * 512.0 + magic) - magic) * 0.001953125  # subnormals: multiples of 2 ** -9
        sub = tl.where(sub == 0.0, x * 0.0, sub)  # keep the sign of a value that rounds to zero
        return tl.where(tl.abs(x) < 0.015625, sub, normal)

    @triton.jit
    def to_bf16(x):
        """fp32 -> bf16, nearest-even (finite x). Rounded by hand first: the interpreter's conversion
        does not round to nearest-even; the GPU's does, and agrees."""
        bits = x.to(tl.int32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        return bits.to(tl.float32, bitcast=True).to(tl.bfloat16)

    @triton.jit
    def quantize_groups(x):
        """x [G, 128] fp32 -> (fp8 e4m3 [G, 128], fp32 scales [G]); power-of-two scales, 1 for zeros."""
        amax = tl.max(tl.abs(x), axis=1)
        ratio = tl.div_rn(amax, 448.0)
        bits = ratio.to(tl.int32, bitcast=True)
        exponent = ((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0).to(tl.int32)  # biased ceil(log2)
        # subnormal ratios (amax < 448 * 2 ** -126) take the smallest normal scale
        exponent = tl.maximum(exponent, 1)
        scale = tl.where(amax > 0, (exponent << 23).to(tl.float32, bitcast=True), 1.0)
        inv = tl.where(amax > 0, ((254 - exponent) << 23).to(tl.float32, bitcast=True), 1.0)
        q = round_to_e4m3(tl.clamp(x * inv[:, None], -448.0, 448.0)).to(tl.float8e4nv)
        return q, scale

    @triton.jit
    def _kv_row(latent, stride_lt, cache, slot_mapping, num_slots, t,
                D: tl.constexpr, ROW: tl.constexpr, FP8: tl.constexpr, HAS_ROPE_IN: tl.constexpr,
                ROPE_OUT: tl.constexpr, DP: tl.constexpr):
        """Token t's latent row into its slot of the KV cache (nothing when the slot is outside the cache)."""
        slot = tl.load(slot_mapping + t).to(tl.int64)
        if (slot >= 0) & (slot < num_slots):
            src = latent + t * stride_lt
            if FP8:
                row = cache + slot * ROW  # uint8 row
                g = tl.arange(0, 4)
                c = tl.arange(0, 128)
                x = tl.load(src + g[:, None] * 128 + c[None, :]).to(tl.float32)
                q, scale = quantize_groups(x)
                tl.store(row + g[:, None] * 128 + c[None, :], q.to(tl.uint8, bitcast=True))
                tl.store((row + 512).to(tl.pointer_type(tl.float32)) + g, scale)
                if ROPE_OUT:
                    r = tl.arange(0, 64)
                    if HAS_ROPE_IN:
                        rope = to_bf16(tl.load(src + 512 + r).to(tl.float32))
                    else:
                        rope = tl.zeros([64], tl.bfloat16)
                    tl.store((row + 528).to(tl.pointer_type(tl.bfloat16)) + r, rope)
            else:
                cols = tl.arange(0, DP)
                ok = cols < D
                x = tl.load(src + cols, mask=ok)
                tl.store(cache + slot * D + cols, to_bf16(x.to(tl.float32)), mask=ok)

    @triton.jit
    def _indexer_row(k, stride_k, cache, slot_mapping, num_slots, block_size, t):
        """Token t's indexer key, quantized, into its slot of the 132-byte indexer cache."""
        slot = tl.load(slot_mapping + t).to(tl.int64)
        if (slot >= 0) & (slot < num_slots):
            c = tl.arange(0, 128)
            x = tl.load(k + t * stride_k + c).to(tl.float32)
            q, scale = quantize_groups(tl.reshape(x, (1, 128)))
            blk = slot // block_size
            off = slot % block_size
            base = cache + blk * block_size * 132
            tl.store(base + off * 128 + c, tl.reshape(q, (128,)).to(tl.uint8, bitcast=True))
            scale_ptr = (base + block_size * 128 + off * 4).to(tl.pointer_type(tl.float32))
            tl.store(scale_ptr + tl.arange(0, 1), scale)

    @triton.jit
    def _write_kv_kernel(latent, stride_lt, cache, slot_mapping, num_slots,
                         D: tl.constexpr, ROW: tl.constexpr, FP8: tl.constexpr, HAS_ROPE_IN: tl.constexpr,
                         ROPE_OUT: tl.constexpr, DP: tl.constexpr):
        _kv_row(latent, stride_lt, cache, slot_mapping, num_slots, tl.program_id(0).to(tl.int64),
                D, ROW, FP8, HAS_ROPE_IN, ROPE_OUT, DP)

    @triton.jit
    def _write_indexer_kernel(k, stride_k, cache, slot_mapping, num_slots, block_size):
        _indexer_row(k, stride_k, cache, slot_mapping, num_slots, block_size, tl.program_id(0).to(tl.int64))

    @triton.jit
    def _write_both_kernel(latent, stride_lt, kv_cache, kv_slots, k, stride_k, indexer_cache, indexer_slots,
                           slot_mapping, block_size,
                           D: tl.constexpr, ROW: tl.constexpr, FP8: tl.constexpr, HAS_ROPE_IN: tl.constexpr,
                           ROPE_OUT: tl.constexpr, DP: tl.constexpr):
        """Grid (T, 2): program (t, 0) writes token t's latent row, (t, 1) its indexer key (one launch instead of
        two: a decode step's writes are a few hundred bytes, and each launch costs more than its work)."""
        t = tl.program_id(0).to(tl.int64)
        if tl.program_id(1) == 0:
            _kv_row(latent, stride_lt, kv_cache, slot_mapping, kv_slots, t, D, ROW, FP8, HAS_ROPE_IN, ROPE_OUT, DP)
        else:
            _indexer_row(k, stride_k, indexer_cache, slot_mapping, indexer_slots, block_size, t)


def _kv_meta(latent: torch.Tensor, kv_cache: torch.Tensor) -> dict:
    """The KV row kernel's constexprs for this latent and cache."""
    layout = infer_layout(kv_cache)
    d = latent.shape[1]
    row = kv_cache.shape[2] if layout is KVLayout.BF16 else layout.row_bytes(d)
    return dict(D=d, ROW=row, FP8=layout.is_fp8, HAS_ROPE_IN=d > LATENT_DIM, ROPE_OUT=layout is KVLayout.FP8_DS_MLA,
                DP=next_pow2(d))


def launch_write_kv(latent: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    num_slots = kv_cache.shape[0] * kv_cache.shape[1]
    _write_kv_kernel[(latent.shape[0],)](latent, latent.stride(0), kv_cache, slot_mapping, num_slots,
                                         **_kv_meta(latent, kv_cache), num_warps=4)


def launch_write_indexer(k: torch.Tensor, indexer_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    nb, bs, _ = indexer_cache.shape
    _write_indexer_kernel[(k.shape[0],)](k, k.stride(0), indexer_cache, slot_mapping, nb * bs, bs, num_warps=1)


def launch_write_both(latent: torch.Tensor, kv_cache: torch.Tensor, k: torch.Tensor, indexer_cache: torch.Tensor,
                      slot_mapping: torch.Tensor) -> None:
    """launch_write_kv and launch_write_indexer in one launch (the same tokens and slot mapping)."""
    nb, bs, _ = indexer_cache.shape
    _write_both_kernel[(latent.shape[0], 2)](latent, latent.stride(0), kv_cache, kv_cache.shape[0] * kv_cache.shape[1],
                                              k, k.stride(0), indexer_cache, nb * bs, slot_mapping, bs,
                                              **_kv_meta(latent, kv_cache), num_warps=4)
