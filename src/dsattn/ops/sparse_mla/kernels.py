"""Triton kernels of sparse MLA attention (SPEC section 3), online softmax over gathered latent rows.

Two orientations of the same computation, so that every head count keeps the tensor cores busy:

    keys on M   (few heads: 1..32)     S^T [BN, HP] = K [BN, D_qk] @ Q^T [D_qk, HP]
                                        O^T [512, HP] += V^T [512, BN] @ P^T [BN, HP]
    heads on M  (64-head blocks)        S [HB, BN] = Q [HB, D_qk] @ K^T
                                        O [HB, 512] += P [HB, BN] @ V [BN, 512]

V is the first 512 columns of the same gathered K tile, so each row is read from memory once per
program. The tile's rows come from one of three row layouts:

    bf16              latent and RoPE in one bf16 row
    fp8_ds_mla(_nope) 512 fp8 e4m3 latent values and 4 fp32 scales (one per 128 values), then (656-byte
                      rows only) 64 bf16 RoPE values

The fp8 latent is dequantized in registers (fp8 -> fp16/bf16 times a power-of-two scale, exact) and fed
to fp16 MMAs by default: sm90 converts e4m3 to fp16 in one instruction per pair and fp16 keeps 3 more
mantissa bits of P than bf16 would. Over bf16 rows P must be bf16, whose 8-bit mantissa alone costs
~2e-3 absolute on outputs near zero; P_SPLIT adds a second product with the rounding remainder of P
(P = hi + lo, both bf16), nearly free where the gather dominates.

Each program owns one query token (or one split of its top-k list), all of its heads (or one 64-head
block), and writes either the final (out, lse) or a split partial (normalized out, lse) that
`_combine_splits` merges. Softmax runs in base 2 with sm_scale * log2(e) folded into one multiplier.
"""
from __future__ import annotations

from .._triton import mma, tl, triton

LATENT = 512
ROPE = 64
NEG_INF = float("-inf")


