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

Status: compiled for sm_90a on a CPU machine when written (bench/mla_gluon_check.py --kernel ws), then run on
the H200: bit-identical to gluon_small and 1.20x / 1.21x faster at 8 / 16 heads (fp8 decode, 512 tokens;
bench/results/ab_gluon_ws_h8.json, ab_gluon_ws_h16.json). launch.py's 'auto' selects it for fp8 rows at
<= 16 heads (launch.ws_preferred); DSATTN_SPARSE_MLA_IMPL=gluon_ws forces it for fp8 rows up to 32 heads.

Removed in session 21 after its H200 run: config vst (the epilogue through an idle fp16 tile, stmatrix.trans, then
16-byte stores of out instead of 2-byte ones with 4 half-filled sectors an instruction; code at 2d4f5b2): bit-equal and
no faster, 32 heads fp8_ds_mla 512 / 2048 tokens 1.004x / 1.004x, nope 1.001x (bench/results/ab_s21_wsvst_*.json). The
same change gave gluon_rx 1.05-1.13x, whose old stores put every lane in its own sector (gluon_rx config vst).

Session 23 (H200, bench/gpu_s23_ws.sh, gpu_s23_ws2.sh; bench/logs/s23_ws*.log): config ahead (each gather's entries
loaded two half-blocks before it is issued; ptxas had hoisted the next gather's bounds checks above the current half's
conversion, so the producer stalled on entries loaded a few hundred instructions earlier) is the default: producer
alone 0.272 -> 0.240 ms (timing builds, 512 tokens 32 heads), full kernel 1.057x / 1.069x at 512 / 2048 tokens,
bit-equal. Tried after it and removed (code at 48bd802): config unit 16 (16-row raw stages, twice as many in the
same shared memory, three gathers in flight instead of one): bit-equal but 0.83-0.87x over fp8_ds_mla (0.90x over
nope), and its gathers-alone build no faster (0.245 vs 0.241 ms): more rows in flight do not speed these gathers
(bench/results/ab_s23_u16*.json, ws_profiles_s23_u16.json), as session 22's register producers had found. Also
removed (code at 351ce64): config release (the consumer waits for P V(b - 1) and frees its tile before waiting for
block b, not after): bit-equal, no difference (1.006x, CI 1.001-1.010, at 512 tokens; 0.997x at 2048; nope 1.004x;
bench/results/ab_s23_release_*.json). Measured and not kept (call 4, code at a183326, bench/logs/s23_ws4.log): ahead 3
/ 4 (the producer at 152 registers, where 128 spilled) no faster than 2 (0.989x / 0.993x), 152 registers at ahead 2
0.985x; a gathers-alone build with hashed, computed entries (no index loads) ran 0.69 ms against 0.24 (its rows fell
in another, slower pattern: it says nothing about the index loads). Nsight Compute at ahead 2 (bench/logs/s23_profile/):
the consumer now spins on `full` for 1.9% of all samples (11.1% before), and waits on its own wgmmas (9.3%) and its
softmax's reductions (FMNMX 6.5%, SHFL 3.9%): the consumer sets the pace. Then (call 5, code at 50624e3) config lazy:
the running max moved only in blocks whose scores pass it by more than 8 (base 2), elsewhere the cross-warp max and
the rescale of O^T skipped for one warpgroup-wide "any": within issue 3's tolerances of the reference in all 27 GPU
cases (q x 1 / 6 / 0.02; 4 cases tripped only the test's own lazy-vs-default bound: 0.031 against 0.02, which is one
bf16 step for values in [4, 8)), but slower: 0.981x (CI 0.976-0.989) at 512 tokens, 0.977x at 2048, nope 0.914x
(bench/results/ab_s23_lazy_*.json, bench/logs/s23_ws5.log). Not kept. Last (call 8, code at 620a969) config rot: each
latent row landed rotated in its stage so that it keeps its global 128-byte phase (the profile had counted 10.5
shared-memory wavefronts a latent copy for 4 ideal), rotated back in the conversion by two shuffles a word pair:
bit-equal (9 GPU tests) and slower, 0.843x (CI 0.831-0.846), nope 0.846x (bench/results/ab_s23_rot_*.json,
bench/logs/s23_rot.log): the producer's added shuffles cost more than the aligned copies save. Not kept.

