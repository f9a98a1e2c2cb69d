"""Warp-specialized Gluon kernel of sparse MLA over fp8 rows for few heads per program (1..32), Hopper (sm_90).

The same products, numerics and outputs as gluon_small.sparse_mla_small_kernel (read its docstring first),
split over two partitions of one CTA that hand shared-memory buffers to each other through mbarriers, so
that the fp8 -> fp16 conversion of one block of keys overlaps the products and softmax of the previous one
(gluon_small runs them one after the other in one warpgroup: notes/sparse_mla.md, "Why, and what next"):

  producer (worker partition, one warpgroup): cp.async gathers of half-blocks (HB = 32 top-k entries: latent,
      fp8 group scales, RoPE) into a ring of NSTAGES raw stages; each half is converted into one of two
      scaled fp16 tiles [BN, 512] (fp8 value x power-of-two group scale x V_SCALE, exact) and its RoPE part
      into the tile's bf16 RoPE buffer [BN, 64], scaled by V_SCALE (a power of two: exact), so S^T of the
      tile comes out in V_SCALE units as gluon_small's rope-product-times-V_SCALE does; then `full[slot]`.
  consumer (default partition, one warpgroup): waits `full[slot]`, S^T [BN, HP] = rope q_rope^T (bf16) +
      K16 q^T (fp16) by wgmma, online softmax in base 2 over the keys, P^T (fp16) to shared memory,
      O^T [512, HP] += V^T P^T by wgmma (V = the fp16 tile, left in flight into the next block); once that
      product has retired it arrives on `free[slot]`, which the producer waits on before it rewrites the tile.

Why half-blocks: two 64-key fp16 tiles (2 x 72 KB with RoPE) plus q leave room for only one raw 64-key stage
at 16 heads (227 KB per CTA); three raw 32-key stages fit, so two gathers stay in flight while a half converts.

Invalid entries (index < 0, >= num_slots, past topk_length or the split) are masked copies (zeros, nothing
read) and -inf scores, as in gluon_small. Outputs: out / lse, or normalized split partials for
kernels.combine_splits_kernel. bf16 rows are not handled here (launch.py keeps gluon_small for them).

Status: since session 59 launch.py's 'auto' does not run it (gluon_rx's ping-pong consumers took 17..32 heads a
program, 1.10x / 1.15x faster at 32 heads, 512 / 2048 tokens, on an H100: bench/results/ab_s59_pp32_fp8_*.json; it was
'auto''s there from session 10); DSATTN_SPARSE_MLA_IMPL=gluon_ws forces it for fp8 rows up to 32 heads. On the H200,
fp8_ds_mla decode, topk 2048, 32 heads: 0.330 / 1.288 ms at 512 / 2048 tokens against FlashMLA padded to 64 heads
0.439 / 1.710 (1.33x / 1.33x; session 29, bench/results/sparse_mla_s29_decode_512.json, _2048.json). Its one option
beyond stages and registers, ahead (each gather's entries loaded two half-blocks before it is issued), is the default
since session 23: 1.057x / 1.069x, bit-equal (bench/results/ab_s23_ahead_*.json).

Options measured on the H200 and removed (each right in its GPU tests; numbers, profiles and the reasons in
notes/sparse_mla.md, whose section "gluon_ws.py's docstring, sessions 21-29" holds what this docstring said of them):
vst, 16-byte epilogue stores through an idle tile (no faster; session 21, code at 2d4f5b2); depth / unit, gluon64's
register producers (0.94-0.99x; session 22, a8df6ed); unit 16, 16-row raw stages (0.83-0.90x; session 23, 48bd802);
release, the tile freed before the wait for the next block (no difference; 351ce64); ahead 3 / 4 (no faster than 2;
a183326); lazy, a lazily moved softmax max (0.91-0.98x; 50624e3); rot, latent rows landed rotated to keep their
128-byte phase (0.84-0.85x; 620a969); pingpong, two consumer warpgroups (0.88-0.95x, 0.85-0.89x fed by register
producers; session 24, 9a9fdfa, 50732b0); tma, rows landed by one-row TMA copies (0.58x from one loader warp, 0.72x
from four, at 512 tokens; session 27, 8d639a2, 1e63530); prefetch, L2 prefetch of later rows (slower at every distance;
session 28, 42b02a1); persist, one CTA an SM walking the tokens along one ring (0.94-0.99x; session 29, 97adb7b).
"""
from __future__ import annotations

