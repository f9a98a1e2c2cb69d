"""Ping-pong keys-on-M Gluon kernel over bf16 rows, 17..32 heads a program, Hopper (sm_90). Session 61: written on the
CPU; session 62 ran it on an H100: right (its GPU tests pass), and 0.917x / 0.884x the grouped gluon_prefill at 32
heads s_q 1024 / 8192 (0.904x at 24 heads; bench/results/ab_s62_rxb_*_h100.json; why: notes/sparse_mla.md, session
62). Nothing runs it unless DSATTN_SPARSE_MLA_IMPL=gluon_rx is set (then
it takes bf16-row launches of 32-head programs: the 'native' prefill at 17..32 heads, one token a program, no union
lists, and bf16-cache decode).

Why (notes/sparse_mla.md, session 61): issue 3's 32-head prefill row (0.928x / 0.950x FlashMLA's best on the H200,
1.3x asked) runs the grouped gluon_prefill, 64-row programs of two tokens over the union of their lists (1.407 x topk
with the `overlap` indices): 45 / 32 of the useful MMA work, ~418 KB of shared-memory traffic a 64-entry block
(landing, the fp16 conversion pass in place, q and the tile read by wgmma, P's hand-over), 9.4 MB a token. Here one
token's 32 heads are wgmma's N and the keys its M, as in gluon_rx's 32-head decode (1.535x FlashMLA padded on the H200):
no padded rows, no union, no list build, ~256 KB a token's 64-key block (landing 73.7 KB; S^T's operands, the tile
73.7 KB and q^T 36.9 KB; V^T 64 KB loaded into registers; P^T 8 KB): 8.2 MB a token.

Per program (grid (T, cdiv(H, 32), splits), as the other kernels):
  producer (worker, 4 warps): cp.async of each block's 64 rows as stored (latent [64, 512] bf16 and RoPE [64, 64]
      bf16) into NVMMA-swizzled stages (2: 72 KB each); invalid entries are masked copies (zero-filled, nothing read,
      so NaN rows behind them never reach the tile); cp.async's own mbarrier arrive on `full`.
  two ping-pong consumers (default partition and a worker, 4 warps each), as gluon_rx's _consumer_pp: consumer H takes
      blocks H, H + 2, ... whole, with its own online softmax and O^T, and one merge at the end (consumer 1's O^T in the
      stages' memory once consumer 0 is done). Per block:
        S^T [64 keys, 32] = K_rope q_rope^T + K q^T      wgmma, both operands from shared memory (bf16, as stored)
        softmax over the keys (base 2), P^T fp16 into the consumer's own buffer
        O^T [512, 32] += V16^T P^T                       V^T [512, 16 keys] loaded from the stage into wgmma's
                                                         register A layout, converted by _bf16_to_f16_scaled (fp16 x
                                                         2^-8, one rounding, finite below 2^24); 4 chunks of 16 keys
      The stage is released once its last V chunk is in registers (the products still in flight read registers and
      the consumer's P^T buffer).

Numerics: gluon_prefill's f16 schedule (q . k in bf16 over bf16 rows with fp32 accumulation, P in fp16, V as fp16 x
2^-8, O in fp32), with the conversion of _bf16_to_f16_scaled (gluon_prefill's config cvt_asm).
"""
from __future__ import annotations

import torch

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (async_copy, fence_async_shared, mbarrier,
                                                                   warpgroup_mma, warpgroup_mma_wait)
    HAVE_GLUON = True
except Exception:  # pragma: no cover - older triton without Gluon
    HAVE_GLUON = False

from ...formats import LATENT_DIM, KVLayout
from .._fastlaunch import launch as _fast_launch

if HAVE_GLUON:
    from .gluon_rx import _list_bounds, _opaque_zero, _pp_barriers, _pp_merge  # noqa: F401 (in the kernels)
    from .gluon_small import (_bf16_to_f16_scaled, _copy_layout, _idx, _softmax_keys,  # noqa: F401 (used inside
                              _store_ot)                                                 # the kernels)

BN = 64              # keys a block (wgmma M)
HP = 32              # heads a program (wgmma N)
STAGES = 2           # 72 KB a stage; q 36 KB, P 8 KB: a third stage does not fit in 227 KB
PRODUCER_WARPS = 4
PRODUCER_REGS = 40   # as gluon_rx's 32-head ping-pong programs
CONSUMER_REGS = 232  # (65536 - 128 x 40) / 256, rounded down to 8 (gluon_rx.rx_consumer_regs)

