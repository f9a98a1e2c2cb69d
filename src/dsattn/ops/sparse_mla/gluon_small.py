"""Gluon kernel of sparse MLA for few heads per program (1..32) on Hopper (sm_90): gathered rows arrive
through cp.async into a ring of shared-memory stages, so several blocks of rows are in flight while one
is computed (the plain Triton kernel of kernels.py gathers fp8 rows with synchronous loads).

One program per (query token, head block of HP = 16 or 32 heads, split of the top-k list), one warpgroup
(or two: they split S^T's heads and O^T's latent rows). Keys sit on the M dimension of both products
(wgmma, M = BN = 64 keys):

    S^T [BN, HP]  = K_rope [BN, 64] @ q_rope^T (bf16)  +  K [BN, 512] @ q^T [512, HP]
    O^T [512, HP] += V^T [512, BN] @ P^T [BN, HP]        (fp16, V = K's first 512 columns)

Per block of BN top-k entries (the ring holds NSTAGES blocks, NSTAGES - 1 of them in flight while one
computes; each block's entries are loaded one iteration before its copies are issued):
  1. cp.async of the rows as stored (latent, fp8 scales, RoPE) into the block's stage; entries that are
     invalid (index < 0, >= num_slots, past topk_length or the split) are masked copies: the hardware
     writes zeros and reads nothing, so NaN rows behind them never reach a register;
  2. the latent is converted once into a scaled fp16 tile (V_SCALE = 2**-8, kernels.py's numerics):
     fp8 values times their power-of-two group scale (exact), or bf16 values (exact up to subnormals);
  3. S^T by wgmma (fp8 rows: q in fp16 over the fp16 tile, RoPE part in bf16 scaled into V_SCALE units;
     bf16 rows: q in bf16 over the raw bf16 tile, as kernels.py), online softmax in base 2 over the keys
     (axis 0), P^T in fp16 into shared memory, O^T by wgmma over the transposed fp16 tile (over fp8
     rows it stays in flight until the next block's tile is rewritten).

Measured on the H200 (bench/results/sparse_mla_gluon_sweep.json): decode fp8_ds_mla 512 tokens, 8 heads,
0.399 ms against 0.609 for the Triton kernel; one CTA per SM (shared memory), so each block's chain of
copies, conversion, products and softmax is latency-bound rather than bandwidth-bound (notes/sparse_mla.md).

Outputs follow kernels.sparse_mla_kernel exactly (final out / lse, or normalized split partials for
kernels.combine_splits_kernel), so launch.py swaps one kernel for the other.

Gluon does not run under TRITON_INTERPRET: the Triton kernel stays the CPU / interpreter path and the
fallback. bench/mla_gluon_check.py compiles this kernel for sm_90a on a machine without a GPU.
"""
from __future__ import annotations

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (async_copy, fence_async_shared, warpgroup_mma,
                                                                   warpgroup_mma_init, warpgroup_mma_wait)
    HAVE_GLUON = True
except Exception:  # pragma: no cover - older triton without Gluon
    HAVE_GLUON = False


if HAVE_GLUON:
    V_SCALE = gl.constexpr(1.0 / 256)
    LN2 = gl.constexpr(0.6931471805599453)
    NEG_INF = gl.constexpr(float("-inf"))