import dataclasses
import os

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (async_copy, fence_async_shared, mbarrier,
                                                                   warpgroup_mma, warpgroup_mma_init,
                                                                   warpgroup_mma_wait)
    HAVE_GLUON = True
except Exception:  # pragma: no cover - older triton without Gluon
    HAVE_GLUON = False

from ...formats import LATENT_DIM, KVLayout
from .._fastlaunch import launch as _fast_launch

if HAVE_GLUON:
    from .gluon_small import (_copy_layout, _idx, _issue, _scale_layout, _softmax_keys,  # noqa: F401 (used in
                              _store_ot)                                                  # the kernels)

BN = 64   # keys per block (wgmma M)
HB = 32   # keys per gathered half-block (the raw ring's unit)
SMEM_LIMIT = 232448  # bytes of shared memory one CTA may use on sm_90
SMEM_MARGIN = 1024   # mbarriers and the compiler's reduction scratch


@dataclasses.dataclass(frozen=True)
class WsConfig:
    """Launch configuration of sparse_mla_ws_kernel: raw half-block stages of the ring, the producer
    partition's register budget (setmaxnreg; the consumer gets the rest of the register file) and warps
    (4: one warpgroup, or 8)."""
    stages: int = 3
    producer_regs: int = 128
    producer_warps: int = 4
    ahead: int = 2     # half-blocks between loading a gather's entries and issuing it (1 or 2; see _producer; 2,
    #                    the default since session 23: 1.04-1.07x at 32 heads, bench/results/ab_s23_ahead_*.json)


def ws_hp(num_heads: int) -> int:
    """Heads per program (the wgmma N): 16, or 32 for 17..32 heads (as gluon_small)."""
    return 16 if num_heads <= 16 else 32


def ws_smem_bytes(layout: KVLayout, d_qk: int, hp: int, stages: int) -> int:
    """Shared memory the kernel allocates (without mbarriers and the compiler's scratch)."""
    rope = d_qk > LATENT_DIM and layout is KVLayout.FP8_DS_MLA
    stage = HB * (LATENT_DIM + 16 + (2 * 64 if rope else 0))
    tiles = 2 * BN * (LATENT_DIM * 2 + (64 * 2 if rope else 0))
    fixed = hp * LATENT_DIM * 2 + (hp * 64 * 2 if rope else 0) + BN * hp * 2
    return stages * stage + tiles + fixed


