"""Warp-specialized Gluon kernel of sparse MLA over fp8 rows for 64-head programs (heads on M), Hopper (sm_90).

STATUS: 'auto' runs it for every 64-head program over fp8 rows on sm_90 (launch.use_gluon64). Written and
compiled for sm_90a on a machine without a GPU (bench/mla_gluon_check.py --kernel g64), then run on the H200 in
session 10: every GPU test passed (bench/logs/s10_t_g64.log, s10_final.log); the producer sweep chose a ring of
2 x 16 rows (g64_config); issue 3's table (bench/results/sparse_mla_final_decode_*.json, FlashMLA in the same
process): fp8_ds_mla decode 64 heads 0.448 / 1.729 ms at 512 / 2048 tokens vs FlashMLA 0.443 / 1.701 (0.99x /
0.98x), 128 heads 0.881 / 3.434 vs 0.813 / 3.142 (0.92x / 0.91x). The predictions below were written before it ran.

The computation of kernels.sparse_mla_kernel with HEADS = 64 (heads on M), same numerics and outputs:

    S [64, BN] = q_rope K_rope^T + q K16^T         (S in V_SCALE units, BN = 64 keys a block)
    O [64, 512] += P V16                            (P fp16, V16 = the fp16 tile in V_SCALE units)

K16 is the scaled fp16 tile of kernels.py (fp8 value x power-of-two group scale x V_SCALE, exact) and q enters
q . k in fp16 (the V_SCALE folded into the softmax scale), as kernels.py does over fp8 rows. The RoPE product
is scaled by V_SCALE (a power of two: exact) through q_rope, before the product instead of after (gluon_ws.py
scales the RoPE tile instead), so both products accumulate into one S.

One CTA per (token, 64-head block, split), two partitions (gl.warp_specialize):

  producer (worker partition, PRODUCER_WARPS = 4 warps, setmaxnreg PRODUCER_REGS): gathers rows with plain global
      loads into registers (latent bytes and RoPE as int32 words: 8 / 16 bytes a thread per copy), converts them
      by inline PTX (cvt.rn.f16x2.e4m3x2) into one of two fp16 tiles [64, 512] (x group scale x V_SCALE; the
      scales are loaded at conversion time, after the same rows' latent bytes) and copies the RoPE bytes into the
      tile's bf16 [64, 64]; then fence, partition barrier, arrive on `full[slot]`. Two shapes (G64Config): a ring
      of DEPTH units of UNIT rows loaded ahead, each unit stored in one latent and one RoPE store, the unit DEPTH
      places later loaded into the registers it freed (_producer_ring; default 3 x 16 rows); or half-blocks
      reloaded group by group (_producer, depth 1). No raw shared-memory ring: q (72 KB) + two tiles (144 KB)
      + P (8 KB) already take 224 KB of the 227.
  consumer (default partition, 8 warps = two warpgroups): the MMA layouts put warpgroup w on columns
      [w * N / 2, (w + 1) * N / 2) of each product: S's keys 32w..32w+31 (wgmma N = 32) and O's latent columns
      256w..256w+255 (wgmma N = 256, O [64, 256] fp32 = 128 registers a thread). The row max and row sum of
      S cross the warpgroups (the compiler's reductions through shared memory). P goes through shared memory
      (each warpgroup writes its 32 keys, both read all 64). Before waiting for block b, both warpgroups
      retire block b - 1's P @ V, pass a partition barrier and arrive on `free[slot of b - 1]`.

Invalid entries (index < 0, >= num_slots, past topk_length or the split) are masked loads (zeros, nothing read)
and -inf scores. Heads past num_heads are zero queries, never stored. Outputs: out / lse, or normalized split
partials for kernels.combine_splits_kernel (launch.kernel_args / combine_splits), so launch.py swaps it in.
bf16 rows are not handled (launch.py keeps the Triton kernel for them).
"""
from __future__ import annotations

import dataclasses
import os

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, warpgroup_mma,
                                                                   warpgroup_mma_init, warpgroup_mma_wait)
    HAVE_GLUON = True
except Exception:  # pragma: no cover - older triton without Gluon
    HAVE_GLUON = False

from ...formats import LATENT_DIM, KVLayout
from .._fastlaunch import launch as _fast_launch

if HAVE_GLUON:
    from .gluon_small import _idx  # noqa: F401 (used inside the kernels)