Removed in session 24 after its H200 run (code at 9a9fdfa): config pingpong, two consumer warpgroups taking every
other block whole, each always on its own fp16 tile slot (the producer fills slot b % 2 anyway), P^T written over the
tile's RoPE part (dead once S^T retired), consumer 1's (m, l, O^T) merged at the end through its idle tile: no third
tile, 227,632 B of shared memory, hot loops spill-free, no wgmma serialization (compile check). Right (27 GPU tests
against the reference: 8 / 27 / 32 heads, three layouts, 64 / 96 / 2000 entries, split-K; within 0.004 / 2e-7 of the
default) and slower: fp8_ds_mla 32 heads 512 tokens 0.944x (producer 112 registers), 0.942x (96), 0.951x / 0.876x (8
producer warps at 64 registers, ahead 1 / 2), 2048 tokens 0.940x, nope 0.919x (bench/results/ab_s24_pp*.json,
bench/logs/s24_pp.log, s24_pp2.log). Nsight Compute (bench/logs/s24_profile/): each consumer spins on `full` for about a
third of its samples (11.4% and 9.8% of all samples on the try-wait branches): with two chains the producer, slowed by
their shared-memory traffic, sets the pace, so the one-consumer kernel's 0.33 ms is held by both sides at once. Then
(code at 50732b0) pingpong fed by gluon64's register producers (no raw stages: 185,648 B; session 22's depth / unit
brought back): right (27 GPU tests of the depth-2 ring; the 8-warp variant's tests failed on a test bug, its A/B compared
outputs within 0.001) and slower still: 0.883x (ring of 2 units of 16 rows, 4 warps), 0.890x (8 warps), 0.850x (one
half-block ahead), nope 0.873x (bench/results/ab_s24_ppr*.json, bench/logs/s24_pp3.log).