def ws_config(layout: KVLayout, num_heads: int, d_qk: int = 576) -> WsConfig:
    """As many raw stages (2..4) as shared memory holds (fp8_ds_mla 576 -> 3 at 16 heads a program, 2 at 32;
    nope / 512 -> 4 at 16, 3 at 32), and 8 producer warps at 16 heads a program (4 at 32). The H200 sweep
    (bench/results/sparse_mla_gluon_ws_sweep.json, 512 tokens, one timing each): fp8_ds_mla 8 / 16 heads 3/128/8
    0.326 / 0.330 ms vs 3/128/4 0.333 / 0.335; nope 8 heads 4/128/8 0.296 vs 4/128/4 0.309; 32 heads 2/128/4 0.354
    vs 2/128/8 0.359. Entries loaded two half-blocks ahead of their gather (ahead 2, session 23: `dsattn bench ab`
    against ahead 1, H200, 32 heads fp8_ds_mla 512 tokens 0.394 -> 0.372 ms, 1.057x, 95% CI 1.050-1.061; 2048 tokens
    1.069x; nope 1.039x; outputs bit-equal; ahead 2 with 8 producer warps: 0.961x against ahead 1). DSATTN_WS_CONFIG=
    'stages/regs/warps[/ahead]' overrides it (A/B runs; read at launch; until session 28 a 4th field, L2 prefetch,
    came before ahead: gluon_ws's docstring)."""
    spec = os.environ.get("DSATTN_WS_CONFIG", "").strip()
    if spec:
        try:
            cfg = WsConfig(*[int(x) for x in spec.split("/")])
            if cfg.ahead not in (1, 2):
                raise ValueError
            return cfg
        except (TypeError, ValueError):
            raise ValueError("DSATTN_WS_CONFIG must be stages/producer_regs/producer_warps[/ahead] (ahead 1 or 2), "
                             "e.g. 3/128/8/2, "
                             f"got {spec!r}") from None
    hp = ws_hp(num_heads)
    stages = 4
    while stages > 2 and ws_smem_bytes(layout, d_qk, hp, stages) + SMEM_MARGIN > SMEM_LIMIT:
        stages -= 1
    return WsConfig(stages=stages, producer_warps=8 if hp == 16 else 4)