@triton.jit
def _gather_tile(lat_ptr, stride_lat, scale_ptr, stride_scale, rope_ptr, stride_rope, slot, valid,
                 FP8: tl.constexpr, HAS_ROPE: tl.constexpr, DT: tl.constexpr, BN: tl.constexpr):
    """Rows `slot` ([BN] int64; rows where `valid` is False are never read) ->
    (latent [BN, 512] of DT, rope [BN, 64] bf16, zeros when HAS_ROPE is False)."""
    cols = tl.arange(0, LATENT)
    lat = tl.load(lat_ptr + slot[:, None] * stride_lat + cols[None, :], mask=valid[:, None], other=0.0)
    if FP8:
        groups = tl.arange(0, LATENT // 128)
        scale = tl.load(scale_ptr + slot[:, None] * stride_scale + groups[None, :], mask=valid[:, None], other=0.0)
        lat = tl.reshape(lat.to(DT), (BN, LATENT // 128, 128)) * scale.to(DT)[:, :, None]
        lat = tl.reshape(lat, (BN, LATENT))
    else:
        lat = lat.to(DT)
    if HAS_ROPE:
        rcols = tl.arange(0, ROPE)
        rope = tl.load(rope_ptr + slot[:, None] * stride_rope + rcols[None, :], mask=valid[:, None], other=0.0)
    else:
        rope = tl.zeros((BN, ROPE), dtype=tl.bfloat16)
    return lat, rope


@triton.jit
def _entry_slots(idx_ptr, j, end, num_slots):
    """Slots of top-k entries j ([BN]) and whether each is used (j < end and 0 <= slot < num_slots)."""
    in_range = j < end
    slot = tl.load(idx_ptr + j, mask=in_range, other=-1)
    valid = in_range & (slot >= 0) & (slot < num_slots)
    return tl.where(valid, slot, 0).to(tl.int64), valid


@triton.jit
def _key_range(len_ptr, t, topk, split, keys_per_split, HAS_LEN: tl.constexpr):
    """[lo, hi) of the top-k list this program uses: its split, cut at topk_length[t]."""
    end = topk
    if HAS_LEN:
        end = tl.minimum(tl.load(len_ptr + t), topk)
    lo = split * keys_per_split
    hi = tl.minimum(lo + keys_per_split, end)
    return lo, hi


@triton.jit
def _lse(m_i, l_i):
    """Natural-log lse from the base-2 running max and sum; -inf for a head that saw no valid entry."""
    empty = l_i == 0.0
    return tl.where(empty, NEG_INF, (m_i + tl.log2(tl.where(empty, 1.0, l_i))) * 0.6931471805599453)


@triton.jit
def _walk_keys_m(q_lat_t, q_rope_t, idx_row, lo, hi, num_slots, qk_scale,
                 lat_ptr, scale_ptr, rope_ptr, stride_lat: tl.constexpr, stride_scale: tl.constexpr,
                 stride_rope: tl.constexpr, FP8: tl.constexpr, HAS_ROPE: tl.constexpr, DT: tl.constexpr, P_SPLIT: tl.constexpr,
                 HP: tl.constexpr, BN: tl.constexpr):
    """Online softmax over entries [lo, hi) with keys on M -> (acc^T [512, HP], max [HP], sum [HP])."""
    m_i = tl.full((HP,), NEG_INF, tl.float32)
    l_i = tl.zeros((HP,), tl.float32)
    acc = tl.zeros((LATENT, HP), tl.float32)
    for start in range(0, hi - lo, BN):
        j = lo + start + tl.arange(0, BN)
        slot, valid = _entry_slots(idx_row, j, hi, num_slots)
        lat, rope = _gather_tile(lat_ptr, stride_lat, scale_ptr, stride_scale, rope_ptr, stride_rope, slot, valid,
                                 FP8, HAS_ROPE, DT, BN)
        s = mma(lat, q_lat_t, tl.zeros((BN, HP), tl.float32))
        if HAS_ROPE:
            s = mma(rope, q_rope_t, s)
        s = tl.where(valid[:, None], s * qk_scale, NEG_INF)
        m_new = tl.maximum(m_i, tl.max(s, 0))
        m_use = tl.where(m_new == NEG_INF, 0.0, m_new)
        alpha = tl.math.exp2(m_i - m_use)
        p = tl.math.exp2(s - m_use[None, :])
        l_i = l_i * alpha + tl.sum(p, 0)
        p_hi = p.to(DT)
        acc = mma(tl.trans(lat), p_hi, acc * alpha[None, :])
        if P_SPLIT:
            acc = mma(tl.trans(lat), (p - p_hi.to(tl.float32)).to(DT), acc)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _walk_heads_m(q_lat, q_rope, idx_row, lo, hi, num_slots, qk_scale,
                  lat_ptr, scale_ptr, rope_ptr, stride_lat: tl.constexpr, stride_scale: tl.constexpr,
                  stride_rope: tl.constexpr, FP8: tl.constexpr, HAS_ROPE: tl.constexpr, DT: tl.constexpr, P_SPLIT: tl.constexpr,
                  HB: tl.constexpr, BN: tl.constexpr):
    """Online softmax over entries [lo, hi) with heads on M -> (acc [HB, 512], max [HB], sum [HB])."""
    m_i = tl.full((HB,), NEG_INF, tl.float32)
    l_i = tl.zeros((HB,), tl.float32)
    acc = tl.zeros((HB, LATENT), tl.float32)
    for start in range(0, hi - lo, BN):
        j = lo + start + tl.arange(0, BN)
        slot, valid = _entry_slots(idx_row, j, hi, num_slots)
        lat, rope = _gather_tile(lat_ptr, stride_lat, scale_ptr, stride_scale, rope_ptr, stride_rope, slot, valid,
                                 FP8, HAS_ROPE, DT, BN)
        s = mma(q_lat, tl.trans(lat), tl.zeros((HB, BN), tl.float32))
        if HAS_ROPE:
            s = mma(q_rope, tl.trans(rope), s)
        s = tl.where(valid[None, :], s * qk_scale, NEG_INF)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == NEG_INF, 0.0, m_new)
        alpha = tl.math.exp2(m_i - m_use)
        p = tl.math.exp2(s - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        p_hi = p.to(DT)
        acc = mma(p_hi, lat, acc * alpha[:, None])
        if P_SPLIT:
            acc = mma((p - p_hi.to(tl.float32)).to(DT), lat, acc)
        m_i = m_new
    return acc, m_i, l_i


# Values only compared against, never used in addresses: specializing on them would only recompile.
_RUNTIME = ["num_slots", "num_heads", "topk", "keys_per_split"]


@triton.jit(do_not_specialize=_RUNTIME)
def sparse_mla_keys_m_kernel(
        q_ptr, stride_qt, stride_qh,
        lat_ptr, scale_ptr, rope_ptr,
        idx_ptr, stride_it, len_ptr,
        out_ptr, stride_ot, stride_os, stride_oh,
        lse_ptr, stride_lt, stride_ls, stride_lh,
        num_slots, num_heads, topk, keys_per_split, qk_scale,
        stride_lat: tl.constexpr, stride_scale: tl.constexpr, stride_rope: tl.constexpr,
        FP8: tl.constexpr, HAS_ROPE: tl.constexpr, HAS_LEN: tl.constexpr, DT: tl.constexpr, P_SPLIT: tl.constexpr,
        HP: tl.constexpr, BN: tl.constexpr):
    """Keys on M. Grid (T, 1, splits); HP >= num_heads (padded heads are masked, never stored)."""
    t = tl.program_id(0).to(tl.int64)
    split = tl.program_id(2)
    heads = tl.arange(0, HP)
    hmask = heads < num_heads
    dcols = tl.arange(0, LATENT)
    rcols = tl.arange(0, ROPE)
    q_row = q_ptr + t * stride_qt + heads[None, :] * stride_qh
    q_lat_t = tl.load(q_row + dcols[:, None], mask=hmask[None, :], other=0.0).to(DT)  # [512, HP]
    q_rope_t = tl.load(q_row + LATENT + rcols[:, None], mask=hmask[None, :] & HAS_ROPE, other=0.0)  # [64, HP]

    lo, hi = _key_range(len_ptr, t, topk, split, keys_per_split, HAS_LEN)
    idx_row = idx_ptr + t * stride_it
    acc, m_i, l_i = _walk_keys_m(q_lat_t, q_rope_t, idx_row, lo, hi, num_slots, qk_scale,
                                 lat_ptr, scale_ptr, rope_ptr, stride_lat, stride_scale, stride_rope,
                                 FP8, HAS_ROPE, DT, P_SPLIT, HP, BN)

    lse = _lse(m_i, l_i)
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[None, :]
    o_ptrs = out_ptr + t * stride_ot + split * stride_os + heads[None, :] * stride_oh + dcols[:, None]
    tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=hmask[None, :])
    tl.store(lse_ptr + t * stride_lt + split * stride_ls + heads * stride_lh, lse, mask=hmask)


@triton.jit(do_not_specialize=_RUNTIME)
def sparse_mla_heads_m_kernel(
        q_ptr, stride_qt, stride_qh,
        lat_ptr, scale_ptr, rope_ptr,
        idx_ptr, stride_it, len_ptr,
        out_ptr, stride_ot, stride_os, stride_oh,
        lse_ptr, stride_lt, stride_ls, stride_lh,
        num_slots, num_heads, topk, keys_per_split, qk_scale,
        stride_lat: tl.constexpr, stride_scale: tl.constexpr, stride_rope: tl.constexpr,
        FP8: tl.constexpr, HAS_ROPE: tl.constexpr, HAS_LEN: tl.constexpr, DT: tl.constexpr, P_SPLIT: tl.constexpr,
        HB: tl.constexpr, BN: tl.constexpr):
    """Heads on M. Grid (T, cdiv(num_heads, HB), splits); the last head block may be partly masked."""
    t = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * HB + tl.arange(0, HB)
    split = tl.program_id(2)
    hmask = heads < num_heads
    dcols = tl.arange(0, LATENT)
    rcols = tl.arange(0, ROPE)
    q_row = q_ptr + t * stride_qt + heads[:, None] * stride_qh
    q_lat = tl.load(q_row + dcols[None, :], mask=hmask[:, None], other=0.0).to(DT)  # [HB, 512]
    q_rope = tl.load(q_row + LATENT + rcols[None, :], mask=hmask[:, None] & HAS_ROPE, other=0.0)  # [HB, 64]

    lo, hi = _key_range(len_ptr, t, topk, split, keys_per_split, HAS_LEN)
    idx_row = idx_ptr + t * stride_it
    acc, m_i, l_i = _walk_heads_m(q_lat, q_rope, idx_row, lo, hi, num_slots, qk_scale,
                                  lat_ptr, scale_ptr, rope_ptr, stride_lat, stride_scale, stride_rope,
                                  FP8, HAS_ROPE, DT, P_SPLIT, HB, BN)

    lse = _lse(m_i, l_i)
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_ptrs = out_ptr + t * stride_ot + split * stride_os + heads[:, None] * stride_oh + dcols[None, :]
    tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=hmask[:, None])
    tl.store(lse_ptr + t * stride_lt + split * stride_ls + heads * stride_lh, lse, mask=hmask)


@triton.jit
def combine_splits_kernel(part_o_ptr, part_lse_ptr, out_ptr, stride_ot, stride_oh, lse_ptr, stride_lt, stride_lh,
                          num_heads, SPLITS: tl.constexpr, SP: tl.constexpr):
    """Merge split partials [T, SPLITS, H, 512] (normalized) and [T, SPLITS, H] (lse) of one (token, head).
    Grid (T, H). Partials are contiguous (they live in the workspace)."""
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    sp = tl.arange(0, SP)
    smask = sp < SPLITS
    part_lse = tl.load(part_lse_ptr + (t * SPLITS + sp) * num_heads + h, mask=smask, other=NEG_INF)
    m = tl.max(part_lse, 0)
    m_use = tl.where(m == NEG_INF, 0.0, m)
    w = tl.exp(part_lse - m_use)
    total = tl.sum(w, 0)
    dcols = tl.arange(0, LATENT)
    parts = tl.load(part_o_ptr + ((t * SPLITS + sp[:, None]) * num_heads + h) * LATENT + dcols[None, :],
                    mask=smask[:, None], other=0.0)
    out = tl.sum(parts * w[:, None], 0) / tl.where(total == 0.0, 1.0, total)
    lse = tl.where(total == 0.0, NEG_INF, m_use + tl.log(tl.where(total == 0.0, 1.0, total)))
    tl.store(out_ptr + t * stride_ot + h * stride_oh + dcols, out.to(out_ptr.dtype.element_ty))
    tl.store(lse_ptr + t * stride_lt + h * stride_lh, lse)
