"""Cache layouts of SPEC section 2 (dsattn.formats and the cache-write references).

The 656-byte row is checked byte for byte against bytes built here independently (numpy, an fp8
e4m3fn encoder written from the format's definition) following FlashMLA's documented layout
(flash_mla_interface.py / README, "FP8 with scale"): 512 float8_e4m3 values, 4 float32 scales (one
per 128 values, first scale for the first 128), 64 bfloat16 RoPE values. The indexer cache's per-block
layout (all tokens' 128 fp8 values, then their fp32 scales) is DeepGEMM's and vLLM's
(vllm csrc/cache_kernels.cu, indexer_k_quant_and_cache_kernel).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dsattn.formats import (FP8, KVLayout, as_layout, dequantize_fp8, dequantize_indexer_cache, group_scales,
                            indexer_cache_views, infer_layout, kv_cache_flat, new_indexer_cache, new_kv_cache,
                            pack_latent_rows, quantize_fp8, slots_from_positions, unpack_latent_rows)
from dsattn.ops.cache.reference import write_indexer_cache_reference, write_kv_cache_reference
from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference, sparse_mla_reference


# ---------------------------------------------------------------------------------------------------
# an independent fp8 e4m3fn / bf16 encoder
# ---------------------------------------------------------------------------------------------------

def _e4m3_value(code: int) -> float:
    """Value of an fp8 e4m3fn byte: 1 sign, 4 exponent (bias 7), 3 mantissa bits; S.1111.111 is NaN."""
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 0x7
    if e == 0xF and m == 0x7:
        return math.nan
    if e == 0:
        return sign * m / 8 * 2.0 ** -6
    return sign * (1 + m / 8) * 2.0 ** (e - 7)


_POS_CODES = np.arange(0x7F)  # 0x00 .. 0x7E: every finite non-negative value, increasing
_POS_VALUES = np.array([_e4m3_value(int(c)) for c in _POS_CODES])


def _encode_e4m3(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties to even (even code = even mantissa); |x| <= 448 expected."""
    a = np.abs(x.astype(np.float64))
    hi = np.clip(np.searchsorted(_POS_VALUES, a), 1, len(_POS_VALUES) - 1)
    lo = hi - 1
    d_lo, d_hi = a - _POS_VALUES[lo], _POS_VALUES[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (_POS_CODES[hi] % 2 == 0))
    code = np.where(pick_hi, _POS_CODES[hi], _POS_CODES[lo])
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def _encode_bf16(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 bit patterns (uint16), round to nearest even."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _scale(amax: float) -> float:
    """2 ** ceil(log2(amax / 448)), 1 for amax = 0 (SPEC 2), in exact float64 arithmetic."""
    if amax == 0:
        return 1.0
    m, e = math.frexp(amax / 448.0)
    return math.ldexp(1.0, e - 1 if m == 0.5 else e)


def _expected_row(latent: np.ndarray, with_rope: bool) -> bytes:
    out = bytearray()
    scales = []
    for g in range(4):
        grp = latent[g * 128:(g + 1) * 128].astype(np.float64)
        s = _scale(float(np.abs(grp).max()))
        scales.append(s)
        out += _encode_e4m3(np.clip(grp / s, -448, 448)).tobytes()
    out += np.array(scales, dtype="<f4").tobytes()
    if with_rope:
        out += _encode_bf16(latent[512:]).astype("<u2").tobytes()
    return bytes(out)


def _tricky_latent(n: int) -> torch.Tensor:
    """Random rows, plus groups that hit the corners: amax exactly 448 * 2^k, an all-zero group, tiny
    values (fp8 subnormals), exact midpoints between fp8 values (ties), negatives rounding to -0."""
    x = torch.randn(n, 576) * torch.exp2(torch.randint(-6, 7, (n, 1)).float())
    x[0, :128] = torch.linspace(-448.0, 448.0, 128) * 0.25  # amax = 112 = 448 / 4: scale 1/4 exactly
    x[1, 128:256] = 0.0
    x[2, 256:384] = torch.randn(128) * 1e-3
    x[2, 256] = 1.0  # one large value: the rest of the group lands in fp8 subnormals
    x[2, 257] = -1e-7  # rounds to -0 (0x80)
    mids = torch.tensor([(_e4m3_value(c) + _e4m3_value(c + 1)) / 2 for c in range(0x40, 0x60)])
    x[3, 384:384 + len(mids)] = mids
    x[3, 384 + len(mids):512] = 0.0
    x[3, 511] = 448.0  # scale 1 for that group: the midpoints stay midpoints
    return x


@pytest.mark.parametrize("n", [1, 7])
def test_fp8_ds_mla_row_is_flashmla_layout(n):
    latent = _tricky_latent(max(n, 4))[:n]
    rows = pack_latent_rows(latent, "fp8_ds_mla")
    assert rows.dtype == torch.uint8 and rows.shape == (n, 656)
    for i in range(n):
        want = _expected_row(latent[i].numpy(), with_rope=True)
        got = rows[i].numpy().tobytes()
        assert got == want, f"row {i}: first differing byte {next(j for j in range(656) if got[j] != want[j])}"


def test_fp8_ds_mla_nope_row_drops_rope():
    latent = _tricky_latent(4)[:, :512]
    rows = pack_latent_rows(latent, "fp8_ds_mla_nope")
    assert rows.shape == (4, 528)
    for i in range(4):
        assert rows[i].numpy().tobytes() == _expected_row(latent[i].numpy(), with_rope=False)
    # the 656-byte row of a NoPE latent: same first 528 bytes, zero RoPE values
    wide = pack_latent_rows(latent, "fp8_ds_mla")
    assert torch.equal(wide[:, :528], rows) and not wide[:, 528:].any()


def test_group_scales_are_powers_of_two():
    x = torch.randn(64, 512) * torch.exp2(torch.randint(-20, 20, (64, 1)).float())
    x[0, :128] = 0.0
    x[1, :128] = 448.0 * 2.0 ** -3  # exactly 448 * 2^k: scale 2^k, the value maps to 448
    x[2, :128] = 448.0 * 2.0 ** -3 * (1 + 2.0 ** -20)  # just above: the next power
    s = group_scales(x)
    mant, _ = torch.frexp(s)
    assert (mant == 0.5).all()
    assert s[0, 0] == 1.0 and s[1, 0] == 2.0 ** -3 and s[2, 0] == 2.0 ** -2
    amax = x.unflatten(-1, (4, 128)).abs().amax(-1)
    nz = amax > 0
    assert (amax[nz] / s[nz] <= 448).all() and (amax[nz] / s[nz] > 224).all()


@pytest.mark.parametrize("layout", list(KVLayout))
def test_latent_round_trip_within_format_error(layout):
    d = 512 if layout is KVLayout.FP8_DS_MLA_NOPE else 576
    x = _tricky_latent(16)[:, :d]
    back = unpack_latent_rows(pack_latent_rows(x, layout), layout, d)
    assert back.shape == x.shape and back.dtype == torch.float32
    err = (back - x).abs()
    if layout is KVLayout.BF16:  # 8 significant bits: relative half-ulp 2^-8
        assert (err <= 2.0 ** -8 * x.abs()).all()
        return
    assert (err[:, 512:] <= 2.0 ** -8 * x[:, 512:].abs()).all()  # RoPE is stored bf16
    scale = group_scales(x[:, :512]).repeat_interleave(128, dim=1)
    # e4m3: 3 mantissa bits (relative half-ulp 2^-4), subnormal spacing 2^-9 of the scale
    assert (err[:, :512] <= 2.0 ** -4 * x[:, :512].abs() + 2.0 ** -10 * scale).all()
    # quantizing what was dequantized gives the same values (not always the same bytes: a group
    # whose largest value rounds down to 224 * scale re-quantizes at half the scale)
    again = unpack_latent_rows(pack_latent_rows(back, layout), layout, d)
    assert torch.equal(again, back)


def test_quantize_dequantize_shapes_and_zero_groups():
    x = torch.randn(3, 5, 256)
    x[1, 2] = 0.0
    q, s = quantize_fp8(x)
    assert q.dtype == FP8 and q.shape == x.shape and s.shape == (3, 5, 2) and s.dtype == torch.float32
    assert (s[1, 2] == 1.0).all() and (dequantize_fp8(q, s)[1, 2] == 0).all()
    with pytest.raises(ValueError, match="x"):
        group_scales(torch.randn(4, 100))


def test_indexer_cache_block_layout_and_round_trip():
    nb, bs = 5, 3
    cache = new_indexer_cache(nb, bs).fill_(255)
    assert cache.shape == (nb, bs, 132) and cache.dtype == torch.uint8
    k = torch.randn(7, 128) * torch.exp2(torch.randint(-5, 5, (7, 1)).float())
    slots = torch.tensor([14, 0, 4, -1, 8, 9, 3], dtype=torch.int32)
    write_indexer_cache_reference(k, cache, slots)
    raw = cache.view(nb, bs * 132).numpy()
    for t, slot in enumerate(slots.tolist()):
        if slot < 0:
            continue
        b, o = divmod(slot, bs)
        s = _scale(float(k[t].abs().max()))
        # values of all the block's tokens first, then their scales
        assert raw[b, o * 128:(o + 1) * 128].tobytes() == _encode_e4m3(np.clip(k[t].numpy() / s, -448, 448)).tobytes()
        assert raw[b, bs * 128 + 4 * o: bs * 128 + 4 * o + 4].view("<f4")[0] == s
    back = dequantize_indexer_cache(cache)
    keep = slots >= 0
    err = (back[slots[keep].long()] - k[keep]).abs()
    assert (err <= 2.0 ** -4 * k[keep].abs() + 2.0 ** -10 * group_scales(k[keep])).all()
    # unwritten slots were left alone (still 0xFF)
    untouched = sorted(set(range(nb * bs)) - set(slots[keep].tolist()))
    values, scales = indexer_cache_views(cache)
    assert (values.reshape(-1, 128)[untouched].view(torch.uint8) == 255).all()
    assert (scales.reshape(-1)[untouched].view(torch.int32) == -1).all()


@pytest.mark.parametrize("layout", list(KVLayout))
def test_kv_cache_write_only_touches_its_slots(layout):
    d = 512 if layout is KVLayout.FP8_DS_MLA_NOPE else 576
    cache = new_kv_cache(4, 3, layout, d)
    cache.view(torch.uint8).fill_(0xAB)
    before = cache.clone()
    latent = torch.randn(5, d)
    slots = torch.tensor([11, -1, 0, 5, 6], dtype=torch.int32)
    write_kv_cache_reference(latent, cache, slots, layout)
    flat, old = kv_cache_flat(cache), kv_cache_flat(before)
    keep = slots >= 0
    assert torch.equal(flat[slots[keep].long()].view(torch.uint8),
                       pack_latent_rows(latent[keep], layout).view(torch.uint8))
    others = sorted(set(range(12)) - set(slots[keep].tolist()))
    assert torch.equal(flat[others].view(torch.uint8), old[others].view(torch.uint8))


def test_padded_cache_is_written_in_place():
    """FlashMLA's tests build caches as [blocks, bs + 1, row][:, :bs]: not contiguous. A write must land
    in that storage (a flattening reshape would be a copy) and a read must find it."""
    nb, bs = 4, 3
    storage = torch.zeros(nb, bs + 1, 656, dtype=torch.uint8)
    cache = storage[:, :bs]
    assert not cache.is_contiguous()
    latent = torch.randn(6, 576)
    slots = torch.tensor([0, 4, 5, 7, 9, 11], dtype=torch.int32)
    write_kv_cache_reference(latent, cache, slots, "fp8_ds_mla")
    assert storage[:, :bs].any() and not storage[:, bs].any()
    q = torch.randn(2, 3, 576)
    idx = torch.tensor([[0, 4, 5, -1], [7, 9, 11, 5]], dtype=torch.int32)
    got = sparse_mla_paged_reference(q, cache, idx, 0.1, "fp8_ds_mla")
    flat_rows = torch.zeros(12, 576)
    flat_rows[slots.long()] = unpack_latent_rows(pack_latent_rows(latent, "fp8_ds_mla"), "fp8_ds_mla")
    want = sparse_mla_reference(q, flat_rows, idx, 0.1)
    torch.testing.assert_close(got, want)


def test_layout_metadata():
    assert [KVLayout(v).row_bytes(576) for v in ("bf16", "fp8_ds_mla", "fp8_ds_mla_nope")] == [1152, 656, 528]
    assert KVLayout.BF16.row_bytes(512) == 1024
    assert 1 - 528 / 656 == pytest.approx(0.195, abs=1e-3)  # SPEC 2's "19.5% fewer bytes"
    assert as_layout("fp8_ds_mla") is KVLayout.FP8_DS_MLA
    with pytest.raises(ValueError, match="layout"):
        as_layout("fp8")
    for layout, d in ((KVLayout.BF16, 576), (KVLayout.BF16, 512), (KVLayout.FP8_DS_MLA, 576),
                      (KVLayout.FP8_DS_MLA_NOPE, 512)):
        cache = new_kv_cache(2, 4, layout, d)
        assert infer_layout(cache) is layout
        assert infer_layout(cache[:, :, None]) is layout  # FlashMLA's [blocks, bs, 1, row]
        assert kv_cache_flat(cache[:, :, None]).shape == (8, cache.shape[-1])
    with pytest.raises(ValueError, match="kv_cache"):
        infer_layout(torch.empty(2, 4, 600, dtype=torch.uint8))
    with pytest.raises(ValueError, match="kv_cache"):
        kv_cache_flat(torch.empty(2, 4, 2, 656, dtype=torch.uint8))


def test_slots_from_positions():
    bs = 5
    table = torch.tensor([[7, 2, 9], [4, 0, 3]], dtype=torch.int32)
    rows = torch.tensor([[0, 0, 0, 0], [1, 1, 1, 1]])
    pos = torch.tensor([[0, 4, 5, 14], [-1, 6, 13, 3]])
    want = torch.tensor([[35, 39, 10, 49], [-1, 1, 18, 23]], dtype=torch.int32)
    got = slots_from_positions(table, rows, pos, bs)
    assert got.dtype == torch.int32 and torch.equal(got, want)