if HAVE_GLUON:
    V_SCALE = gl.constexpr(1.0 / 256)
    NEG_INF = gl.constexpr(float("-inf"))
    KB = gl.constexpr(BN)
    HALF = gl.constexpr(HB)

    @gluon.jit
    def _entries(idx_row, start, hi, PW: gl.constexpr):
        """A half-block's raw entries [start, start + HALF), in the row layouts of its three copies (loaded ahead
        of their use, so the load's latency stays off the copies' path)."""
        return (_idx(idx_row, start, hi, HALF, gl.SliceLayout(1, _copy_layout(512, 1, PW))),
                _idx(idx_row, start, hi, HALF, gl.SliceLayout(1, _scale_layout(HALF, PW))),
                _idx(idx_row, start, hi, HALF, gl.SliceLayout(1, _copy_layout(64, 2, PW))))

    @gluon.jit
    def _gather(ix, num_slots, lat_ptr, scale_ptr, rope_ptr, lat_buf, sc_buf, rope_buf,
                stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
                HAS_ROPE: gl.constexpr, PW: gl.constexpr):
        """cp.async of one half-block's rows (ix: its entries, from _entries) into one raw stage, committed
        as one group. Invalid entries are masked copies: zero-filled, nothing read."""
        LAT_L: gl.constexpr = _copy_layout(512, 1, PW)
        SC_L: gl.constexpr = _scale_layout(HALF, PW)
        ROPE_L: gl.constexpr = _copy_layout(64, 2, PW)
        ix_lat, ix_sc, ix_rope = ix
        _issue(ix_lat, ix_sc, ix_rope, num_slots, lat_ptr, scale_ptr, rope_ptr, lat_buf, sc_buf, rope_buf,
               stride_lat, stride_scale, stride_rope, True, HAS_ROPE, LAT_L, SC_L, ROPE_L)
        async_copy.commit_group()

    @gluon.jit
    def _producer(idx_row, lo, hi, num_slots, lat_ptr, scale_ptr, rope_ptr,
                  raw_lat, raw_sc, raw_rope, k16, rope16, full, free,
                  stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
                  HAS_ROPE: gl.constexpr, NSTAGES: gl.constexpr, PW: gl.constexpr, PROFILE: gl.constexpr,
                  AHEAD: gl.constexpr):
        """Gathers half-blocks into the raw ring (NSTAGES - 1 in flight) and converts each into its tile.
        PROFILE (timing builds only, wrong outputs): 2 = no gather and no conversion (hand the tiles over as they
        are), 3 = gather but no conversion, 4 = convert whatever the stages hold, no gather.
        AHEAD: a gather's entries are loaded AHEAD half-blocks before it is issued. With 1, ptxas hoists the next
        gather's address arithmetic (the bounds check and the row offset of each entry) above the conversion of
        the current half, so the conversion waits on entries loaded a few hundred instructions earlier (session 20
        profile, 32 heads: 18% of the producer's samples on that first use, bench/logs/s20_profile/dc32_*.txt);
        with 2 the entries in use were loaded a whole half-block before."""
        GATHER: gl.constexpr = PROFILE != 2 and PROFILE != 4
        CONVERT: gl.constexpr = PROFILE != 2 and PROFILE != 3
        nblocks = gl.cdiv(hi - lo, KB)
        for i in gl.static_range(NSTAGES - 1 if GATHER else 0):
            _gather(_entries(idx_row, lo + i * HALF, hi, PW), num_slots, lat_ptr, scale_ptr, rope_ptr,
                    raw_lat.index(i), raw_sc.index(i), raw_rope.index(i), stride_lat, stride_scale, stride_rope,
                    HAS_ROPE, PW)
        nx = _entries(idx_row, lo + (NSTAGES - 1) * HALF, hi, PW)
        nx2 = nx
        if AHEAD == 2:
            nx2 = _entries(idx_row, lo + NSTAGES * HALF, hi, PW)
        for b in range(nblocks):
            slot = b % 2
            k16_t = k16.index(slot)
            for h in gl.static_range(2):
                j = 2 * b + h
                # half j landed (NSTAGES - 2 younger groups may fly); after the barrier every producer
                # thread's copies are visible and every thread is done converting half j - 1, whose stage
                # the next gather reuses
                nxt = j + NSTAGES - 1
                if GATHER:
                    async_copy.wait_group(NSTAGES - 2)
                    gl.thread_barrier()
                    _gather(nx, num_slots, lat_ptr, scale_ptr, rope_ptr,
                            raw_lat.index(nxt % NSTAGES), raw_sc.index(nxt % NSTAGES), raw_rope.index(nxt % NSTAGES),
                            stride_lat, stride_scale, stride_rope, HAS_ROPE, PW)
                    if AHEAD == 2:
                        nx = nx2
                        nx2 = _entries(idx_row, lo + (nxt + 2) * HALF, hi, PW)
                    else:
                        nx = _entries(idx_row, lo + (nxt + 1) * HALF, hi, PW)
                if h == 0:
                    # the consumer is done with block b - 2's tile (mbarriers start with phase 1 complete)
                    mbarrier.wait(free.index(slot), ((b // 2) & 1) ^ 1)
                # the whole half in one load and one store: the compiler cannot tell the partition's buffers
                # apart and puts a barrier between every load and a following store
                st = j % NSTAGES
                if CONVERT:
                    _convert_half(raw_lat.index(st), raw_sc.index(st), raw_rope.index(st), k16_t, rope16.index(slot), h,
                                  HAS_ROPE, PW)
            fence_async_shared()  # the tile is read by wgmma (async proxy)
            gl.thread_barrier()
            mbarrier.arrive(full.index(slot), count=1)
        async_copy.wait_group(0)

    @gluon.jit
    def _convert_half(raw_lat, raw_sc, raw_rope, k16_t, rope16_t, h: gl.constexpr, HAS_ROPE: gl.constexpr,
                      PW: gl.constexpr):
        """One raw half-block stage into half h of its fp16 tile (and the RoPE part into the bf16 RoPE tile)."""
        # a half-block's latent, 8 values per thread: each warp's st.shared of 16-byte fp16 chunks covers
        # whole 128-byte rows of the swizzled tile (no bank conflict; 16 fp8 a thread made them 2-way)
        CVT_L: gl.constexpr = _copy_layout(512, 2, PW)
        ROPE_L: gl.constexpr = _copy_layout(64, 2, PW)
        raw = raw_lat.load(CVT_L)
        scs = raw_sc
        c = gl.arange(0, 512, gl.SliceLayout(0, CVT_L))[None, :]
        sc = gl.where(c < 256,
                      gl.where(c < 128, scs.slice(0, 1, dim=1).load(CVT_L), scs.slice(1, 1, dim=1).load(CVT_L)),
                      gl.where(c < 384, scs.slice(2, 1, dim=1).load(CVT_L), scs.slice(3, 1, dim=1).load(CVT_L)))
        if HAS_ROPE:
            r = raw_rope.load(ROPE_L)
        k16_t.slice(h * HALF, HALF, dim=0).store(raw.to(gl.float16) * (sc * V_SCALE).to(gl.float16))
        if HAS_ROPE:
            rope16_t.slice(h * HALF, HALF, dim=0).store((r.to(gl.float32) * V_SCALE).to(gl.bfloat16))

    @gluon.jit
    def _idle_consumer(lo, hi, full, free, k16, q_smem, p_smem, lse_ptr, num_warps: gl.constexpr):
        """Timing builds only (PROFILE 1 or 3): takes each tile and hands it back at once, no products, no output.
        It reads one row of each tile (and touches q / P) so that the kernel keeps the shared memory, and so the
        occupancy, of the real one."""
        L: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [1, num_warps], [1, 0])
        acc = gl.zeros([8, 512], gl.float32, L)
        for b in range(gl.cdiv(hi - lo, KB)):
            mbarrier.wait(full.index(b % 2), (b // 2) & 1)
            acc += k16.index(b % 2).slice(0, 8, dim=0).load(L).to(gl.float32)
            mbarrier.arrive(free.index(b % 2), count=1)
        acc += q_smem.slice(0, 8, dim=0).load(L).to(gl.float32)
        acc += gl.sum(p_smem.slice(0, 8, dim=0).load(L).to(gl.float32), 1)[:, None]
        if lo > hi:  # never: keeps the reads
            gl.store(lse_ptr + gl.arange(0, 8, gl.SliceLayout(1, L))[:, None] * 512
                     + gl.arange(0, 512, gl.SliceLayout(0, L))[None, :], acc)

    @gluon.jit
    def _consumer(q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads, qk_scale,
                  out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls, stride_lh,
                  q_smem, qr_smem, k16, rope16, p_smem, full, free,
                  HAS_ROPE: gl.constexpr, HP: gl.constexpr, num_warps: gl.constexpr):
        """q to shared memory, then per block: S^T, online softmax, P^T, O^T += V^T P^T; the epilogue."""
        Q_L: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [num_warps, 1], [1, 0])
        MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                      instr_shape=[16, HP, 16])
        ROW: gl.constexpr = gl.SliceLayout(1, MMA)   # [KB] keys, or [512] latent rows of O^T
        COL: gl.constexpr = gl.SliceLayout(0, MMA)   # [HP] heads

        qh = h0 + gl.arange(0, HP, gl.SliceLayout(1, Q_L))
        qd = gl.arange(0, 512, gl.SliceLayout(0, Q_L))
        q_row = q_ptr + t * stride_qt + qh[:, None] * stride_qh
        q_smem.store(gl.load(q_row + qd[None, :], mask=(qh < num_heads)[:, None], other=0.0).to(gl.float16))
        if HAS_ROPE:
            qr = gl.arange(0, 64, gl.SliceLayout(0, Q_L))
            qr_smem.store(gl.load(q_row + 512 + qr[None, :], mask=(qh < num_heads)[:, None], other=0.0))
        qk_scale = qk_scale * 256.0  # S^T is in V_SCALE units
        fence_async_shared()
        gl.thread_barrier()

        m_i = gl.full([HP], NEG_INF, gl.float32, COL)
        l_i = gl.zeros([HP], gl.float32, COL)
        acc = warpgroup_mma_init(gl.zeros([512, HP], gl.float32, MMA))
        nblocks = gl.cdiv(hi - lo, KB)
        cur = _idx(idx_row, lo, hi, KB, ROW)
        for b in range(nblocks):
            slot = b % 2
            ix = cur
            cur = _idx(idx_row, lo + (b + 1) * KB, hi, KB, ROW)  # the next block's entries, a block ahead
            mbarrier.wait(full.index(slot), (b // 2) & 1)
            # block b - 1's P @ V has retired: its tile (the other slot) and p_smem are free
            acc = warpgroup_mma_wait(0, deps=(acc,))
            mbarrier.arrive(free.index(1 - slot), count=1, pred=b > 0)
            s = gl.zeros([KB, HP], gl.float32, MMA)
            if HAS_ROPE:
                s = warpgroup_mma(rope16.index(slot), qr_smem.permute((1, 0)), s, is_async=True)
            s = warpgroup_mma(k16.index(slot), q_smem.permute((1, 0)), s, is_async=True)
            s = warpgroup_mma_wait(0, deps=(s,))

            p, alpha, m_new = _softmax_keys(s, ix, num_slots, qk_scale, m_i)
            l_i = l_i * alpha + gl.sum(p, 0)
            acc = acc * alpha[None, :]
            m_i = m_new
            p_smem.store(p.to(gl.float16))
            fence_async_shared()
            gl.thread_barrier()
            acc = warpgroup_mma(k16.index(slot).permute((1, 0)), p_smem, acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc,))

        # ---- epilogue: as kernels.sparse_mla_kernel --------------------------------------------------
        _store_ot(acc, m_i, l_i, gl.arange(0, 512, ROW), t, split, h0, num_heads, out_ptr, stride_ot, stride_os,
                  stride_oh, lse_ptr, stride_lt, stride_ls, stride_lh, HP, COL, True)

    @gluon.jit(do_not_specialize=["num_slots", "num_heads", "topk", "keys_per_split"])
    def sparse_mla_ws_kernel(
            q_ptr, stride_qt, stride_qh,
            lat_ptr, scale_ptr, rope_ptr,
            idx_ptr, stride_it, len_ptr,
            out_ptr, stride_ot, stride_os, stride_oh,
            lse_ptr, stride_lt, stride_ls, stride_lh,
            num_slots, num_heads, topk, keys_per_split, qk_scale,
            stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
            HAS_ROPE: gl.constexpr, HAS_LEN: gl.constexpr,
            HP: gl.constexpr, NSTAGES: gl.constexpr, PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
            num_warps: gl.constexpr, PROFILE: gl.constexpr = 0, AHEAD: gl.constexpr = 2):
        """Grid (T, cdiv(num_heads, HP), splits); arguments as gluon_small.sparse_mla_small_kernel (fp8 rows)."""
        gl.static_assert(num_warps == 4, "the consumer is one warpgroup")
        gl.static_assert(NSTAGES >= 2, "at least one gather in flight while a half-block converts")
        t = gl.program_id(0).to(gl.int64)
        h0 = gl.program_id(1) * HP
        split = gl.program_id(2)

        RAW_S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        K16_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, 512], gl.float16)
        ROPE_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, 64], gl.bfloat16)
        Q_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HP, 512], gl.float16)
        QR_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HP, 64], gl.bfloat16)
        P_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, HP], gl.float16)

        raw_lat = gl.allocate_shared_memory(gl.float8e4nv, [NSTAGES, HALF, 512], RAW_S)
        raw_sc = gl.allocate_shared_memory(gl.float32, [NSTAGES, HALF, 4], RAW_S)
        k16 = gl.allocate_shared_memory(gl.float16, [2, KB, 512], K16_S)
        q_smem = gl.allocate_shared_memory(gl.float16, [HP, 512], Q_S)
        p_smem = gl.allocate_shared_memory(gl.float16, [KB, HP], P_S)
        if HAS_ROPE:
            raw_rope = gl.allocate_shared_memory(gl.bfloat16, [NSTAGES, HALF, 64], RAW_S)
            rope16 = gl.allocate_shared_memory(gl.bfloat16, [2, KB, 64], ROPE_S)
            qr_smem = gl.allocate_shared_memory(gl.bfloat16, [HP, 64], QR_S)
        else:
            raw_rope = raw_sc
            rope16 = k16
            qr_smem = q_smem
        full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(2):
            mbarrier.init(full.index(i), count=1)
            mbarrier.init(free.index(i), count=1)

        end = topk
        if HAS_LEN:
            end = gl.minimum(gl.load(len_ptr + t), topk)
        lo = split * keys_per_split
        hi = gl.minimum(lo + keys_per_split, end)
        idx_row = idx_ptr + t * stride_it

        if PROFILE == 1 or PROFILE == 3:
            gl.warp_specialize([
                (_idle_consumer, (lo, hi, full, free, k16, q_smem, p_smem, lse_ptr, num_warps)),
                (_producer, (idx_row, lo, hi, num_slots, lat_ptr, scale_ptr, rope_ptr,
                             raw_lat, raw_sc, raw_rope, k16, rope16, full, free,
                             stride_lat, stride_scale, stride_rope, HAS_ROPE, NSTAGES, PRODUCER_WARPS, PROFILE,
                             AHEAD)),
            ], [PRODUCER_WARPS], [PRODUCER_REGS])
        else:
            gl.warp_specialize([
                (_consumer, (q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads,
                             qk_scale, out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls,
                             stride_lh, q_smem, qr_smem, k16, rope16, p_smem, full, free, HAS_ROPE, HP, num_warps)),
                (_producer, (idx_row, lo, hi, num_slots, lat_ptr, scale_ptr, rope_ptr,
                             raw_lat, raw_sc, raw_rope, k16, rope16, full, free,
                             stride_lat, stride_scale, stride_rope, HAS_ROPE, NSTAGES, PRODUCER_WARPS, PROFILE,
                             AHEAD)),
            ], [PRODUCER_WARPS], [PRODUCER_REGS])


