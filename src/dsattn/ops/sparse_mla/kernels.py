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

Numerics. P @ V runs on fp16 operands: P keeps 3 more mantissa bits than in bf16 (bf16 P missed the issue's 2e-3 +
3/128 bound on peaked softmax, notes/sparse_mla.md), and V enters scaled by 2**-8 (V_SCALE, undone on the fp32
accumulator) so that, as written, any value up to 1.6e7 stays finite; values under 2**-6 turn subnormal there, an
absolute error under 2**-17. Over bf16 rows the GPU build does not keep that range: the compiler narrows `(x.to(float32)
* V_SCALE).to(float16)` into fp16(x) x 2**-8 (session 60: the PTX of bench/mla_compile_check.py --dump, and of
gluon_small / gluon_prefill alike, shows cvt.rn.f16x2.f32 before mul.f16x2), so a bf16 latent value of magnitude >=
65520 becomes inf in this Triton kernel (the Gluon kernels' default since session 62, gluon_prefill's config cvt_asm and
gluon_small's GluonConfig.cvt_asm, converts by inline PTX that scales first: finite below 2^24). Over bf16 rows q . k
runs on the bf16 operands as they are. Over fp8 rows (e4m3 -> fp16 is one instruction per pair on sm90, BENCHMARKS.md)
the latent is dequantized once, into that same scaled fp16 tile (the group scales
are powers of two: exact down to the tile's subnormals), and q . k uses it with q in fp16 (finite for |q| < 65504)
and the 2**8 folded into the softmax scale. The factor is fp16(group scale x 2**-8), which is 0 for a group scale of
2**-17 or less (amax <= 448 x 2**-17, ~3.4e-3): here such a group reads as zeros in both products. Every fp8 decode
kernel does so in P V, and all but gluon_rx's config sraw (S^T from the unscaled values, the scales in fp32; the
8-head fp8_ds_mla_nope default) in q . k too. H200, one such group a row (bench/fp8_tiny_groups.py,
bench/results/fp8_tiny_groups_s36.json): this kernel, gluon_small, gluon_rx, gluon_ws and gluon64 return out 0 for
it (reference ~3e-4) and lse 2.2e-5 to 2.8e-5 relative off; with sraw lse is within 1.8e-7 and only out is 0.
notes/foundation.md, sessions 35-36.

Each program owns one query token (or one split of its top-k list), all of its heads (or one 64-head
block), and writes either the final (out, lse) or a split partial (normalized out, lse) that
`combine_splits_kernel` merges. Softmax runs in base 2 with sm_scale * log2(e) in one multiplier.
"""
from __future__ import annotations

from .._fastlaunch import launch as _fast
from .._triton import mma, tl, triton

# Globals a kernel reads must be constexpr.
LATENT = tl.constexpr(512)
ROPE = tl.constexpr(64)
NEG_INF = tl.constexpr(float("-inf"))
V_SCALE = tl.constexpr(1.0 / 256)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _load_rows(lat_ptr, stride_lat, scale_ptr, stride_scale, rope_ptr, stride_rope, slot, valid,
               FP8: tl.constexpr, HAS_ROPE: tl.constexpr, BN: tl.constexpr):
    """Rows `slot` ([BN] int64) as stored; rows where `valid` is False are never read (zeros).
    -> (latent [BN, 512] bf16 or fp8, scales [BN, 4] fp32 (fp8 rows; else zeros), rope [BN, 64] bf16)."""
    cols = tl.arange(0, LATENT)
    lat = tl.load(lat_ptr + slot[:, None] * stride_lat + cols[None, :], mask=valid[:, None], other=0.0)
    scale = tl.zeros((BN, LATENT // 128), tl.float32)
    if FP8:
        groups = tl.arange(0, LATENT // 128)
        scale = tl.load(scale_ptr + slot[:, None] * stride_scale + groups[None, :], mask=valid[:, None], other=0.0)
    rope = tl.zeros((BN, ROPE), dtype=tl.bfloat16)
    if HAS_ROPE:
        rcols = tl.arange(0, ROPE)
        rope = tl.load(rope_ptr + slot[:, None] * stride_rope + rcols[None, :], mask=valid[:, None], other=0.0)
    return lat, scale, rope


@triton.jit
def _tiles(raw, scale, FP8: tl.constexpr, BN: tl.constexpr):
    """(K tile for q . k, V tile for P @ V) of one block: see the module docstring."""
    if FP8:
        v = tl.reshape(raw.to(tl.float16), (BN, LATENT // 128, 128)) * (scale * V_SCALE).to(tl.float16)[:, :, None]
        v = tl.reshape(v, (BN, LATENT))
        return v, v
    else:
        # fp32 arithmetic: the CPU interpreter multiplies bf16 bits, not values
        return raw, (raw.to(tl.float32) * V_SCALE).to(tl.float16)


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
def _walk(q_lat, q_rope, idx_row, lo, hi, num_slots, qk_scale,
          lat_ptr, scale_ptr, rope_ptr, stride_lat: tl.constexpr, stride_scale: tl.constexpr,
          stride_rope: tl.constexpr, FP8: tl.constexpr, HAS_ROPE: tl.constexpr,
          KEYS_M: tl.constexpr, HEADS: tl.constexpr, BN: tl.constexpr, PREFETCH: tl.constexpr):
    """Online softmax over top-k entries [lo, hi) of one token.

    KEYS_M: q_lat [512, HEADS], q_rope [64, HEADS] (transposed) -> (acc [512, HEADS], max, sum [HEADS])
    else:   q_lat [HEADS, 512], q_rope [HEADS, 64]              -> (acc [HEADS, 512], max, sum [HEADS])
    acc is in V_SCALE units. PREFETCH: the next block's rows and the indices of the one after are loaded
    into registers while a block computes (else Triton's pipeliner stages loads through shared memory).
    """
    m_i = tl.full((HEADS,), NEG_INF, tl.float32)
    l_i = tl.zeros((HEADS,), tl.float32)
    if KEYS_M:
        acc = tl.zeros((LATENT, HEADS), tl.float32)
    else:
        acc = tl.zeros((HEADS, LATENT), tl.float32)
    if PREFETCH:
        slot, valid = _entry_slots(idx_row, lo + tl.arange(0, BN), hi, num_slots)
        raw, scale, rope = _load_rows(lat_ptr, stride_lat, scale_ptr, stride_scale, rope_ptr, stride_rope, slot,
                                      valid, FP8, HAS_ROPE, BN)
        slot_n, valid_n = _entry_slots(idx_row, lo + BN + tl.arange(0, BN), hi, num_slots)
    for start in range(0, hi - lo, BN):
        if PREFETCH:
            raw_n, scale_n, rope_n = _load_rows(lat_ptr, stride_lat, scale_ptr, stride_scale, rope_ptr, stride_rope,
                                                slot_n, valid_n, FP8, HAS_ROPE, BN)
            slot_nn, valid_nn = _entry_slots(idx_row, lo + start + 2 * BN + tl.arange(0, BN), hi, num_slots)
        else:
            slot, valid = _entry_slots(idx_row, lo + start + tl.arange(0, BN), hi, num_slots)
            raw, scale, rope = _load_rows(lat_ptr, stride_lat, scale_ptr, stride_scale, rope_ptr, stride_rope, slot,
                                          valid, FP8, HAS_ROPE, BN)
        k, v = _tiles(raw, scale, FP8, BN)
        if KEYS_M:
            s = tl.zeros((BN, HEADS), tl.float32)
            if HAS_ROPE:
                s = mma(rope, q_rope, s)
                if FP8:  # into the V_SCALE units of the fp8 K tile
                    s = s * V_SCALE
            s = mma(k, q_lat, s)
            s = tl.where(valid[:, None], s * qk_scale, NEG_INF)
            m_new = tl.maximum(m_i, tl.max(s, 0))
            m_use = tl.where(m_new == NEG_INF, 0.0, m_new)
            alpha = tl.math.exp2(m_i - m_use)
            p = tl.math.exp2(s - m_use[None, :])
            l_i = l_i * alpha + tl.sum(p, 0)
            acc = mma(tl.trans(v), p.to(tl.float16), acc * alpha[None, :])
        else:
            s = tl.zeros((HEADS, BN), tl.float32)
            if HAS_ROPE:
                s = mma(q_rope, tl.trans(rope), s)
                if FP8:  # into the V_SCALE units of the fp8 K tile
                    s = s * V_SCALE
            s = mma(q_lat, tl.trans(k), s)
            s = tl.where(valid[None, :], s * qk_scale, NEG_INF)
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_use = tl.where(m_new == NEG_INF, 0.0, m_new)
            alpha = tl.math.exp2(m_i - m_use)
            p = tl.math.exp2(s - m_use[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = mma(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_new
        if PREFETCH:
            raw, scale, rope, valid = raw_n, scale_n, rope_n, valid_n
            slot_n, valid_n = slot_nn, valid_nn
    return acc, m_i, l_i


@triton.jit
def _lse(m_i, l_i):
    """Natural-log lse from the base-2 running max and sum; -inf for a head that saw no valid entry."""
    empty = l_i == 0.0
    return tl.where(empty, NEG_INF, (m_i + tl.log2(tl.where(empty, 1.0, l_i))) * LN2)


# Values only compared against, never used in addresses: specializing on them would only recompile.
_RUNTIME = ["num_slots", "num_heads", "topk", "keys_per_split"]


@triton.jit(do_not_specialize=_RUNTIME)
def sparse_mla_kernel(
        q_ptr, stride_qt, stride_qh,
        lat_ptr, scale_ptr, rope_ptr,
        idx_ptr, stride_it, len_ptr,
        out_ptr, stride_ot, stride_os, stride_oh,
        lse_ptr, stride_lt, stride_ls, stride_lh,
        num_slots, num_heads, topk, keys_per_split, qk_scale,
        stride_lat: tl.constexpr, stride_scale: tl.constexpr, stride_rope: tl.constexpr,
        FP8: tl.constexpr, HAS_ROPE: tl.constexpr, HAS_LEN: tl.constexpr,
        KEYS_M: tl.constexpr, HEADS: tl.constexpr, BN: tl.constexpr, PREFETCH: tl.constexpr):
    """Grid (T, cdiv(num_heads, HEADS), splits). Heads past num_heads are zero queries, never stored.

    q [T, H, D_qk] bf16; rows through lat/scale/rope pointers (see _load_rows); indices [T, K] int32;
    out [T, H, 512] (or split partials [T, splits, H, 512] fp32); lse [T, H] (or [T, splits, H]).
    """
    t = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * HEADS + tl.arange(0, HEADS)
    split = tl.program_id(2)
    hmask = heads < num_heads
    dcols = tl.arange(0, LATENT)
    rcols = tl.arange(0, ROPE)
    q_dt: tl.constexpr = tl.float16 if FP8 else tl.bfloat16
    if FP8:
        qk_scale = qk_scale * (1.0 / V_SCALE)
    if KEYS_M:
        q_row = q_ptr + t * stride_qt + heads[None, :] * stride_qh
        q_lat = tl.load(q_row + dcols[:, None], mask=hmask[None, :], other=0.0).to(q_dt)  # [512, HEADS]
        q_rope = tl.load(q_row + LATENT + rcols[:, None], mask=hmask[None, :] & HAS_ROPE, other=0.0)
    else:
        q_row = q_ptr + t * stride_qt + heads[:, None] * stride_qh
        q_lat = tl.load(q_row + dcols[None, :], mask=hmask[:, None], other=0.0).to(q_dt)  # [HEADS, 512]
        q_rope = tl.load(q_row + LATENT + rcols[None, :], mask=hmask[:, None] & HAS_ROPE, other=0.0)

    lo, hi = _key_range(len_ptr, t, topk, split, keys_per_split, HAS_LEN)
    acc, m_i, l_i = _walk(q_lat, q_rope, idx_ptr + t * stride_it, lo, hi, num_slots, qk_scale,
                          lat_ptr, scale_ptr, rope_ptr, stride_lat, stride_scale, stride_rope,
                          FP8, HAS_ROPE, KEYS_M, HEADS, BN, PREFETCH)

    lse = _lse(m_i, l_i)
    inv_l = (1.0 / V_SCALE) / tl.where(l_i == 0.0, 1.0, l_i)
    o_base = out_ptr + t * stride_ot + split * stride_os
    if KEYS_M:
        o_ptrs = o_base + heads[None, :] * stride_oh + dcols[:, None]
        tl.store(o_ptrs, (acc * inv_l[None, :]).to(out_ptr.dtype.element_ty), mask=hmask[None, :])
    else:
        o_ptrs = o_base + heads[:, None] * stride_oh + dcols[None, :]
        tl.store(o_ptrs, (acc * inv_l[:, None]).to(out_ptr.dtype.element_ty), mask=hmask[:, None])
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


@triton.jit
def f16_rows_kernel(src_ptr, dst_ptr, slots_ptr, kmap_ptr, num_rows, num_src, stride_src, stride_dst, scale,
                    HAS_ROPE: tl.constexpr, KEYED: tl.constexpr, BR: tl.constexpr):
    """Rows [BR program, BR program + BR) of dst from bf16 src [num_src, 512 (+ 64)]: the latent part as the bits of
    fp16(x x scale) (scale = V_SCALE passed at run time: with a constant the compiler narrows the product into
    fp16(x) x 2**-8, rounding twice; the module docstring says where), the RoPE part copied. What gluon_prefill's
    producer does to each gathered stage (config cvt_asm: one rounding, finite below 2**24), done once a row for its
    config pre16. KEYED: dst row r is src row slots[r], and kmap[r] = r, or -1 (dst row r zeros, nothing read) for
    a slot outside [0, num_src); else dst row r is src row r."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    ok = r < num_rows
    if KEYED:
        slot = tl.load(slots_ptr + r, mask=ok, other=-1)
        valid = ok & (slot >= 0) & (slot < num_src)
        tl.store(kmap_ptr + r, tl.where(valid, r, -1), mask=ok)
        row = tl.where(valid, slot, 0)
    else:
        valid = ok
        row = r
    rs = row.to(tl.int64)[:, None] * stride_src
    rd = r.to(tl.int64)[:, None] * stride_dst
    c = tl.arange(0, LATENT)[None, :]
    x = tl.load(src_ptr + rs + c, mask=valid[:, None], other=0.0)
    y = (x.to(tl.float32) * scale).to(tl.float16)
    tl.store(dst_ptr + rd + c, y.to(tl.bfloat16, bitcast=True), mask=ok[:, None])
    if HAS_ROPE:
        cr = LATENT + tl.arange(0, ROPE)[None, :]
        tl.store(dst_ptr + rd + cr, tl.load(src_ptr + rs + cr, mask=valid[:, None], other=0.0), mask=ok[:, None])


def f16_rows(src, dst, key_slots=None, kmap=None, block_rows: int = 16, num_warps: int = 4) -> None:
    """gluon_prefill's rows for config pre16 (f16_rows_kernel): dst [n, D] (bf16-typed, row stride a multiple of 8
    elements) = src's rows, their latent part as fp16(x x 2**-8) bits; without key_slots n = src rows and row r is
    src row r; with key_slots [n] int32, row r is src row key_slots[r] and kmap [n] int32 gets r, or -1 for a slot
    outside src (that row zeros). Inputs checked by the caller (sparse_mla_prefill)."""
    n = src.shape[0] if key_slots is None else key_slots.shape[0]
    if n:
        keyed = key_slots is not None
        # through ops/_fastlaunch.py, the grid and the RoPE flag in plain ints (session 71, the CPU box: triton.cdiv
        # and a comparison with the constexpr LATENT cost ~13 us a call under cProfile, f16_rows 40 -> 27 us with its
        # launch; Triton's launch path 9.5 us against the fast path's 6.9, bench/host_overhead.py --stub --breakdown)
        _fast(f16_rows_kernel, ((n + block_rows - 1) // block_rows,),
              src, dst, key_slots if keyed else src, kmap if keyed else src, n, src.shape[0], src.stride(0),
              dst.stride(0), 1.0 / 256, src.shape[1] > LATENT.value, keyed, block_rows, num_warps=num_warps)