BN = 64    # keys per block (S's N; P @ V's K)
HB = 32    # keys per producer half-block
HP = 64    # heads per program (wgmma M)
CONSUMER_WARPS = 8
SMEM_LIMIT = 232448  # bytes of shared memory one CTA may use on sm_90
SMEM_MARGIN = 1024   # mbarriers and the compiler's reduction scratch


@dataclasses.dataclass(frozen=True)
class G64Config:
    """Launch configuration of sparse_mla_g64_kernel: the producer partition's warps (4: one warpgroup; 8 does not
    compile: 512 threads cap the kernel at 128 registers) and register budget (setmaxnreg; the consumer
    warpgroups get the rest of the register file), and the producer's shape: depth 1 = half-blocks (unit 32),
    reloaded group by group (_producer); depth 2 or 3 = a ring of that many units of `unit` rows (16 or 32)
    loaded ahead (_producer_ring)."""
    producer_warps: int = 4
    producer_regs: int = 112
    unit: int = 16
    depth: int = 2
    vst: int = 1       # 1: the epilogue goes through the idle fp16 tiles so that out is stored in 16-byte pieces
    #                    (session 21, the default: bit-equal; fp8_ds_mla 64 heads 1.019x / 1.012x at 512 / 2048 tokens,
    #                    128 heads 1.015x, nope 64 heads no difference; bench/results/ab_s21_g64vst_*.json)


def g64_smem_bytes(layout: KVLayout, d_qk: int) -> int:
    """Shared memory the kernel allocates (without mbarriers and the compiler's scratch)."""
    rope = d_qk > LATENT_DIM and layout is KVLayout.FP8_DS_MLA
    q = HP * LATENT_DIM * 2 + (HP * 64 * 2 if rope else 0)
    tiles = 2 * BN * (LATENT_DIM * 2 + (64 * 2 if rope else 0))
    return q + tiles + HP * BN * 2


def parse_g64_config(spec: str) -> G64Config:
    """'warps/regs/unit/depth' (e.g. '4/104/32/1') -> G64Config, ValueError naming DSATTN_G64_CONFIG when it is
    not one the kernel takes."""
    try:
        fields = [int(x) for x in spec.split("/")]
        if len(fields) not in (4, 5):
            raise ValueError
        cfg = G64Config(*fields)
    except ValueError:
        raise ValueError("DSATTN_G64_CONFIG must be warps/regs/unit/depth[/vst], e.g. 4/120/16/3, "
                         f"got {spec!r}") from None
    ok = (cfg.producer_warps == 4 and cfg.producer_regs % 8 == 0 and 24 <= cfg.producer_regs <= 160
          and ((cfg.depth == 1 and cfg.unit == HB) or (cfg.depth in (2, 3) and cfg.unit in (16, 32)))
          and cfg.vst in (0, 1))
    if not ok:
        raise ValueError("DSATTN_G64_CONFIG: producer warps 4, registers a multiple of 8 in [24, 160], depth 1 with "
                         f"unit 32 or depth 2 / 3 with unit 16 / 32, vst 0 / 1; got {spec!r}")
    return cfg


# Session 23, measured and removed (code at 09d2c05): config ahead, the ring producer loading a unit's group scales with
# its rows and its entries a unit earlier, as WsConfig ahead does for gluon_ws. Bit-equal (9 GPU tests) and slower over
# fp8_ds_mla: 64 heads 0.933x at 120 producer registers (12 B spilled there), 0.897x at 112, 128 heads 0.928x, 2048
# tokens 0.930x; over nope (no spill) no difference, 1.005x (bench/results/ab_s23_g64*.json, bench/logs/s23_g64.log).
# Those loads do not hold the 64-head program back.
def g64_config(layout: KVLayout, num_heads: int, d_qk: int = 576) -> G64Config:
    """The default launch, the fastest producer of the H200 sweep (bench/results/sparse_mla_gluon64_sweep.json,
    `bench/mla_gluon_sweep.py --g64`, fp8 decode 512 tokens): a ring of 2 units of 16 rows, producer 112 registers:
    64 heads 0.444 ms (ring of 3 x 16 at 120 registers 0.564, half-blocks 0.512, 2 x 16 at 104 / 120 registers
    0.446 / 0.454), 128 heads 0.869 (1.109), 2048 tokens 64 heads 1.717 (2.198), nope 64 heads 0.408 (0.409).
    L2 prefetch ahead of the loads was slower at every distance tried (64 heads 0.641-0.671 ms; session 10 call 2,
    bench/logs/s10_call2.log, bench/results/sparse_mla_gluon64_sweep_prefetch.json; removed in session 28, code at
    42b02a1). DSATTN_G64_CONFIG='warps/regs/unit/depth[/vst]' (until session 28 with prefetch before vst) overrides
    it (for `dsattn bench ab --a env:DSATTN_G64_CONFIG=...` sweeps; read at launch time)."""
    spec = os.environ.get("DSATTN_G64_CONFIG", "").strip()
    return parse_g64_config(spec) if spec else G64Config()