Removed in session 27 after its H200 run (code at 8d639a2, bench/gpu_s27_tma.sh, bench/logs/s27_tma.log): config tma,
the latent (512 bytes) and RoPE (128 bytes) of each row landed by one TMA copy of a one-row box of a host tensor
descriptor (the rows as int16 [num_slots, 256] / bf16 [num_slots, 64]; an invalid entry asked for row num_slots, out of
bounds, so zero-filled and nothing read), issued from a one-warp loader partition (96 registers: spill-free by the
compile check, 40-64 spilled) that held 8 entries a thread and picked each out of its registers; the scales stayed
cp.async from the loader (noinc arrives on the same mbarrier); the producer warpgroup only converted. Why: the latent
cp.async runs at 10.5 shared-memory wavefronts for 4 ideal (session 23) and session 19's 128-byte aligned rows were 5.7%
faster. Bit-equal (the 9 tests of test_ws_ahead_bit_equal with tma added; A/B max |out diff| 0) and much slower: 32
heads fp8_ds_mla 512 tokens 0.354 -> 0.613 ms (0.577x, 95% CI 0.571-0.589), 2048 tokens 0.576x, nope (3 stages) 0.830x;
loader at 128 registers 0.573x, producer at 160 0.575x (bench/results/ab_s27_tma_*.json). 0.613 ms is ~4300 SM cycles a
half-block of 64 copies per SM (~67 a copy; nope ~2800 for 32, ~88 a copy; the default ~2500 a half-block; taking the SM
clock as ~1.75 GHz, within the 1.70-1.80 GHz Nsight Compute read in bench/logs/s25_profile/ and s26_profile/: the A/B
runs record no clock), so the ring is paced by the loader's copies; the copies of a TMA op are always issued by one
elected thread in Gluon (with 4 loader warps in one partition Triton put a partition barrier before every copy), and
Hopper has no row-gather TMA (Blackwell's gather4). Then (code at 1e63530, bench/gpu_s27_tma4.sh) four one-warp loader
partitions, each issuing a quarter of the rows: bit-equal (the same 9 tests) and still slower, 0.717x (CI 0.708-0.730) /
0.757x at 512 / 2048 tokens, nope 0.967x (bench/results/ab_s27_tma4_*.json): four issuers gave 1.23x, not 4x, so past
the one warp's issue the copies themselves (~55 SM cycles a copy of a 64-copy half-block) or their latency at two stages
bind. Merging a row's latent, scales and RoPE into one copy (an int64 [1, 82] box) would halve the copies but needs
128-byte aligned 768-byte stage rows, 7 KB more than the 32-head program has.

Removed in session 22 after its H200 run: config depth / unit (code at a8df6ed), gluon64's register producers
(_producer, _producer_ring) feeding this consumer, no raw stages: at 32 heads a program the cp.async ring keeps ONE
21 KB half-block in flight, the register ring up to 63 KB (8 warps x 128 registers, depth 3 units of 32 rows; no spill
by the sm_90a compile check). Bit-equal (9 GPU tests) and slower at every shape, fp8_ds_mla 32 heads 512 tokens, `dsattn
bench ab` against the default (bench/gpu_s22_ws.sh, bench/results/ab_s22_ws_*.json): depth 3 unit 32 0.972x, depth 2
unit 32 0.944x, depth 3 unit 16 0.963x, 4 warps depth 2 unit 16 0.986x (nope 0.983x, 2048 tokens 0.984x). So the rows in
flight are not what holds the 32-head program back; its consumer's chain is (bench/logs/s22_ws.log).

Removed in session 28 (code at 42b02a1): config prefetch (rows of later half-blocks asked of L2 by
cp.async.bulk.prefetch.L2; slower at every distance tried in session 10, 8 heads 0.325 -> 0.452-0.460 ms, 32 heads
0.353 -> 0.494: bench/results/sparse_mla_gluon_ws_sweep_prefetch.json), as in gluon_rx and gluon64. The sm_90a PTX
of the defaults, ahead 1, 8 producer warps and the timing builds is identical outside debug information (compile
check); DSATTN_WS_CONFIG lost its 4th field.

Removed in session 29 after its H200 run (code at 97adb7b; bench/gpu_s29_b.sh, gpu_s29_c.sh, gpu_s29_d.sh,
bench/logs/s29_*): config persist, one CTA an SM walking the tokens pid, pid + 132, ... along ONE ring (block counters
running on across tokens, so the producer gathers the next token's first blocks during the consumer's last block,
epilogue and next q). Why: at whole waves (528 tokens, topk_length 64 to 2048, CUDA-graph replays) the 32-head decode
takes 0.0271 ms + 0.1495 ms per 1024 entries: 8.3% of the full time does not depend on the entries, up to ~6.8 us a
program over the 4 waves (bench/results/decode_fixed_cost_s29_h32.json). Bit-equal (18 GPU tests) and slower: 0.939x /
0.946x at 512 / 2048 tokens, nope 0.987x; the same code with one token a CTA (the grid of the default) 0.949x
(bench/results/ab_s29d_*.json), so walking the tokens took back none of that cost, as gluon_rx's persist found in
session 18. The first builds ran 0.82-0.89x: LLVM hoisted the q / out index vectors out of the token loop, they stayed
live through the block loop (48 int32 values a thread, by the layouts' element counts), and ptxas ran the softmax's key
sums as one serial chain (13 distinct shuffle destinations in the block loop's SASS against the default's 29, by the
sm_90a compile check; Nsight Compute of the slow build: bench/logs/s29_c/); built from an opaque zero in each token,
they no longer were.
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
    LN2 = gl.constexpr(0.6931471805599453)
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