if HAVE_GLUON:
    NEG_INF = gl.constexpr(float("-inf"))
    KB = gl.constexpr(BN)

    @gluon.jit
    def _producer_b(idx_row, lo, hi, num_slots, lat_ptr, rope_ptr, lat_st, rope_st, full, free,
                    stride_lat: gl.constexpr, stride_rope: gl.constexpr, HAS_ROPE: gl.constexpr,
                    NSTAGES: gl.constexpr, PW: gl.constexpr, PROFILE: gl.constexpr = 0):
        """Per block: wait for its stage to be free, cp.async its rows (16-byte pieces), arrive on full when they
        land (noinc: one arrive per thread, the barrier counts PW x 32). PROFILE 2 (timing builds only, wrong
        outputs): no copies, each stage handed over as it is."""
        LAT_L: gl.constexpr = _copy_layout(512, 2, PW)
        ROPE_L: gl.constexpr = _copy_layout(64, 2, PW)
        LS: gl.constexpr = gl.SliceLayout(1, LAT_L)
        RS: gl.constexpr = gl.SliceLayout(1, ROPE_L)
        cols = gl.arange(0, 512, gl.SliceLayout(0, LAT_L))
        rcols = gl.arange(0, 64, gl.SliceLayout(0, ROPE_L))
        nblocks = gl.cdiv(hi - lo, KB)
        nx_lat = _idx(idx_row, lo, hi, KB, LS)
        nx_rope = _idx(idx_row, lo, hi, KB, RS)
        for b in range(nblocks):
            st = b % NSTAGES
            # the consumer that took block b - NSTAGES is done with it (mbarriers start with phase 1 complete)
            mbarrier.wait(free.index(st), ((b // NSTAGES) & 1) ^ 1)
            if PROFILE != 2:
                valid = (nx_lat >= 0) & (nx_lat < num_slots)
                slot = gl.where(valid, nx_lat, 0).to(gl.int64)
                async_copy.async_copy_global_to_shared(lat_st.index(st),
                                                       lat_ptr + slot[:, None] * stride_lat + cols[None, :],
                                                       mask=valid[:, None])
                if HAS_ROPE:
                    valid = (nx_rope >= 0) & (nx_rope < num_slots)
                    slot = gl.where(valid, nx_rope, 0).to(gl.int64)
                    async_copy.async_copy_global_to_shared(rope_st.index(st),
                                                           rope_ptr + slot[:, None] * stride_rope + rcols[None, :],
                                                           mask=valid[:, None])
            async_copy.mbarrier_arrive(full.index(st), increment_count=False)
            nx_lat = _idx(idx_row, lo + (b + 1) * KB, hi, KB, LS)
            nx_rope = _idx(idx_row, lo + (b + 1) * KB, hi, KB, RS)
        async_copy.wait_group(0)

    @gluon.jit
    def _stage_q_b(q_ptr, stride_qt, stride_qh, t, h0, num_heads, q_smem, qr_smem, HP: gl.constexpr,
                   ROPE: gl.constexpr, Q_L: gl.constexpr):
        """q of heads h0 + [0, HP) into shared memory as stored (bf16, logical column order); heads past num_heads
        are zeros."""
        qh = h0 + gl.arange(0, HP, gl.SliceLayout(1, Q_L))
        qd = gl.arange(0, 512, gl.SliceLayout(0, Q_L))
        q_row = q_ptr + t * stride_qt + qh[:, None] * stride_qh
        hmask = (qh < num_heads)[:, None]
        q_smem.store(gl.load(q_row + qd[None, :], mask=hmask, other=0.0))
        if ROPE:
            qr = gl.arange(0, 64, gl.SliceLayout(0, Q_L))
            qr_smem.store(gl.load(q_row + 512 + qr[None, :], mask=hmask, other=0.0))

    @gluon.jit
    def _consumer_b(q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads, qk_scale,
                    out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls, stride_lh,
                    q3, qr3, lat_st, rope_st, p_smem, macc, mm_s, ml_s, mbar, full, free,
                    HAS_ROPE: gl.constexpr, HP: gl.constexpr, NSTAGES: gl.constexpr, H: gl.constexpr,
                    PROFILE: gl.constexpr = 0):
        """Consumer H of the ping-pong pair (module docstring): blocks H, H + 2, ..., then the merge (consumer 1 hands
        (m, l, O^T) over; consumer 0 merges and stores out / lse). q3 / qr3 [1, HP, 512] / [1, HP, 64]: every block
        takes them, the stage and its P^T buffer through an opaque 0 (gluon_rx's spillfix: else LLVM hoists wgmma's
        shared-memory descriptors of both stages out of the loop, and in the worker partition, where they are not
        uniform registers, ptxas spilled ~400 B of them; compile check).
        PROFILE (timing builds only, wrong outputs): 1 each stage freed as soon as it is full, no products, no output
        (the producer alone); 3 V^T's registers taken as they are (bf16 bits read as fp16: what the conversion
        costs)."""
        NW: gl.constexpr = 4
        Q_L: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [NW, 1], [1, 0])
        MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1],
                                                      instr_shape=[16, HP, 16])
        DOT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
        ROW: gl.constexpr = gl.SliceLayout(1, MMA)
        COL: gl.constexpr = gl.SliceLayout(0, MMA)

        _stage_q_b(q_ptr, stride_qt, stride_qh, t, h0, num_heads, q3.index(0), qr3.index(0), HP, HAS_ROPE,
                   Q_L)  # (both consumers store the same values)
        fence_async_shared()
        gl.thread_barrier()

        m_i = gl.full([HP], NEG_INF, gl.float32, COL)
        l_i = gl.zeros([HP], gl.float32, COL)
        acc = gl.zeros([512, HP], gl.float32, MMA)
        nblocks = gl.cdiv(hi - lo, KB)
        if PROFILE == 1:
            for b in range(H, nblocks, 2):
                mbarrier.wait(full.index(b % NSTAGES), (b // NSTAGES) & 1)
                mbarrier.arrive(free.index(b % NSTAGES), count=1)
            return
        for b in range(H, nblocks, 2):
            z = _opaque_zero(b)
            q_smem = q3.index(z)
            p_buf = p_smem.index(H + z)
            st = b % NSTAGES
            ix = _idx(idx_row, lo + b * KB, hi, KB, ROW)
            lat = lat_st.index(st + z)
            mbarrier.wait(full.index(st), (b // NSTAGES) & 1)
            fence_async_shared()  # the landed rows (cp.async) before wgmma reads them
            s = gl.zeros([KB, HP], gl.float32, MMA)
            if HAS_ROPE:
                s = warpgroup_mma(rope_st.index(st + z), qr3.index(z).permute((1, 0)), s, is_async=True)
            s = warpgroup_mma(lat, q_smem.permute((1, 0)), s, is_async=True)
            s = warpgroup_mma_wait(0, deps=(s,))

            p, alpha, m_new = _softmax_keys(s, ix, num_slots, qk_scale, m_i)
            l_i = l_i * alpha + gl.sum(p, 0)
            acc = acc * alpha[None, :]
            m_i = m_new
            p_buf.store(p.to(gl.float16))
            fence_async_shared()
            gl.thread_barrier()
            for kc in gl.static_range(4):
                v = lat.slice(kc * 16, 16, dim=0).permute((1, 0)).load(DOT)
                if PROFILE == 3:
                    v = v.to(gl.float16, bitcast=True)
                else:
                    v = _bf16_to_f16_scaled(v)
                acc = warpgroup_mma(v, p_buf.slice(kc * 16, 16, dim=0), acc, is_async=True)
                if kc < 3:
                    acc = warpgroup_mma_wait(0, deps=(acc,))
            mbarrier.arrive(free.index(st), count=1)  # every read of the stage is done (V is in registers)
            acc = warpgroup_mma_wait(0, deps=(acc,))

        acc, m_i, l_i = _pp_merge(acc, m_i, l_i, macc, mm_s, ml_s, mbar, H, True, MMA, COL)  # (macc: the stages)
        if H == 0:
            _store_ot(acc, m_i, l_i, gl.arange(0, 512, ROW), t, split, h0, num_heads, out_ptr, stride_ot, stride_os,
                      stride_oh, lse_ptr, stride_lt, stride_ls, stride_lh, HP, COL, True)

    @gluon.jit(do_not_specialize=["num_slots", "num_heads", "topk", "keys_per_split"])
    def sparse_mla_rxb_kernel(
            q_ptr, stride_qt, stride_qh,
            lat_ptr, scale_ptr, rope_ptr,
            idx_ptr, stride_it, len_ptr,
            out_ptr, stride_ot, stride_os, stride_oh,
            lse_ptr, stride_lt, stride_ls, stride_lh,
            num_slots, num_heads, topk, keys_per_split, qk_scale,
            stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
            HAS_ROPE: gl.constexpr, HAS_LEN: gl.constexpr,
            HP: gl.constexpr, NSTAGES: gl.constexpr, PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
            CONSUMER_REGS: gl.constexpr, num_warps: gl.constexpr, PROFILE: gl.constexpr = 0):
        """Grid (T, cdiv(num_heads, HP), splits); arguments as the other sparse MLA kernels (launch.kernel_args) over
        bf16 rows (scale_ptr unused). PROFILE (timing builds, wrong outputs): 1 the producer alone, 2 the consumers
        alone, 3 V^T unconverted (_consumer_b, _producer_b)."""
        gl.static_assert(num_warps == 4, "each consumer is one warpgroup")
        gl.static_assert(NSTAGES >= 2, "one stage for each consumer")
        t = gl.program_id(0).to(gl.int64)
        h0 = gl.program_id(1) * HP
        split = gl.program_id(2)

        LAT_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, 512], gl.bfloat16)
        ROPE_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, 64], gl.bfloat16)
        Q_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HP, 512], gl.bfloat16)
        QR_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HP, 64], gl.bfloat16)
        P_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, HP], gl.float16)
        MACC_S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        M1_S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])

        lat_st = gl.allocate_shared_memory(gl.bfloat16, [NSTAGES, KB, 512], LAT_S)
        q3 = gl.allocate_shared_memory(gl.bfloat16, [1, HP, 512], Q_S)
        p_smem = gl.allocate_shared_memory(gl.float16, [2, KB, HP], P_S)
        gl.static_assert(NSTAGES * KB * 512 * 2 >= 512 * HP * 4, "the merge buffer lives in the latent stages")
        macc = lat_st._reinterpret(gl.float32, [512, HP], MACC_S)      # consumer 1's O^T for the merge
        mm_s = gl.allocate_shared_memory(gl.float32, [HP], M1_S)       # its m
        ml_s = gl.allocate_shared_memory(gl.float32, [HP], M1_S)       # its l
        if HAS_ROPE:
            rope_st = gl.allocate_shared_memory(gl.bfloat16, [NSTAGES, KB, 64], ROPE_S)
            qr3 = gl.allocate_shared_memory(gl.bfloat16, [1, HP, 64], QR_S)
        else:
            rope_st = lat_st
            qr3 = q3
        full, free, mbar = _pp_barriers(NSTAGES, PRODUCER_WARPS)
        lo, hi, idx_row = _list_bounds(idx_ptr, stride_it, len_ptr, t, split, topk, keys_per_split, HAS_LEN)

        gl.warp_specialize([
            (_consumer_b, (q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads,
                           qk_scale, out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls,
                           stride_lh, q3, qr3, lat_st, rope_st, p_smem, macc, mm_s, ml_s, mbar, full, free,
                           HAS_ROPE, HP, NSTAGES, 0, PROFILE)),
            (_consumer_b, (q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads,
                           qk_scale, out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls,
                           stride_lh, q3, qr3, lat_st, rope_st, p_smem, macc, mm_s, ml_s, mbar, full, free,
                           HAS_ROPE, HP, NSTAGES, 1, PROFILE)),
            (_producer_b, (idx_row, lo, hi, num_slots, lat_ptr, rope_ptr, lat_st, rope_st, full, free, stride_lat,
                           stride_rope, HAS_ROPE, NSTAGES, PRODUCER_WARPS, PROFILE)),
        ], [4, PRODUCER_WARPS], [CONSUMER_REGS, PRODUCER_REGS])