if HAVE_GLUON:
    @gluon.constexpr_function
    def _copy_layout(cols, elem_bytes, num_warps):
        """Blocked layout of a [rows, cols] gather: 16 bytes (or the row, if shorter) per thread per copy,
        threads along the row first. (Shared with gluon_ws.py and gluon64.py, as are _scale_layout and _idx.)"""
        vec = max(1, min(16 // elem_bytes, cols))
        tc = max(1, min(32, cols // vec))
        tr = 32 // tc
        return gl.BlockedLayout([1, vec], [tr, tc], [num_warps, 1], [1, 0])

    @gluon.constexpr_function
    def _scale_layout(rows, num_warps):
        """[rows, 4] fp32 group scales: one 4..16-byte copy per (row, thread), covering rows exactly."""
        vec = max(1, min(4, (4 * rows) // (32 * num_warps)))
        tc = 4 // vec
        return gl.BlockedLayout([1, vec], [32 // tc, tc], [num_warps, 1], [1, 0])

    @gluon.jit
    def _bf16_to_f16_scaled(x):
        """bf16 x (pairs of consecutive register elements) -> fp16(x x V_SCALE) with ONE rounding: mul.rn.bf16x2 by
        2^-8 (exact down to 2^-118, far below fp16's smallest subnormal), the halves widened to fp32 by a shift and
        a mask, cvt.rn.f16x2.f32. Finite for |x| < 2^24 (1 - 2^-12). Why inline PTX (session 60): `(x.to(float32) *
        V_SCALE).to(float16)`, written plainly, compiles (Triton 3.6) to cvt.rn.f16x2.f32 of x FIRST and mul.f16x2
        by 2^-8 after (the PTX of bench/mla_gluon_check.py --kernel prefill --dump), so |x| >= 65520 becomes inf and
        values below 2^-14 are rounded twice; it also costs a PRMT and two IMADs a pair to widen. gluon_prefill's
        config cvt_asm, this kernel's GluonConfig.cvt_asm (bf16 rows; both the default since session 62, measured
        1.02-1.08x faster on an H100: their docstrings) and gluon_rxb's V take it."""
        return gl.inline_asm_elementwise(
            "{ .reg .b32 c, s, lo, hi; mov.b32 c, 0x3B803B80; mul.rn.bf16x2 s, $1, c; shl.b32 lo, s, 16; "
            "and.b32 hi, s, 0xFFFF0000; cvt.rn.f16x2.f32 $0, hi, lo; }",
            "=r,r", [x], dtype=gl.float16, is_pure=True, pack=2)

    @gluon.jit
    def _idx(idx_row, start, hi, BN: gl.constexpr, L: gl.constexpr):
        """Raw top-k entries [start, start + BN) in layout L (-1 past hi), loaded ahead of their use."""
        j = start + gl.arange(0, BN, L)
        return gl.load(idx_row + j, mask=j < hi, other=-1)

    @gluon.jit
    def _issue(ix_lat, ix_sc, ix_rope, num_slots, lat_ptr, scale_ptr, rope_ptr, lat_buf, sc_buf, rope_buf,
               stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
               FP8: gl.constexpr, HAS_ROPE: gl.constexpr,
               LAT_L: gl.constexpr, SC_L: gl.constexpr, ROPE_L: gl.constexpr):
        """cp.async of one block's rows into one stage; ix_*: its raw entries in each copy layout's rows.
        Invalid entries are masked copies (zero-filled, never read)."""
        valid = (ix_lat >= 0) & (ix_lat < num_slots)
        slot = gl.where(valid, ix_lat, 0).to(gl.int64)
        cols = gl.arange(0, 512, gl.SliceLayout(0, LAT_L))
        async_copy.async_copy_global_to_shared(lat_buf, lat_ptr + slot[:, None] * stride_lat + cols[None, :],
                                               mask=valid[:, None])
        if FP8:
            valid = (ix_sc >= 0) & (ix_sc < num_slots)
            slot = gl.where(valid, ix_sc, 0).to(gl.int64)
            g = gl.arange(0, 4, gl.SliceLayout(0, SC_L))
            async_copy.async_copy_global_to_shared(sc_buf, scale_ptr + slot[:, None] * stride_scale + g[None, :],
                                                   mask=valid[:, None])
        if HAS_ROPE:
            valid = (ix_rope >= 0) & (ix_rope < num_slots)
            slot = gl.where(valid, ix_rope, 0).to(gl.int64)
            rc = gl.arange(0, 64, gl.SliceLayout(0, ROPE_L))
            async_copy.async_copy_global_to_shared(rope_buf, rope_ptr + slot[:, None] * stride_rope + rc[None, :],
                                                   mask=valid[:, None])

    @gluon.jit
    def _softmax_keys(s, ix, num_slots, qk_scale, m_i):
        """One block of the online softmax (base 2) for the kernels with keys on M (S^T [keys, heads]): entries
        outside [0, num_slots) score -inf. Returns (P^T, alpha, m); the callers keep their row sums."""
        valid = (ix >= 0) & (ix < num_slots)
        s = gl.where(valid[:, None], s * qk_scale, NEG_INF)
        m_new = gl.maximum(m_i, gl.max(s, 0))
        m_use = gl.where(m_new == NEG_INF, 0.0, m_new)
        alpha = gl.exp2(m_i - m_use)
        p = gl.exp2(s - m_use[None, :])
        return p, alpha, m_new

    @gluon.jit
    def _store_ot(acc, m_i, l_i, od, t, split, h0, num_heads, out_ptr, stride_ot, stride_os, stride_oh,
                  lse_ptr, stride_lt, stride_ls, stride_lh, HP: gl.constexpr, COL: gl.constexpr,
                  WITH_LSE: gl.constexpr):
        """Epilogue of the kernels holding O^T in V_SCALE units (gluon_ws, gluon_rx: latent rows od on M, heads
        h0 + [0, HP) on N, COL their slice layout): out = acc * 256 / l (0 for a head without a valid key), and
        with WITH_LSE lse = (m + log2 l) * ln 2 (-inf for such a head), into split `split` of token t."""
        empty = l_i == 0.0
        if WITH_LSE:
            lse = gl.where(empty, NEG_INF, (m_i + gl.log2(gl.where(empty, 1.0, l_i))) * LN2)
        inv_l = 256.0 / gl.where(empty, 1.0, l_i)
        o = acc * inv_l[None, :]
        oh = h0 + gl.arange(0, HP, COL)
        o_ptrs = out_ptr + t * stride_ot + split * stride_os + oh[None, :] * stride_oh + od[:, None]
        gl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=(oh < num_heads)[None, :])
        if WITH_LSE:
            gl.store(lse_ptr + t * stride_lt + split * stride_ls + oh * stride_lh, lse, mask=oh < num_heads)

    @gluon.jit(do_not_specialize=["num_slots", "num_heads", "topk", "keys_per_split"])
    def sparse_mla_small_kernel(
            q_ptr, stride_qt, stride_qh,
            lat_ptr, scale_ptr, rope_ptr,
            idx_ptr, stride_it, len_ptr,
            out_ptr, stride_ot, stride_os, stride_oh,
            lse_ptr, stride_lt, stride_ls, stride_lh,
            num_slots, num_heads, topk, keys_per_split, qk_scale,
            stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
            FP8: gl.constexpr, HAS_ROPE: gl.constexpr, HAS_LEN: gl.constexpr,
            HP: gl.constexpr, BN: gl.constexpr, NSTAGES: gl.constexpr, num_warps: gl.constexpr,
            CVT_ASM: gl.constexpr = 0):
        """Grid (T, cdiv(num_heads, HP), splits); arguments as kernels.sparse_mla_kernel. CVT_ASM (GluonConfig.cvt_asm,
        bf16 rows): V's conversion by _bf16_to_f16_scaled."""
        gl.static_assert(num_warps == 4 or num_warps == 8, "one or two warpgroups")
        gl.static_assert(BN == 64, "wgmma M: 64 keys per block")
        t = gl.program_id(0).to(gl.int64)
        h0 = gl.program_id(1) * HP
        split = gl.program_id(2)

        # ---- layouts -------------------------------------------------------------------------------
        LAT_DT: gl.constexpr = gl.float8e4nv if FP8 else gl.bfloat16
        LAT_BYTES: gl.constexpr = 1 if FP8 else 2
        Q_DT: gl.constexpr = gl.float16 if FP8 else gl.bfloat16
        LAT_L: gl.constexpr = _copy_layout(512, LAT_BYTES, num_warps)
        SC_L: gl.constexpr = _scale_layout(BN, num_warps)
        ROPE_L: gl.constexpr = _copy_layout(64, 2, num_warps)
        CVT_L: gl.constexpr = _copy_layout(128, LAT_BYTES, num_warps)   # one 128-column group
        Q_L: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [num_warps, 1], [1, 0])
        # S^T [BN, HP]: two warpgroups split the heads; O^T [512, HP]: they split the 512 latent rows
        WG: gl.constexpr = num_warps // 4
        MMA_S: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, WG],
                                                        instr_shape=[16, HP // WG, 16])
        MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                      instr_shape=[16, HP, 16])
        ROW_S: gl.constexpr = gl.SliceLayout(1, MMA_S)   # [BN] keys
        COL_S: gl.constexpr = gl.SliceLayout(0, MMA_S)   # [HP] heads of S^T
        ROW: gl.constexpr = gl.SliceLayout(1, MMA)       # [512] latent rows of O^T
        COL: gl.constexpr = gl.SliceLayout(0, MMA)       # [HP] heads of O^T

        # ---- shared memory -------------------------------------------------------------------------
        if FP8:
            LAT_S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        else:
            LAT_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, 512], gl.bfloat16)
        K16_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, 512], gl.float16)
        ROPE_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, 64], gl.bfloat16)
        Q_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HP, 512], Q_DT)
        QR_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HP, 64], gl.bfloat16)
        P_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, HP], gl.float16)
        SC_S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])

        lat_bufs = gl.allocate_shared_memory(LAT_DT, [NSTAGES, BN, 512], LAT_S)
        if FP8:
            sc_bufs = gl.allocate_shared_memory(gl.float32, [NSTAGES, BN, 4], SC_S)
        else:
            sc_bufs = lat_bufs
        if HAS_ROPE:
            rope_bufs = gl.allocate_shared_memory(gl.bfloat16, [NSTAGES, BN, 64], ROPE_S)
            qr_smem = gl.allocate_shared_memory(gl.bfloat16, [HP, 64], QR_S)
        else:
            rope_bufs = lat_bufs
            qr_smem = lat_bufs
        if FP8:
            k16 = gl.allocate_shared_memory(gl.float16, [BN, 512], K16_S)
        else:
            k16 = lat_bufs  # bf16 stages are converted in place
        q_smem = gl.allocate_shared_memory(Q_DT, [HP, 512], Q_S)
        p_smem = gl.allocate_shared_memory(gl.float16, [BN, HP], P_S)

        # ---- key range and the first NSTAGES - 1 blocks in flight ----------------------------------
        end = topk
        if HAS_LEN:
            end = gl.minimum(gl.load(len_ptr + t), topk)
        lo = split * keys_per_split
        hi = gl.minimum(lo + keys_per_split, end)
        idx_row = idx_ptr + t * stride_it
        LS: gl.constexpr = gl.SliceLayout(1, LAT_L)
        SS: gl.constexpr = gl.SliceLayout(1, SC_L)
        RS: gl.constexpr = gl.SliceLayout(1, ROPE_L)
        for i in gl.static_range(NSTAGES - 1):
            _issue(_idx(idx_row, lo + i * BN, hi, BN, LS), _idx(idx_row, lo + i * BN, hi, BN, SS),
                   _idx(idx_row, lo + i * BN, hi, BN, RS), num_slots, lat_ptr, scale_ptr, rope_ptr,
                   lat_bufs.index(i), sc_bufs.index(i), rope_bufs.index(i), stride_lat, stride_scale, stride_rope,
                   FP8, HAS_ROPE, LAT_L, SC_L, ROPE_L)
            async_copy.commit_group()
        # entries of the next block to issue, and of the block to compute, loaded one iteration ahead
        nx_lat = _idx(idx_row, lo + (NSTAGES - 1) * BN, hi, BN, LS)
        nx_sc = _idx(idx_row, lo + (NSTAGES - 1) * BN, hi, BN, SS)
        nx_rope = _idx(idx_row, lo + (NSTAGES - 1) * BN, hi, BN, RS)
        cur_row = _idx(idx_row, lo, hi, BN, ROW_S)

        # ---- q (zero rows for heads past num_heads) while the first rows arrive -----------------------
        qh = h0 + gl.arange(0, HP, gl.SliceLayout(1, Q_L))
        qd = gl.arange(0, 512, gl.SliceLayout(0, Q_L))
        q_row = q_ptr + t * stride_qt + qh[:, None] * stride_qh
        q_smem.store(gl.load(q_row + qd[None, :], mask=(qh < num_heads)[:, None], other=0.0).to(Q_DT))
        if HAS_ROPE:
            qr = gl.arange(0, 64, gl.SliceLayout(0, Q_L))
            qr_smem.store(gl.load(q_row + 512 + qr[None, :], mask=(qh < num_heads)[:, None], other=0.0))
        if FP8:
            qk_scale = qk_scale * 256.0  # the fp16 K tile is in V_SCALE units
        fence_async_shared()

        m_i = gl.full([HP], NEG_INF, gl.float32, COL_S)
        l_i = gl.zeros([HP], gl.float32, COL_S)
        acc = gl.zeros([512, HP], gl.float32, MMA)
        if FP8:
            acc = warpgroup_mma_init(acc)  # P @ V stays in flight into the next block (loop-carried token)
        nblocks = gl.cdiv(hi - lo, BN)
        for b in range(nblocks):
            # block b landed (NSTAGES - 2 younger groups may still fly); after the barrier every thread's
            # copies are visible and every warp is done with block b - 1's stage, which the next copies reuse
            async_copy.wait_group(NSTAGES - 2)
            gl.thread_barrier()
            fence_async_shared()  # the landed rows are read by wgmma (async proxy)
            nxt = b + NSTAGES - 1
            _issue(nx_lat, nx_sc, nx_rope, num_slots, lat_ptr, scale_ptr, rope_ptr,
                   lat_bufs.index(nxt % NSTAGES), sc_bufs.index(nxt % NSTAGES), rope_bufs.index(nxt % NSTAGES),
                   stride_lat, stride_scale, stride_rope, FP8, HAS_ROPE, LAT_L, SC_L, ROPE_L)
            async_copy.commit_group()
            nx_lat = _idx(idx_row, lo + (nxt + 1) * BN, hi, BN, LS)
            nx_sc = _idx(idx_row, lo + (nxt + 1) * BN, hi, BN, SS)
            nx_rope = _idx(idx_row, lo + (nxt + 1) * BN, hi, BN, RS)
            ix = cur_row
            cur_row = _idx(idx_row, lo + (b + 1) * BN, hi, BN, ROW_S)
            st = b % NSTAGES
            lat = lat_bufs.index(st)
            if FP8:
                acc = warpgroup_mma_wait(0, deps=(acc,))  # block b - 1's P @ V read the fp16 tile

            # S^T: the RoPE product (and over bf16 rows the latent one) reads the stage as it landed
            s = gl.zeros([BN, HP], gl.float32, MMA_S)
            if HAS_ROPE:
                s = warpgroup_mma(rope_bufs.index(st), qr_smem.permute((1, 0)), s, is_async=True)
            if FP8:
                v_tile = k16
            else:
                s = warpgroup_mma(lat, q_smem.permute((1, 0)), s, is_async=True)
                s = warpgroup_mma_wait(0, deps=(s,))
                gl.thread_barrier()  # every warp's share of the wgmma has read the bf16 tile
                v_tile = lat._reinterpret(gl.float16, [BN, 512], K16_S)  # converted in place below

            # the scaled fp16 tile, one 128-column group at a time (each thread rewrites what it read)
            for g in gl.static_range(4):
                raw = lat.slice(g * 128, 128, dim=1).load(CVT_L)
                if FP8:
                    sc = sc_bufs.index(st).slice(g, 1, dim=1).load(CVT_L)
                    v = raw.to(gl.float16) * (sc * V_SCALE).to(gl.float16)
                elif CVT_ASM:
                    v = _bf16_to_f16_scaled(raw)  # one rounding, finite below 2^24
                else:
                    # (compiled, this rounds x to fp16 before it scales: |x| >= 65520 becomes inf; kernels.py's
                    # docstring, session 60)
                    v = (raw.to(gl.float32) * V_SCALE).to(gl.float16)
                v_tile.slice(g * 128, 128, dim=1).store(v)
            fence_async_shared()
            gl.thread_barrier()
            if FP8:
                if HAS_ROPE:
                    s = warpgroup_mma_wait(0, deps=(s,)) * V_SCALE
                s = warpgroup_mma(k16, q_smem.permute((1, 0)), s, is_async=True)
                s = warpgroup_mma_wait(0, deps=(s,))
            elif HAS_ROPE:
                s = warpgroup_mma_wait(0, deps=(s,))

            p, alpha, m_new = _softmax_keys(s, ix, num_slots, qk_scale, m_i)
            l_i = l_i * alpha + gl.sum(p, 0)
            acc = acc * gl.convert_layout(alpha, COL)[None, :]
            m_i = m_new
            p_smem.store(p.to(gl.float16))
            fence_async_shared()
            gl.thread_barrier()
            acc = warpgroup_mma(v_tile.permute((1, 0)), p_smem, acc, is_async=True)
            if not FP8:  # the bf16 stage holds V: the next copies into it wait for this product
                acc = warpgroup_mma_wait(0, deps=(acc,))
        acc = warpgroup_mma_wait(0, deps=(acc,))
        async_copy.wait_group(0)

        # ---- epilogue: as kernels.sparse_mla_kernel --------------------------------------------------
        empty = l_i == 0.0
        lse = gl.where(empty, NEG_INF, (m_i + gl.log2(gl.where(empty, 1.0, l_i))) * LN2)
        inv_l = gl.convert_layout(256.0 / gl.where(empty, 1.0, l_i), COL)
        o = acc * inv_l[None, :]
        oh = h0 + gl.arange(0, HP, COL)
        od = gl.arange(0, 512, ROW)
        o_ptrs = out_ptr + t * stride_ot + split * stride_os + oh[None, :] * stride_oh + od[:, None]
        gl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=(oh < num_heads)[None, :])
        lh = h0 + gl.arange(0, HP, COL_S)
        gl.store(lse_ptr + t * stride_lt + split * stride_ls + lh * stride_lh, lse, mask=lh < num_heads)