if HAVE_GLUON:
    V_SCALE = gl.constexpr(1.0 / 256)
    LN2 = gl.constexpr(0.6931471805599453)
    NEG_INF = gl.constexpr(float("-inf"))
    KB = gl.constexpr(BN)
    HALF = gl.constexpr(HB)
    HEADS = gl.constexpr(HP)

    @gluon.constexpr_function
    def _lat_layout(num_warps):
        """[HALF, 32] int32 words (4 fp8 values each) of one 128-value group: 2 words (8 bytes) a thread per
        copy, so that after the conversion a warp's fp16 stores cover whole 128-byte rows of the swizzled tile.
        Words, not fp8 values: fp8 tensors are held one byte a register between load and conversion, which
        spilled the prefetched half-block in a first version (bench/mla_gluon_check.py --kernel g64)."""
        return gl.BlockedLayout([1, 2], [2, 16], [num_warps, 1], [1, 0])

    @gluon.constexpr_function
    def _rope_layout(num_warps):
        """[HALF, 32] int32 words (2 bf16 RoPE values each): 4 words (16 bytes) a thread per copy."""
        return gl.BlockedLayout([1, 4], [4, 8], [num_warps, 1], [1, 0])

    @gluon.jit
    def _entries(idx_row, start, hi, PW: gl.constexpr, R: gl.constexpr = HALF):
        """R raw entries (a half-block or a unit of the ring producer) in the row layouts of their loads
        (latent + scales, RoPE)."""
        return (_idx(idx_row, start, hi, R, gl.SliceLayout(1, _lat_layout(PW))),
                _idx(idx_row, start, hi, R, gl.SliceLayout(1, _rope_layout(PW))))

    @gluon.jit
    def _load_group(ix, g: gl.constexpr, num_slots, lat_ptr, stride_lat: gl.constexpr, PW: gl.constexpr):
        """Global loads of one 128-value group of a half-block's latent rows: [HALF, 32] int32 words (the fp8
        bytes as stored). Invalid entries are masked (zeros, nothing read)."""
        LAT_L: gl.constexpr = _lat_layout(PW)
        ix_lat, ix_rope = ix
        valid = (ix_lat >= 0) & (ix_lat < num_slots)
        slot = gl.where(valid, ix_lat, 0).to(gl.int64)
        words = g * 32 + gl.arange(0, 32, gl.SliceLayout(0, LAT_L))
        ptrs = lat_ptr.to(gl.pointer_type(gl.int32)) + slot[:, None] * (stride_lat // 4) + words[None, :]
        return gl.load(ptrs, mask=valid[:, None], other=0)

    @gluon.jit
    def _load_rope(ix, num_slots, rope_ptr, stride_rope: gl.constexpr, HAS_ROPE: gl.constexpr, PW: gl.constexpr):
        """Global loads of a half-block's RoPE as [HALF, 32] int32 words (masked: zeros); a dummy without
        RoPE. Words for the reason of _lat_layout."""
        ROPE_L: gl.constexpr = _rope_layout(PW)
        ix_lat, ix_rope = ix
        if HAS_ROPE:
            valid = (ix_rope >= 0) & (ix_rope < num_slots)
            slot = gl.where(valid, ix_rope, 0).to(gl.int64)
            rc = gl.arange(0, 32, gl.SliceLayout(0, ROPE_L))
            ptrs = rope_ptr.to(gl.pointer_type(gl.int32)) + slot[:, None] * (stride_rope // 2) + rc[None, :]
            rope = gl.load(ptrs, mask=valid[:, None], other=0)
        else:
            rope = ix_rope
        return rope

    @gluon.jit
    def _fp8x4_to_f16(w):
        """int32 words [R, 32] (4 e4m3 values each, little-endian) -> fp16 [R, 128] in column order."""
        v0, v1, v2, v3 = gl.inline_asm_elementwise(
            "{ .reg .b16 lo, hi; .reg .b32 a, b; mov.b32 {lo, hi}, $4; cvt.rn.f16x2.e4m3x2 a, lo; "
            "cvt.rn.f16x2.e4m3x2 b, hi; mov.b32 {$0, $1}, a; mov.b32 {$2, $3}, b; }",
            "=h,=h,=h,=h,r", [w], dtype=(gl.float16, gl.float16, gl.float16, gl.float16), is_pure=True, pack=1)
        # join(join(v0, v2), join(v1, v3))[r, c, k, i] = v(2k + i): flattened, column 4c + 2k + i
        v = gl.join(gl.join(v0, v2), gl.join(v1, v3))
        return gl.reshape(v, [w.shape[0], 4 * w.shape[1]])

    @gluon.jit
    def _words_to_bf16(w):
        """int32 words [R, 32] (2 bf16 values each, little-endian) -> bf16 [R, 64] in column order."""
        v0, v1 = gl.inline_asm_elementwise("mov.b32 {$0, $1}, $2;", "=h,=h,r", [w], dtype=(gl.bfloat16, gl.bfloat16),
                                           is_pure=True, pack=1)
        return gl.reshape(gl.join(v0, v1), [w.shape[0], 2 * w.shape[1]])

    @gluon.jit
    def _store_group(w, sc, tile, g: gl.constexpr):
        """One group's words into the tile's columns [128 g, 128 g + 128): fp8 value x (group scale x V_SCALE)
        in fp16, kernels._tiles' numerics (exact: the scales are powers of two)."""
        v = _fp8x4_to_f16(w)
        v = v * gl.convert_layout((sc * V_SCALE).to(gl.float16), gl.SliceLayout(1, v.type.layout))[:, None]
        tile.slice(g * 128, 128, dim=1).store(v)

    @gluon.jit
    def _producer(idx_row, lo, hi, num_slots, lat_ptr, scale_ptr, rope_ptr, k16, rope16, full, free,
                  stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
                  HAS_ROPE: gl.constexpr, PW: gl.constexpr):
        """Loads half-blocks into registers and converts each into its tile, one half ahead: right after a
        group (or the RoPE) of half j is stored, the same group of half j + 1 is loaded into the registers it
        freed, so one half-block's bytes fly while the next converts without two halves of registers.
        The group scales of half j are loaded when its conversion starts (after its latent bytes landed)."""
        nblocks = gl.cdiv(hi - lo, KB)
        ix = _entries(idx_row, lo, hi, PW)
        w0 = _load_group(ix, 0, num_slots, lat_ptr, stride_lat, PW)
        w1 = _load_group(ix, 1, num_slots, lat_ptr, stride_lat, PW)
        w2 = _load_group(ix, 2, num_slots, lat_ptr, stride_lat, PW)
        w3 = _load_group(ix, 3, num_slots, lat_ptr, stride_lat, PW)
        rope = _load_rope(ix, num_slots, rope_ptr, stride_rope, HAS_ROPE, PW)
        nx = _entries(idx_row, lo + HALF, hi, PW)
        for b in range(nblocks):
            slot = b % 2
            for h in gl.static_range(2):
                j = 2 * b + h
                if h == 0:
                    # the consumer is done with block b - 2's tile (mbarriers start with phase 1 complete)
                    mbarrier.wait(free.index(slot), ((b // 2) & 1) ^ 1)
                tile = k16.index(slot).slice(h * HALF, HALF, dim=0)
                ix_lat, ix_rope = ix
                valid = (ix_lat >= 0) & (ix_lat < num_slots)
                row_sc = scale_ptr + gl.where(valid, ix_lat, 0).to(gl.int64) * stride_scale
                sc0 = gl.load(row_sc, mask=valid, other=0.0)
                sc1 = gl.load(row_sc + 1, mask=valid, other=0.0)
                sc2 = gl.load(row_sc + 2, mask=valid, other=0.0)
                sc3 = gl.load(row_sc + 3, mask=valid, other=0.0)
                # half j + 1's loads (masked past hi: nothing read) as half j's registers free up
                _store_group(w0, sc0, tile, 0)
                w0 = _load_group(nx, 0, num_slots, lat_ptr, stride_lat, PW)
                _store_group(w1, sc1, tile, 1)
                w1 = _load_group(nx, 1, num_slots, lat_ptr, stride_lat, PW)
                _store_group(w2, sc2, tile, 2)
                w2 = _load_group(nx, 2, num_slots, lat_ptr, stride_lat, PW)
                _store_group(w3, sc3, tile, 3)
                w3 = _load_group(nx, 3, num_slots, lat_ptr, stride_lat, PW)
                if HAS_ROPE:  # the RoPE bytes as they are: the consumer scales q_rope by V_SCALE (exact)
                    rope16.index(slot).slice(h * HALF, HALF, dim=0).store(_words_to_bf16(rope))
                rope = _load_rope(nx, num_slots, rope_ptr, stride_rope, HAS_ROPE, PW)
                ix = nx
                nx = _entries(idx_row, lo + (j + 2) * HALF, hi, PW)
            fence_async_shared()  # the tile is read by wgmma (async proxy)
            gl.thread_barrier()
            mbarrier.arrive(full.index(slot), count=1)

    @gluon.jit
    def _load_unit(ix, num_slots, lat_ptr, rope_ptr, stride_lat: gl.constexpr, stride_rope: gl.constexpr,
                   HAS_ROPE: gl.constexpr, PW: gl.constexpr):
        """All loads of one unit of rows (latent words of the four groups, RoPE words)."""
        return (_load_group(ix, 0, num_slots, lat_ptr, stride_lat, PW),
                _load_group(ix, 1, num_slots, lat_ptr, stride_lat, PW),
                _load_group(ix, 2, num_slots, lat_ptr, stride_lat, PW),
                _load_group(ix, 3, num_slots, lat_ptr, stride_lat, PW),
                _load_rope(ix, num_slots, rope_ptr, stride_rope, HAS_ROPE, PW))

    @gluon.jit
    def _group_f16(w, sc):
        v = _fp8x4_to_f16(w)
        return v * gl.convert_layout((sc * V_SCALE).to(gl.float16), gl.SliceLayout(1, v.type.layout))[:, None]

    @gluon.jit
    def _store_unit(u, ix, num_slots, scale_ptr, stride_scale: gl.constexpr, rows, rope_rows,
                    HAS_ROPE: gl.constexpr):
        """One unit of loaded rows into its tile rows with one store for the latent (the four converted groups
        joined back into [R, 512]: one partition barrier per unit instead of one per group) and one for
        the RoPE; scales loaded here (after the unit's latent bytes), numerics as _store_group."""
        w0, w1, w2, w3, rope = u
        ix_lat, ix_rope = ix
        valid = (ix_lat >= 0) & (ix_lat < num_slots)
        row_sc = scale_ptr + gl.where(valid, ix_lat, 0).to(gl.int64) * stride_scale
        v0 = _group_f16(w0, gl.load(row_sc, mask=valid, other=0.0))
        v1 = _group_f16(w1, gl.load(row_sc + 1, mask=valid, other=0.0))
        v2 = _group_f16(w2, gl.load(row_sc + 2, mask=valid, other=0.0))
        v3 = _group_f16(w3, gl.load(row_sc + 3, mask=valid, other=0.0))
        # join(join(v0, v1), join(v2, v3))[r, c, a, b] = v(2b + a)[r, c] -> [r, b, a, c] -> column 128 (2b + a) + c
        v = gl.permute(gl.join(gl.join(v0, v1), gl.join(v2, v3)), (0, 3, 2, 1))
        rows.store(gl.reshape(v, [v0.shape[0], 512]))
        if HAS_ROPE:
            rope_rows.store(_words_to_bf16(rope))

    @gluon.jit
    def _producer_ring(idx_row, lo, hi, num_slots, lat_ptr, scale_ptr, rope_ptr, k16, rope16, full, free,
                       stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
                       HAS_ROPE: gl.constexpr, UNIT: gl.constexpr, DEPTH: gl.constexpr, PW: gl.constexpr):
        """The producer as a register ring: units of UNIT rows, DEPTH units loaded ahead (2 or 3); after a unit
        is stored, the unit DEPTH places later is loaded into the registers it freed."""
        gl.static_assert(DEPTH == 2 or DEPTH == 3, "a ring of 2 or 3 units")
        UPB: gl.constexpr = KB // UNIT
        nblocks = gl.cdiv(hi - lo, KB)
        e0 = _entries(idx_row, lo, hi, PW, UNIT)
        u0 = _load_unit(e0, num_slots, lat_ptr, rope_ptr, stride_lat, stride_rope, HAS_ROPE, PW)
        e1 = _entries(idx_row, lo + UNIT, hi, PW, UNIT)
        u1 = _load_unit(e1, num_slots, lat_ptr, rope_ptr, stride_lat, stride_rope, HAS_ROPE, PW)
        if DEPTH == 3:
            e2 = _entries(idx_row, lo + 2 * UNIT, hi, PW, UNIT)
            u2 = _load_unit(e2, num_slots, lat_ptr, rope_ptr, stride_lat, stride_rope, HAS_ROPE, PW)
        nx = _entries(idx_row, lo + DEPTH * UNIT, hi, PW, UNIT)
        for b in range(nblocks):
            slot = b % 2
            for k in gl.static_range(UPB):
                j = b * UPB + k
                if k == 0:
                    # the consumer is done with block b - 2's tile (mbarriers start with phase 1 complete)
                    mbarrier.wait(free.index(slot), ((b // 2) & 1) ^ 1)
                _store_unit(u0, e0, num_slots, scale_ptr, stride_scale, k16.index(slot).slice(k * UNIT, UNIT, dim=0),
                            rope16.index(slot).slice(k * UNIT, UNIT, dim=0), HAS_ROPE)
                new = _load_unit(nx, num_slots, lat_ptr, rope_ptr, stride_lat, stride_rope, HAS_ROPE, PW)
                if DEPTH == 3:
                    u0, e0, u1, e1, u2, e2 = u1, e1, u2, e2, new, nx
                else:
                    u0, e0, u1, e1 = u1, e1, new, nx
                nx = _entries(idx_row, lo + (j + DEPTH + 1) * UNIT, hi, PW, UNIT)
            fence_async_shared()  # the tile is read by wgmma (async proxy)
            gl.thread_barrier()
            mbarrier.arrive(full.index(slot), count=1)

    @gluon.jit
    def _consumer(q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads, qk_scale,
                  out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls, stride_lh,
                  q_smem, qr_smem, k16, rope16, p_smem, full, free,
                  HAS_ROPE: gl.constexpr, num_warps: gl.constexpr, VST: gl.constexpr = 0):
        """q to shared memory, then per block: S, online softmax, P, O += P V; the epilogue. VST (config vst): O is
        written into the fp16 tiles (idle: the last P V retired and no block is left for the producer) as [64, 512]
        of out's dtype, 16-byte chunks XOR-swizzled by head, and read back 16 bytes of one head a thread, so that out is
        stored in 16-byte pieces (the accumulator layout stores 4 bytes a lane, 8 half-filled sectors an
        instruction)."""
        gl.static_assert(num_warps == 8, "two consumer warpgroups")
        Q_L: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [num_warps, 1], [1, 0])
        MMA_S: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                        instr_shape=[16, KB // 2, 16])
        MMA_O: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                        instr_shape=[16, 256, 16])
        ROW_S: gl.constexpr = gl.SliceLayout(1, MMA_S)   # [64] heads
        COL_S: gl.constexpr = gl.SliceLayout(0, MMA_S)   # [BN] keys
        ROW_O: gl.constexpr = gl.SliceLayout(1, MMA_O)   # [64] heads
        COL_O: gl.constexpr = gl.SliceLayout(0, MMA_O)   # [512] latent columns

        qh = h0 + gl.arange(0, HEADS, gl.SliceLayout(1, Q_L))
        qd = gl.arange(0, 512, gl.SliceLayout(0, Q_L))
        q_row = q_ptr + t * stride_qt + qh[:, None] * stride_qh
        q_smem.store(gl.load(q_row + qd[None, :], mask=(qh < num_heads)[:, None], other=0.0).to(gl.float16))
        if HAS_ROPE:
            qr = gl.arange(0, 64, gl.SliceLayout(0, Q_L))
            # times V_SCALE (exact in bf16): the RoPE product lands in the fp16 tile's V_SCALE units
            qr_q = gl.load(q_row + 512 + qr[None, :], mask=(qh < num_heads)[:, None], other=0.0)
            qr_smem.store((qr_q.to(gl.float32) * V_SCALE).to(gl.bfloat16))
        qk_scale = qk_scale * 256.0  # S is in V_SCALE units
        fence_async_shared()
        gl.thread_barrier()

        m_i = gl.full([HEADS], NEG_INF, gl.float32, ROW_S)
        l_i = gl.zeros([HEADS], gl.float32, ROW_S)
        acc = warpgroup_mma_init(gl.zeros([HEADS, 512], gl.float32, MMA_O))
        nblocks = gl.cdiv(hi - lo, KB)
        cur = _idx(idx_row, lo, hi, KB, COL_S)
        for b in range(nblocks):
            slot = b % 2
            ix = cur
            cur = _idx(idx_row, lo + (b + 1) * KB, hi, KB, COL_S)  # the next block's entries, a block ahead
            # block b - 1's P @ V retired in both warpgroups: its tile (the other slot) and p_smem are free
            acc = warpgroup_mma_wait(0, deps=(acc,))
            gl.thread_barrier()
            mbarrier.arrive(free.index(1 - slot), count=1, pred=b > 0)
            mbarrier.wait(full.index(slot), (b // 2) & 1)
            s = gl.zeros([HEADS, KB], gl.float32, MMA_S)
            if HAS_ROPE:
                s = warpgroup_mma(qr_smem, rope16.index(slot).permute((1, 0)), s, is_async=True)
            s = warpgroup_mma(q_smem, k16.index(slot).permute((1, 0)), s, is_async=True)
            s = warpgroup_mma_wait(0, deps=(s,))

            valid = (ix >= 0) & (ix < num_slots)
            s = gl.where(valid[None, :], s * qk_scale, NEG_INF)
            m_new = gl.maximum(m_i, gl.max(s, 1))  # across both warpgroups
            m_use = gl.where(m_new == NEG_INF, 0.0, m_new)
            alpha = gl.exp2(m_i - m_use)
            p = gl.exp2(s - m_use[:, None])
            l_i = l_i * alpha + gl.sum(p, 1)  # across both warpgroups
            acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
            m_i = m_new
            p_smem.store(p.to(gl.float16))
            fence_async_shared()
            gl.thread_barrier()  # both warpgroups' halves of P are in p_smem
            acc = warpgroup_mma(p_smem, k16.index(slot), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc,))

        # ---- epilogue: as kernels.sparse_mla_kernel --------------------------------------------------
        empty = l_i == 0.0
        lse = gl.where(empty, NEG_INF, (m_i + gl.log2(gl.where(empty, 1.0, l_i))) * LN2)
        inv_l = gl.convert_layout(256.0 / gl.where(empty, 1.0, l_i), ROW_O)
        o = acc * inv_l[:, None]
        if VST:
            DT: gl.constexpr = out_ptr.dtype.element_ty
            VEC: gl.constexpr = 128 // DT.primitive_bitwidth  # 16 bytes of out's dtype
            buf = k16._reinterpret(DT, [HEADS, 512], gl.SwizzledSharedLayout(VEC, 1, 8, [1, 0]))
            gl.thread_barrier()  # both warpgroups' last P @ V retired: the tiles are ours
            buf.store(o.to(DT))
            gl.thread_barrier()
            O_L: gl.constexpr = gl.BlockedLayout([1, VEC], [1, 32], [num_warps, 1], [1, 0])
            oh = h0 + gl.arange(0, HEADS, gl.SliceLayout(1, O_L))
            od = gl.arange(0, 512, gl.SliceLayout(0, O_L))
            o_ptrs = out_ptr + t * stride_ot + split * stride_os + oh[:, None] * stride_oh + od[None, :]
            gl.store(o_ptrs, buf.load(O_L), mask=(oh < num_heads)[:, None])
        else:
            oh = h0 + gl.arange(0, HEADS, ROW_O)
            od = gl.arange(0, 512, COL_O)
            o_ptrs = out_ptr + t * stride_ot + split * stride_os + oh[:, None] * stride_oh + od[None, :]
            gl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=(oh < num_heads)[:, None])
        lh = h0 + gl.arange(0, HEADS, ROW_S)
        gl.store(lse_ptr + t * stride_lt + split * stride_ls + lh * stride_lh, lse, mask=lh < num_heads)

    @gluon.jit(do_not_specialize=["num_slots", "num_heads", "topk", "keys_per_split"])
    def sparse_mla_g64_kernel(
            q_ptr, stride_qt, stride_qh,
            lat_ptr, scale_ptr, rope_ptr,
            idx_ptr, stride_it, len_ptr,
            out_ptr, stride_ot, stride_os, stride_oh,
            lse_ptr, stride_lt, stride_ls, stride_lh,
            num_slots, num_heads, topk, keys_per_split, qk_scale,
            stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
            HAS_ROPE: gl.constexpr, HAS_LEN: gl.constexpr,
            PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr, UNIT: gl.constexpr, DEPTH: gl.constexpr,
            num_warps: gl.constexpr, VST: gl.constexpr = 0):
        """Grid (T, cdiv(num_heads, 64), splits); arguments as kernels.sparse_mla_kernel (fp8 rows)."""
        t = gl.program_id(0).to(gl.int64)
        h0 = gl.program_id(1) * HEADS
        split = gl.program_id(2)

        K16_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, 512], gl.float16)
        ROPE_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, 64], gl.bfloat16)
        Q_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HEADS, 512], gl.float16)
        QR_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HEADS, 64], gl.bfloat16)
        P_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HEADS, KB], gl.float16)

        q_smem = gl.allocate_shared_memory(gl.float16, [HEADS, 512], Q_S)
        k16 = gl.allocate_shared_memory(gl.float16, [2, KB, 512], K16_S)
        p_smem = gl.allocate_shared_memory(gl.float16, [HEADS, KB], P_S)
        if HAS_ROPE:
            rope16 = gl.allocate_shared_memory(gl.bfloat16, [2, KB, 64], ROPE_S)
            qr_smem = gl.allocate_shared_memory(gl.bfloat16, [HEADS, 64], QR_S)
        else:
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

        if DEPTH == 1:
            gl.static_assert(UNIT == HALF, "depth 1: half-blocks")
            gl.warp_specialize([
                (_consumer, (q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads,
                             qk_scale, out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls,
                             stride_lh, q_smem, qr_smem, k16, rope16, p_smem, full, free, HAS_ROPE, num_warps,
                             VST)),
                (_producer, (idx_row, lo, hi, num_slots, lat_ptr, scale_ptr, rope_ptr, k16, rope16, full, free,
                             stride_lat, stride_scale, stride_rope, HAS_ROPE, PRODUCER_WARPS)),
            ], [PRODUCER_WARPS], [PRODUCER_REGS])
        else:
            gl.warp_specialize([
                (_consumer, (q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads,
                             qk_scale, out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls,
                             stride_lh, q_smem, qr_smem, k16, rope16, p_smem, full, free, HAS_ROPE, num_warps,
                             VST)),
                (_producer_ring, (idx_row, lo, hi, num_slots, lat_ptr, scale_ptr, rope_ptr, k16, rope16, full, free,
                                  stride_lat, stride_scale, stride_rope, HAS_ROPE, UNIT, DEPTH, PRODUCER_WARPS)),
            ], [PRODUCER_WARPS], [PRODUCER_REGS])


def run_attention_g64(q, flat, layout: KVLayout, indices, sm_scale, topk_length, out, lse, splits: int = 1,
                      part_o=None, part_lse=None, config: G64Config | None = None) -> None:
    """launch.run_attention's contract over fp8 rows through sparse_mla_g64_kernel (64-head programs: the
    'native' variant at >= 33 heads, or 'pad64'; heads past H are masked)."""
    from . import launch
    if not layout.is_fp8:
        raise ValueError(f"the 64-head Gluon kernel takes fp8 rows only, got layout {layout.value}")
    t, h, d = q.shape
    cfg = config or g64_config(layout, h, d)
    grid = (t, -(-h // HP), splits)
    _fast_launch(sparse_mla_g64_kernel, grid,
        *launch.kernel_args(q, flat, layout, indices, sm_scale, topk_length, out, lse, splits, part_o, part_lse, BN),
        d > LATENT_DIM and layout is KVLayout.FP8_DS_MLA, topk_length is not None,
        cfg.producer_warps, cfg.producer_regs, cfg.unit, cfg.depth,
        num_warps=CONSUMER_WARPS, VST=cfg.vst,
    )
    launch.combine_splits(out, lse, part_o, part_lse, splits)