def run_attention_rxb(q, flat, indices, sm_scale, topk_length, out, lse, splits: int = 1, part_o=None,
                      part_lse=None, profile: int = 0) -> None:
    """launch.run_attention's contract over bf16 rows [N, D_qk] (D_qk 576 or 512) through sparse_mla_rxb_kernel,
    programs of 32 heads (q with 17..32 heads; fewer would pad the wgmma's N). profile 1..3 builds a timing variant
    with WRONG outputs (the kernel's PROFILE: 1 the producer alone, 2 the consumers alone, 3 V^T unconverted)."""
    from . import launch
    t, h, d = q.shape
    if flat.dtype != torch.bfloat16 or q.dtype != torch.bfloat16 or d not in (LATENT_DIM, LATENT_DIM + 64):
        raise ValueError(f"the bf16-row ping-pong kernel takes bf16 rows of D_qk 512 or 576, got kv {flat.dtype} "
                         f"and q {tuple(q.shape)}")
    if not 16 < h <= HP:
        raise ValueError(f"the bf16-row ping-pong kernel carries 17..32 heads a program, got q with {h}")
    if profile not in (0, 1, 2, 3):
        raise ValueError(f"profile must be 0..3, got {profile}")
    grid = (t, 1, splits)
    args = launch.kernel_args(q, flat, KVLayout.BF16, indices, sm_scale, topk_length, out, lse, splits, part_o,
                              part_lse, BN)
    _fast_launch(sparse_mla_rxb_kernel, grid, *args, d > LATENT_DIM, topk_length is not None, HP, STAGES,
                 PRODUCER_WARPS, PRODUCER_REGS, CONSUMER_REGS, num_warps=4, PROFILE=profile)
    launch.combine_splits(out, lse, part_o, part_lse, splits)