def run_attention_ws(q, flat, layout: KVLayout, indices, sm_scale, topk_length, out, lse, splits: int = 1,
                     part_o=None, part_lse=None, config: WsConfig | None = None, profile: int = 0) -> None:
    """launch.run_attention's contract over fp8 rows through sparse_mla_ws_kernel (native few-head variant).
    profile != 0 builds a timing variant with wrong outputs (bench/mla_gluon_sweep.py --ws --profile): 1 producer alone,
    2 consumer alone, 3 gathers alone, 4 producer without gathers + consumer."""
    from . import launch
    if not layout.is_fp8:
        raise ValueError(f"the warp-specialized kernel takes fp8 rows only, got layout {layout.value}")
    t, h, d = q.shape
    if h > 32:
        raise ValueError(f"the warp-specialized kernel carries at most 32 heads, got q with {h}")
    hp = ws_hp(h)
    cfg = config or ws_config(layout, h, d)
    if cfg.ahead not in (1, 2):
        raise ValueError(f"config.ahead must be 1 or 2 (half-blocks between loading a gather's entries and issuing "
                         f"it), got {cfg.ahead}")
    grid = (t, -(-h // hp), splits)
    _fast_launch(sparse_mla_ws_kernel, grid,
        *launch.kernel_args(q, flat, layout, indices, sm_scale, topk_length, out, lse, splits, part_o, part_lse, BN),
        d > LATENT_DIM and layout is KVLayout.FP8_DS_MLA, topk_length is not None,
        hp, cfg.stages, cfg.producer_warps, cfg.producer_regs,
        num_warps=4, PROFILE=profile, AHEAD=cfg.ahead,
    )
    launch.combine_splits(out, lse, part_o, part_lse, splits)
