"""Config pair of the grouped bf16 prefill (gluon_prefill.PrefillConfig.pair): FlashMLA's staggered pair schedule
over rows converted beforehand (config pre16: kernels.f16_rows wrote each row's latent part as fp16(x x 2^-8)), with
our numerics (fp16 q, stages and P; one P @ V), Hopper (sm_90).

Why over converted rows only: the schedule's consumers run a 64-row block faster than the split consumer's
(session 65: 1.91 against 2.36 us alone, H100), but a conversion pass in shared memory costs ~1 us a block whatever
the schedule (session 68: the pair over fp16 stages converted by its producer ran 0.81-0.86x the default). With the
rows converted once a row (sparse_mla_prefill's row_scratch), the producer only copies, as FlashMLA's does.

A program is 64 rows (G tokens x HPT heads, as gluon_prefill: grouping.group_shape) walking its list in pairs of
64-entry blocks. Step i holds block 2 i in stage 0 and 2 i + 1 in stage 1, each stage as two halves with their own
full / free mbarriers: L (latent columns 0..255) and R (latent 256..511 and the RoPE columns).

    producer (worker, 4 warps): cp.async of each half (FlashMLA's copy layout: eight threads a 128-byte row piece),
        then one no-increment cp.async arrive a thread on the half's full mbarrier (full once every thread's copies
        landed: no wait_group, no partition barrier). Halves are refilled in the order their last readers release
        them: L(0), R(0), R(1), L(1). Invalid entries are masked copies (zero-filled, nothing read); a missing last
        block (an odd count) is gathered as all invalid, so every step runs the same code, unless config odd
        (PrefillConfig.odd, the pair's default since session 79): then nothing is copied for it, warpgroup 1 runs no
        S over it and no P V of its own, warpgroup 0 no P V against L(1); every hand-off and release stays.
    consumer warpgroup 0 (worker): S(2 i) over L(0) then R(0); m0 = max(m, its rows' max) to warpgroup 1; its P
        against m0 and its own P V (V = L(0)) issued at once; the common max mc from warpgroup 1; its P x 2^(m0 - mc)
        into stage 0's RoPE tile (dead once S(2 i) retired); L(0) released after its own P V; the other P V (warpgroup
        1's P against L(1)), then L(1) released. O[:, :256].
    consumer warpgroup 1 (default partition): S(2 i + 1) over R(1) then L(1); mc = max(m0, its rows' max) to
        warpgroup 0; its P against mc to shared memory; the other P V first (stage 0's RoPE tile against R(0)), R(0)
        released, then its own P V (V = R(1)), R(1) released. O[:, 256:].

So each half has one releasing warpgroup (tests/test_prefill_protocol.py models the protocol). Each warpgroup keeps
the row sums of its own blocks in mc's units; l = l_0 + l_1 at the end. Config lazy (PrefillConfig.lazy, on where
rows_config picks the pair; session 74): m0 and mc above are the maxima in use, moved only where a row rose more than
2^8 above them, and a warpgroup rescales O only when one of its rows moved (tests/test_pair_lazy_math.py is the
recurrence's twin). Two options measured and removed (sessions 75-76; gluon_prefill.PrefillConfig's comments): pe
and ring. q (fp16) and its RoPE part (bf16 x 2^-8) sit in shared memory. Outputs: as gluon_prefill (out x 256 / l,
lse natural log; a row without a valid entry out 0, lse -inf); split launches (SPLIT) store normalized partials as
gluon_prefill's do. Config vst (on where rows_config picks the pair; session 78): each warpgroup stores its half of O
through its own stage, 16 bytes a thread (the stages are idle once the l exchange is done), in place of 4-byte stores
from the accumulator layout: the epilogue 13.4k / 9.8k -> 3.7k / 2.9k cycles at 32 heads s_q 1024 (H100,
bench/s78/edges.py; the second run had session 78's qld too, which changed only q's load).

Shared memory: 230,832 B (sm_90a compile; q 72 KB, two stages 144 KB, warpgroup 1's P 8 KB, the exchange 1 KB).
Measured (H100, session 69, notes/sparse_mla.md; bench/results/s69/): against the split consumer over the same rows,
`dsattn bench ab` 1.098x at 32 heads s_q 1024 (95% CI 1.084-1.109); 1.129x / 1.131x / 1.133x at 32 / 16 / 8 heads
s_q 8192 (bench/s69_pair/pair_pre16.py); 0.943x at 64 heads (one token a program), where it is not the default.
"""
from __future__ import annotations

from .gluon_prefill import HAVE_GLUON, M, PRODUCER_WARPS

if HAVE_GLUON:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (async_copy, fence_async_shared, mbarrier,
                                                                   warpgroup_mma, warpgroup_mma_wait)

    from .gluon_prefill import _store_rows, _store_rows_tile, _work_item
    from .gluon_small import _idx

PAIR_PRODUCER_REGS = 56  # the producer copies only; at 80 (the split consumer's) the worker warpgroup's 216 spilled 8
#                          bytes, at 56 it gets 224 and nothing spills at 8..64 heads (bench/mla_gluon_check.py, sm_90a)


STAMP_STEPS, STAMP_POINTS = 48, 10  # PROFILE bit 32: gluon_pair's STAMP_STEPS / STAMP_POINTS (stamp_buffer)
LAST_STAMPS = None  # PROFILE bit 32: the stamps of the last launch (gluon_prefill._launch)


def stamp_buffer(programs: int, splits: int, device):
    """PROFILE bit 32 (timing builds, session 74): the %clock64 stamps of one launch, int64 [programs x splits, 2
    warpgroups, STAMP_STEPS steps, STAMP_POINTS], zero where nothing was stamped. Points a step (both warpgroups unless
    named): 0 the step's start; 1 S retired; 2 the maxima exchanged (warpgroup 0: mc read; 1: m0 read and mc
    published); 3 its P stored and signalled; 4 warpgroup 0: its own P V retired, L(0) released; warpgroup 1: the
    other P V issued (warpgroup 0's P and R(0) landed); 5 warpgroup 0: the other P V issued (warpgroup 1's P and L(1)
    landed); warpgroup 1: R(0) released; 6 the step's end (its last release); 7 at step 0 only, the SM's id; 8 / 9
    the first / second half S reads landed (warpgroup 0: L(0) / R(0); 1: R(1) / L(1); 8 before S's first product
    issues, 9 after it). The last step's slot (STAMP_STEPS - 1, never a step's: topk 2048 at G 2 walks <= 32 steps)
    holds the program's boundaries (session 78): 0 the warpgroup's entry, 1 q stored by both warpgroups, 2 its
    epilogue's stores issued (%clock64); 8 / 9 the entry and the stores issued by %globaltimer (ns)."""
    import torch
    return torch.zeros((programs * splits, 2, STAMP_STEPS, STAMP_POINTS), dtype=torch.int64, device=device)


def pair_regs(producer_regs: int) -> int:
    """setmaxnreg of the worker consumer warpgroup: half of what the producer leaves of the register file, a multiple
    of 8 (the default partition gets the rest)."""
    return (65536 - 32 * PRODUCER_WARPS * producer_regs) // 256 // 8 * 8


if HAVE_GLUON:
    LN2 = gl.constexpr(0.6931471805599453)
    V_SCALE = gl.constexpr(1.0 / 256)
    NEG_INF = gl.constexpr(float("-inf"))
    ROWS = gl.constexpr(M)
    # PrefillConfig.lazy: P may reach 2^LAZY_LOG2 against the max in use before that max moves (fp16 P holds up to
    # 65504; O and l are fp32)
    LAZY_LOG2 = gl.constexpr(8.0)
    # PROFILE bit 32 (timing builds): the steps a warpgroup stamps, and the stamps a step (_stamp)
    STAMP_STEPS = gl.constexpr(48)
    STAMP_POINTS = gl.constexpr(10)

    @gluon.constexpr_function
    def _copy_l(num_warps):
        """The producer's copy layout: eight threads a 128-byte row piece, four rows a warp instruction."""
        return gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])

    @gluon.jit
    def _pair_entries(idx_row, blk, hi, BN: gl.constexpr, PW: gl.constexpr):
        """Block blk's entries (-1 past hi) in the copies' row layout (latent and RoPE share it)."""
        return _idx(idx_row, blk * BN, hi, BN, gl.SliceLayout(1, _copy_l(PW)))

    @gluon.jit
    def _pair_gather(ix, num_slots, kv_ptr, lat_s, rope_s, bar, bar_b, stride_kv: gl.constexpr, RIGHT: gl.constexpr,
                     PW: gl.constexpr, GATHER: gl.constexpr, FQ: gl.constexpr):
        """cp.async of one half of a block's rows into its stage (left: latent columns 0..255; right: 256..511 and
        the RoPE columns), then this thread's no-increment arrive on `bar`. FQ 1: the half in two parts, columns
        c0..c0 + 127 then the rest, each followed by an arrive, on `bar` then `bar_b` (an arrive fires once all of
        the thread's earlier copies landed, so bar_b's phase covers the whole half). GATHER 0 (timing builds): the
        arrives alone."""
        L: gl.constexpr = _copy_l(PW)
        c0: gl.constexpr = 256 if RIGHT else 0
        if GATHER:
            valid = (ix >= 0) & (ix < num_slots)
            row = kv_ptr + gl.where(valid, ix, 0).to(gl.int64) * stride_kv
            if FQ:
                cols = gl.arange(0, 128, gl.SliceLayout(0, L))
                async_copy.async_copy_global_to_shared(lat_s.slice(c0, 128, dim=1),
                                                       (row + c0)[:, None] + cols[None, :], mask=valid[:, None])
                async_copy.mbarrier_arrive(bar, increment_count=False)
                async_copy.async_copy_global_to_shared(lat_s.slice(c0 + 128, 128, dim=1),
                                                       (row + c0 + 128)[:, None] + cols[None, :],
                                                       mask=valid[:, None])
            else:
                cols = gl.arange(0, 256, gl.SliceLayout(0, L))
                async_copy.async_copy_global_to_shared(lat_s.slice(c0, 256, dim=1),
                                                       (row + c0)[:, None] + cols[None, :], mask=valid[:, None])
            if RIGHT:
                rc = gl.arange(0, 64, gl.SliceLayout(0, L))
                async_copy.async_copy_global_to_shared(rope_s, (row + 512)[:, None] + rc[None, :],
                                                       mask=valid[:, None])
        elif FQ:
            async_copy.mbarrier_arrive(bar, increment_count=False)
        if FQ:
            async_copy.mbarrier_arrive(bar_b, increment_count=False)
        else:
            async_copy.mbarrier_arrive(bar, increment_count=False)

    @gluon.jit
    def _full(bar, k: gl.constexpr, part: gl.constexpr, FQ: gl.constexpr):
        """Stage k's full mbarrier of a half (FQ 0: one a half) or of its part 0 / 1 (FQ 1: two a half, bar holding
        [2 stages x 2 parts]). Part 1's phase covers the whole half (_pair_gather)."""
        if FQ:
            return bar.index(2 * k + part)
        else:
            return bar.index(k)

    @gluon.jit
    def _probe_reads(stage, acc, BN: gl.constexpr, PW: gl.constexpr):
        """Probe builds (PROFILE bit 4, session 72): every 16-bit word of a stage's latent part ([BN, 512], 64 KB at
        BN 64) read from shared memory once more, 8 x 128 at a time, folded into acc by XOR (kept live by a store
        that never runs): shared-memory traffic added without products or copies."""
        PL: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [PW, 1], [1, 0])
        words = stage._reinterpret(gl.int16, [BN, 512], stage.layout)
        for r0 in gl.static_range(0, BN, 8):  # (8 rows: a slice may not split the 128-byte swizzle's 8-row period)
            for c0 in gl.static_range(0, 512, 128):  # (8 x 128 tiles: one 16-byte load a thread, 4 + 4 registers)
                acc = acc ^ words.slice(r0, 8, dim=0).slice(c0, 128, dim=1).load(PL)
        return acc

    @gluon.jit
    def _pair_refill(ix, num_slots, kv_ptr, lat, rope, full, free, k: gl.constexpr, RIGHT: gl.constexpr, ph,
                     stride_kv: gl.constexpr, PW: gl.constexpr, GATHER: gl.constexpr, FQ: gl.constexpr, has=None):
        """One half (RIGHT or left) of stage k refilled with the rows of entries ix once its readers released it.
        has (config odd): False where the block is past the list, and then the arrives alone, nothing copied."""
        mbarrier.wait(free.index(k), ph)
        if has is None:
            _pair_gather(ix, num_slots, kv_ptr, lat.index(k), rope.index(k), _full(full, k, 0, FQ),
                         _full(full, k, 1, FQ), stride_kv, RIGHT, PW, GATHER, FQ)
        elif has:
            _pair_gather(ix, num_slots, kv_ptr, lat.index(k), rope.index(k), _full(full, k, 0, FQ),
                         _full(full, k, 1, FQ), stride_kv, RIGHT, PW, GATHER, FQ)
        else:
            _pair_gather(ix, num_slots, kv_ptr, lat.index(k), rope.index(k), _full(full, k, 0, FQ),
                         _full(full, k, 1, FQ), stride_kv, RIGHT, PW, 0, FQ)

    @gluon.jit
    def _pair_producer(idx_row, hi, num_slots, kv_ptr, lat, rope, full_l, full_r, free_l, free_r,
                       stride_kv: gl.constexpr, BN: gl.constexpr, PROFILE: gl.constexpr, PW: gl.constexpr,
                       FQ: gl.constexpr, ODD: gl.constexpr = 0):
        """The producer: each step's four halves in the order L(0), R(0), R(1), L(1) (session 76 measured two others,
        notes/sparse_mla.md: the wait moves, the step stays); the entries of the next half loaded while it waits for
        the half's release (reloaded rather than held: held, they spilled).
        PROFILE bit 4 (probe builds; outputs unchanged): after issuing a step's last half it reads both stages' latent
        parts once more (_probe_reads: 64 KB a block of shared-memory reads on top of the kernel's ~293 KB). There,
        the next half it waits for is the next step's L(0), released only after that step's S, softmax and first
        P V (~2500 clocks by arithmetic, not measured), while the reads take >= 1024; placed after R(1) (session 72's
        form, not run) they would have held back L(1)'s refill, released at about R(1)'s time, so a slower probe would
        not have said which it was.
        ODD 1 (PrefillConfig.odd): a last step's second block past the list (an odd block count) is not copied, its
        halves' arrives alone (no consumer reads them)."""
        GATHER: gl.constexpr = (PROFILE & 1) == 0
        PROBE: gl.constexpr = (PROFILE & 4) != 0
        PL: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [PW, 1], [1, 0])
        probe = gl.zeros([8, 128], gl.int16, PL)
        nblocks = gl.cdiv(hi, BN)
        ix = _pair_entries(idx_row, 0, hi, BN, PW)
        for j in range(gl.cdiv(nblocks, 2)):
            ph = (j & 1) ^ 1  # use j of each half: the consumers released use j - 1 (fresh: phase 1 complete)
            _pair_refill(ix, num_slots, kv_ptr, lat, rope, full_l, free_l, 0, False, ph, stride_kv, PW, GATHER, FQ)
            ix = _pair_entries(idx_row, 2 * j, hi, BN, PW)
            _pair_refill(ix, num_slots, kv_ptr, lat, rope, full_r, free_r, 0, True, ph, stride_kv, PW, GATHER, FQ)
            ix = _pair_entries(idx_row, 2 * j + 1, hi, BN, PW)
            if ODD:
                has1 = 2 * j + 1 < nblocks
                _pair_refill(ix, num_slots, kv_ptr, lat, rope, full_r, free_r, 1, True, ph, stride_kv, PW, GATHER,
                             FQ, has1)
                ix = _pair_entries(idx_row, 2 * j + 1, hi, BN, PW)
                _pair_refill(ix, num_slots, kv_ptr, lat, rope, full_l, free_l, 1, False, ph, stride_kv, PW, GATHER,
                             FQ, has1)
            else:
                _pair_refill(ix, num_slots, kv_ptr, lat, rope, full_r, free_r, 1, True, ph, stride_kv, PW, GATHER, FQ)
                ix = _pair_entries(idx_row, 2 * j + 1, hi, BN, PW)
                _pair_refill(ix, num_slots, kv_ptr, lat, rope, full_l, free_l, 1, False, ph, stride_kv, PW, GATHER, FQ)
            if PROBE:
                probe = _probe_reads(lat.index(0), probe, BN, PW)
                probe = _probe_reads(lat.index(1), probe, BN, PW)
            ix = _pair_entries(idx_row, 2 * j + 2, hi, BN, PW)
        async_copy.wait_group(0)
        if PROBE:  # hi >= 0 always: never stored, but the reads stay live
            pr = gl.arange(0, 8, gl.SliceLayout(1, PL))[:, None] * stride_kv
            pc = gl.arange(0, 128, gl.SliceLayout(0, PL))[None, :]
            gl.store(kv_ptr + pr + pc, probe.to(gl.bfloat16, bitcast=True), mask=(pr + pc) < 0 - hi)

    @gluon.jit
    def _release(bar, PREL: gl.constexpr):
        """A consumer warpgroup's release of a half it read (its products retired): PREL 0, a partition barrier and
        one thread's arrive (count 1); PREL 1, every thread's own arrive (count 128: a cp.async arrive with no copies
        pending, which lands at once), no partition barrier: the half is free once all four warps passed their
        wgmma wait."""
        if PREL:
            async_copy.mbarrier_arrive(bar, increment_count=False)
        else:
            gl.thread_barrier()
            mbarrier.arrive(bar, count=1)

    @gluon.jit
    def _pair_hand_back(hi, full_l, full_r, free_l, free_r, BN: gl.constexpr, H: gl.constexpr,
                        PREL: gl.constexpr, FQ: gl.constexpr):
        """Timing builds (PROFILE bit 1): each half handed back by its releasing warpgroup (0: the left halves, 1:
        the right ones) once it landed, no products."""
        nblocks = gl.cdiv(hi, BN)
        full = full_l if H == 0 else full_r
        free = free_l if H == 0 else free_r
        for i in range(gl.cdiv(nblocks, 2)):
            for k in gl.static_range(2):
                mbarrier.wait(_full(full, k, 1, FQ), i & 1)
                _release(free.index(k), PREL)

    @gluon.jit
    def _pair_load_q(q_ptr, stride_qt, stride_qh, t0, tok_end, h0, num_heads, q_smem, qr_smem, R0: gl.constexpr,
                     NR: gl.constexpr, HPT: gl.constexpr):
        """Rows [R0, R0 + NR) of q into shared memory: the latent part as fp16 into q_smem, the RoPE part x V_SCALE
        (bf16, exact) into qr_smem, so that the RoPE product lands in the converted rows' units. Zeros past T / H.
        (Session 78's qld, both parts' loads issued before either store: `dsattn bench ab` 1.003x, 95% CI
        0.989-1.016, at 32 heads s_q 1024 on an H100, bench/results/s78/; removed, code at 97549ba)"""
        Q_L: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [4, 1], [1, 0])
        r = R0 + gl.arange(0, NR, gl.SliceLayout(1, Q_L))
        qt = t0 + r // HPT
        qh = h0 + r % HPT
        q_row = q_ptr + qt.to(gl.int64) * stride_qt + qh * stride_qh
        q_ok = (qt < tok_end) & (qh < num_heads)
        qd = gl.arange(0, 512, gl.SliceLayout(0, Q_L))
        q_smem.slice(R0, NR, dim=0).store(gl.load(q_row[:, None] + qd[None, :], mask=q_ok[:, None],
                                                  other=0.0).to(gl.float16))
        qr = 512 + gl.arange(0, 64, gl.SliceLayout(0, Q_L))
        q_rope = gl.load(q_row[:, None] + qr[None, :], mask=q_ok[:, None], other=0.0)
        qr_smem.slice(R0, NR, dim=0).store((q_rope.to(gl.float32) * V_SCALE).to(gl.bfloat16))

    @gluon.jit
    def _mma(a, b, acc, SKIP: gl.constexpr):
        """acc + a b as an async wgmma; SKIP (timing builds, PROFILE bits 8 / 16): acc as it is."""
        if SKIP:
            return acc
        else:
            return warpgroup_mma(a, b, acc, is_async=True)

    @gluon.jit
    def _s_half(q3, qr3, lat_t, rope_t, s, RIGHT: gl.constexpr, i0, QREG: gl.constexpr = 0, NOS: gl.constexpr = 0):
        """S's product over one half of a stage (left: latent columns 0..255; right: 256..511 and the RoPE columns),
        accumulated into s, async. q's views are indexed by i0 (always 0: the wgmma descriptors are then formed
        where they are used, not hoisted out of the loop into registers, which spilled). QREG 1: qr3 is q's RoPE part
        already in registers (PrefillConfig.qreg); NOS 1 (timing builds): no products."""
        c0: gl.constexpr = 256 if RIGHT else 0
        s = _mma(q3.index(i0).slice(c0, 256, dim=1), lat_t.slice(c0, 256, dim=1).permute((1, 0)), s, NOS)
        if RIGHT:
            s = _mma(qr3 if QREG else qr3.index(i0), rope_t.permute((1, 0)), s, NOS)
        return s

    @gluon.jit
    def _s_wait_half(q3, qr3, lat_t, rope_t, s, full, k: gl.constexpr, ph, RIGHT: gl.constexpr, FQ: gl.constexpr,
                     i0, QREG: gl.constexpr, NOS: gl.constexpr):
        """Wait for one half of stage k (full: that side's full mbarriers), then S's product over it. FQ 1: the
        first 128 columns' product issued once part 0 landed, the rest after part 1."""
        c0: gl.constexpr = 256 if RIGHT else 0
        if FQ:
            mbarrier.wait(_full(full, k, 0, FQ), ph)
            fence_async_shared()
            s = _mma(q3.index(i0).slice(c0, 128, dim=1), lat_t.slice(c0, 128, dim=1).permute((1, 0)), s, NOS)
            mbarrier.wait(_full(full, k, 1, FQ), ph)
            fence_async_shared()
            s = _mma(q3.index(i0).slice(c0 + 128, 128, dim=1), lat_t.slice(c0 + 128, 128, dim=1).permute((1, 0)), s,
                     NOS)
            if RIGHT:
                s = _mma(qr3 if QREG else qr3.index(i0), rope_t.permute((1, 0)), s, NOS)
        else:
            mbarrier.wait(_full(full, k, 0, FQ), ph)
            fence_async_shared()
            s = _s_half(q3, qr3, lat_t, rope_t, s, RIGHT, i0, QREG, NOS)
        return s

    @gluon.jit
    def _s_stage1(q3, qra, latv, rope, s, full_l, full_r, ph, FQ: gl.constexpr, z0, z1, QREG: gl.constexpr,
                  NOS: gl.constexpr, stamp_ptr, sbase, i, rows0, STAMP: gl.constexpr):
        """Warpgroup 1's S of a step: over R(1) then L(1) as each lands, retired (stamps 8, 9 and 1)."""
        _stamp_landed(stamp_ptr, sbase, i, 8, rows0, _full(full_r, 1, 0, FQ), ph, STAMP)
        s = _s_wait_half(q3, qra, latv.index(z1), rope.index(z1), s, full_r, 1, ph, True, FQ, z0, QREG, NOS)
        _stamp_landed(stamp_ptr, sbase, i, 9, rows0, _full(full_l, 1, 0, FQ), ph, STAMP)
        s = _s_wait_half(q3, qra, latv.index(z1), rope.index(z1), s, full_l, 1, ph, False, FQ, z0, QREG, NOS)
        s = warpgroup_mma_wait(0, deps=(s,))
        _stamp(stamp_ptr, sbase, i, 1, rows0, STAMP)
        return s

    @gluon.jit
    def _stamp(stamp_ptr, base, i, k: gl.constexpr, rows, STAMP: gl.constexpr, EDGE: gl.constexpr = 0):
        """PROFILE bit 32: row 0's owner threads write %clock64 (k != 7) or the SM's id (k 7) into stamp k of step i
        (stamp_buffer; base: this program's and warpgroup's first stamp). EDGE 1: stamp k of the program's slot
        (the last one; i unused), %globaltimer where k >= 8."""
        if STAMP:
            if k == 7:
                t = gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [rows], dtype=gl.int32, is_pure=False,
                                              pack=1).to(gl.int64)
            elif EDGE and k >= 8:
                t = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [rows], dtype=gl.int64,
                                              is_pure=False, pack=1)
            else:
                t = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [rows], dtype=gl.int64,
                                              is_pure=False, pack=1)
            if EDGE:
                gl.store(stamp_ptr + base + (STAMP_STEPS - 1) * STAMP_POINTS + k + rows * 0, t, mask=rows == 0)
            else:
                gl.store(stamp_ptr + base + i * STAMP_POINTS + k + rows * 0, t,
                         mask=(rows == 0) & (i < STAMP_STEPS - 1))

    @gluon.jit
    def _stamp_landed(stamp_ptr, base, i, k: gl.constexpr, rows, bar, ph, STAMP: gl.constexpr):
        """PROFILE bit 32: wait for the half behind full mbarrier bar (_s_wait_half's next wait, which then passes at
        once) and stamp k."""
        if STAMP:
            mbarrier.wait(bar, ph)
            _stamp(stamp_ptr, base, i, k, rows, STAMP)

    @gluon.jit
    def _lazy_up(m_new, m_used, qk_scale, FOLD: gl.constexpr):
        """PrefillConfig.lazy: rows whose max in use must move to m_new (>= m_used): those where P against m_used
        could exceed 2^LAZY_LOG2 (scores in log2 units; FOLD: unscaled, so the gap is scaled first). A row still at
        -inf moves once it has a finite max (inf > bound); one with none stays (NaN compares false)."""
        if FOLD:
            return (m_new - m_used) * qk_scale > LAZY_LOG2
        else:
            return m_new - m_used > LAZY_LOG2

    @gluon.jit
    def _any_row(flags):
        """Whether any of a warpgroup's rows is set (a reduction across its four warps: one uniform branch)."""
        return gl.max(flags.to(gl.int32), 0) != 0

    @gluon.jit
    def _beta(mp, mc, qk_scale, FOLD: gl.constexpr):
        """2^(mp - mc) a row: warpgroup 0's P against the max mp into the common max mc (>= mp; LAZY 0: mp is m0);
        1 for a row with no valid entry yet (mp = -inf: its P, O and l are all 0)."""
        if FOLD:
            return gl.where(mp == NEG_INF, 1.0, gl.exp2((mp - gl.where(mc == NEG_INF, 0.0, mc)) * qk_scale))
        else:
            return gl.where(mp == NEG_INF, 1.0, gl.exp2(mp - gl.where(mc == NEG_INF, 0.0, mc)))

    @gluon.jit
    def _wg_pair(q_ptr, stride_qt, stride_qh, idx_row, mask_row, hi, t0, tok_end, h0, num_slots, num_heads,
                 qk_scale, out_ptr, stride_ot, stride_oh, lse_ptr, stride_lt, stride_lh,
                 q3, qr3, lat, rope, p1, x_smem, full_l, full_r, free_l, free_r, xbar, pbar, qbar,
                 GROUPED: gl.constexpr, HPT: gl.constexpr, BN: gl.constexpr, H: gl.constexpr,
                 PROFILE: gl.constexpr, SFOLD: gl.constexpr, PREL: gl.constexpr, FQ: gl.constexpr,
                 QREG: gl.constexpr, LAZY: gl.constexpr, VST: gl.constexpr, stamp_ptr, ODD: gl.constexpr = 0):
        """Consumer warpgroup H of two (module docstring). lat / rope: the stages as copied (bf16-typed; the latent
        part holds fp16 bits, read through an fp16 view); P (fp16) of warpgroup 0 goes into stage 0's RoPE tile,
        of warpgroup 1 into p1."""
        MMA_S: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, BN, 16])
        MMA_O: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, 256, 16])
        ROW_S: gl.constexpr = gl.SliceLayout(1, MMA_S)
        COL_S: gl.constexpr = gl.SliceLayout(0, MMA_S)
        ROW_O: gl.constexpr = gl.SliceLayout(1, MMA_O)
        P_L: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA_O, k_width=2)
        STAMP: gl.constexpr = (PROFILE & 32) != 0  # clock stamps (stamp_buffer)
        rows0 = gl.arange(0, ROWS, ROW_S)
        sbase = ((gl.program_id(0) * gl.num_programs(1) + gl.program_id(1)) * 2 + H).to(gl.int64) * (
            STAMP_STEPS * STAMP_POINTS)
        _stamp(stamp_ptr, sbase, 0, 0, rows0, STAMP, 1)  # the program's entry (stamp_buffer)
        _stamp(stamp_ptr, sbase, 0, 8, rows0, STAMP, 1)
        # each warpgroup stores half of q's rows, then waits for the other's
        _pair_load_q(q_ptr, stride_qt, stride_qh, t0, tok_end, h0, num_heads, q3.index(0), qr3.index(0),
                     H * (ROWS // 2), ROWS // 2, HPT)
        fence_async_shared()
        gl.thread_barrier()
        mbarrier.arrive(qbar, count=1)
        mbarrier.wait(qbar, 0)
        if QREG:  # q's RoPE part as S's register operand (16 registers a thread): 8 KB fewer shared reads an S
            qra = qr3.index(0).load(gl.DotOperandLayout(operand_index=0, parent=MMA_S, k_width=2))
        else:
            qra = qr3
        if PROFILE & 2:
            _pair_hand_back(hi, full_l, full_r, free_l, free_r, BN, H, PREL, FQ)
            hi = 0
        NOS: gl.constexpr = (PROFILE & 8) != 0  # timing builds: no S products (S = 0) ...
        NOPV: gl.constexpr = (PROFILE & 16) != 0  # ... no P V products; every wait, hand-off and release stays
        _stamp(stamp_ptr, sbase, 0, 1, rows0, STAMP, 1)  # q stored by both warpgroups
        qk_scale = qk_scale * 256.0  # S in the rows' 2^-8 units
        # SFOLD 1: S stays unscaled and the maxima with it (qk_scale > 0 keeps their order); P = 2^(S c - m c), one
        # FFMA an element in place of S c (FMUL) and S c - m (FADD)
        FOLD: gl.constexpr = SFOLD == 1
        latv = lat._reinterpret(gl.float16, [2, BN, 512], gl.NVMMASharedLayout.get_default_for([BN, 512], gl.float16))
        ropep = rope._reinterpret(gl.float16, [2, BN, 64], gl.NVMMASharedLayout.get_default_for([BN, 64], gl.float16))
        tok_of_row = (gl.arange(0, ROWS, ROW_S) // HPT)[:, None]
        m_i = gl.full([ROWS], NEG_INF, gl.float32, ROW_S)
        l_i = gl.zeros([ROWS], gl.float32, ROW_S)
        acc = gl.zeros([ROWS, 256], gl.float32, MMA_O)  # each step's products are retired in the step
        nblocks = gl.cdiv(hi, BN)
        for i in range(gl.cdiv(nblocks, 2)):
            b = 2 * i + H
            ph = i & 1
            _stamp(stamp_ptr, sbase, i, 0, rows0, STAMP)
            if i == 0:
                _stamp(stamp_ptr, sbase, i, 7, rows0, STAMP)
            # the stages' and p1's views are indexed by z0 / z1 (always 0 / 1), against ptxas hoisting every wgmma
            # descriptor of a loop-invariant address out of the loop into registers
            z0 = b >> 30
            z1 = z0 + 1
            # validity: grouped, a union entry is a valid slot and its bits say which tokens listed it (0 past hi,
            # so a missing block scores -inf everywhere); else the token's own entries (-1 past hi)
            j = b * BN + gl.arange(0, BN, COL_S)
            has1 = 2 * i + 1 < nblocks  # (ODD only) block 2 i + 1 in the list: False at an odd count's last step
            if GROUPED:
                bits = gl.load(mask_row + j, mask=j < hi, other=0)
            else:
                ix = gl.load(idx_row + j, mask=j < hi, other=-1)
            s = gl.zeros([ROWS, BN], gl.float32, MMA_S)
            if H == 0:
                _stamp_landed(stamp_ptr, sbase, i, 8, rows0, _full(full_l, 0, 0, FQ), ph, STAMP)
                s = _s_wait_half(q3, qra, latv.index(z0), rope.index(z0), s, full_l, 0, ph, False, FQ, z0, QREG, NOS)
                _stamp_landed(stamp_ptr, sbase, i, 9, rows0, _full(full_r, 0, 0, FQ), ph, STAMP)
                s = _s_wait_half(q3, qra, latv.index(z0), rope.index(z0), s, full_r, 0, ph, True, FQ, z0, QREG, NOS)
                s = warpgroup_mma_wait(0, deps=(s,))
                _stamp(stamp_ptr, sbase, i, 1, rows0, STAMP)
            elif ODD:
                if has1:
                    s = _s_stage1(q3, qra, latv, rope, s, full_l, full_r, ph, FQ, z0, z1, QREG, NOS, stamp_ptr, sbase,
                                  i, rows0, STAMP)
                else:  # block 2 i + 1 past the list: nothing copied, S stays 0 (masked to -inf below). R(1)'s
                    #        copy-less arrive is still waited for: released before the producer's wait for that
                    #        release, the half's free parity would never come (tests/test_prefill_protocol.py)
                    mbarrier.wait(_full(full_r, 1, 1, FQ), ph)
                    _stamp(stamp_ptr, sbase, i, 1, rows0, STAMP)
            else:
                s = _s_stage1(q3, qra, latv, rope, s, full_l, full_r, ph, FQ, z0, z1, QREG, NOS, stamp_ptr, sbase, i,
                              rows0, STAMP)
            if GROUPED:
                valid = ((bits[None, :] >> tok_of_row) & 1) != 0
            else:
                valid = ((ix >= 0) & (ix < num_slots))[None, :]
            if FOLD:
                s = gl.where(valid, s, NEG_INF)
            else:
                s = gl.where(valid, s * qk_scale, NEG_INF)
            if H == 0:
                m0 = gl.maximum(m_i, gl.max(s, 1))
                if LAZY:  # P against the max in use unless this block rose more than 2^8 above it (_lazy_up)
                    up = _lazy_up(m0, m_i, qk_scale, FOLD)
                    mp = gl.where(up, m0, m_i)
                else:
                    mp = m0
                # x_smem[0] of step i - 1 was read by warpgroup 1 before its xbar[1] arrive, waited for below
                x_smem.index(0).store(mp)
                gl.thread_barrier()
                mbarrier.arrive(xbar.index(0), count=1)
                m0u = gl.where(mp == NEG_INF, 0.0, mp)
                if FOLD:
                    alpha = gl.exp2((m_i - m0u) * qk_scale)
                    p = gl.exp2(gl.fma(s, qk_scale, -(m0u * qk_scale)[:, None]))
                else:
                    alpha = gl.exp2(m_i - m0u)
                    p = gl.exp2(s - m0u[:, None])
                l_i = l_i * alpha + gl.sum(p, 1)
                if LAZY:
                    if _any_row(up & (m_i != NEG_INF)):  # (a row at -inf until now has O = 0)
                        acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
                else:
                    acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
                acc = _mma(gl.convert_layout(p.to(gl.float16), P_L), latv.index(z0).slice(0, 256, dim=1), acc, NOPV)
                mbarrier.wait(xbar.index(1), ph)
                mc = x_smem.index(1).load(ROW_S)
                _stamp(stamp_ptr, sbase, i, 2, rows0, STAMP)
                beta = _beta(mp, mc, qk_scale, FOLD)
                # S(2 i) retired: stage 0's RoPE tile is dead until warpgroup 1 releases R(0)
                ropep.index(z0).store((p * beta[:, None]).to(gl.float16))
                fence_async_shared()
                gl.thread_barrier()
                mbarrier.arrive(pbar.index(0), count=1)
                _stamp(stamp_ptr, sbase, i, 3, rows0, STAMP)
                acc = warpgroup_mma_wait(0, deps=(acc,))
                _release(free_l.index(0), PREL)  # L(0): S and this P V retired
                _stamp(stamp_ptr, sbase, i, 4, rows0, STAMP)
                if LAZY:
                    if _any_row((mc != mp) & (mp != NEG_INF)):
                        acc = acc * gl.convert_layout(beta, ROW_O)[:, None]
                else:
                    acc = acc * gl.convert_layout(beta, ROW_O)[:, None]
                l_i = l_i * beta
                m_i = mc
                mbarrier.wait(pbar.index(1), ph)
                mbarrier.wait(_full(full_l, 1, 1, FQ), ph)  # landed before warpgroup 1's S; the fence is this one's
                fence_async_shared()
                if ODD:
                    if has1:
                        acc1 = _mma(p1.index(z0), latv.index(z1).slice(0, 256, dim=1), acc, NOPV)
                        _stamp(stamp_ptr, sbase, i, 5, rows0, STAMP)
                        acc1 = warpgroup_mma_wait(0, deps=(acc1,))
                    else:  # warpgroup 1's P is 0 (its block past the list): no product
                        _stamp(stamp_ptr, sbase, i, 5, rows0, STAMP)
                        acc1 = acc
                    acc = acc1
                else:
                    acc = _mma(p1.index(z0), latv.index(z1).slice(0, 256, dim=1), acc, NOPV)
                    _stamp(stamp_ptr, sbase, i, 5, rows0, STAMP)
                    acc = warpgroup_mma_wait(0, deps=(acc,))
                _release(free_l.index(1), PREL)  # L(1): warpgroup 1's S and this P V retired
                _stamp(stamp_ptr, sbase, i, 6, rows0, STAMP)
            else:
                mx = gl.max(s, 1)
                mbarrier.wait(xbar.index(0), ph)
                mp = x_smem.index(0).load(ROW_S)  # warpgroup 0's max: max(m_i, its rows') (LAZY 1: the one in use)
                mc = gl.maximum(mp, mx)
                if LAZY:  # ... which moves again only where these rows rose more than 2^8 above it
                    mc = gl.where(_lazy_up(mc, mp, qk_scale, FOLD), mc, mp)
                x_smem.index(1).store(mc)
                gl.thread_barrier()
                mbarrier.arrive(xbar.index(1), count=1)
                _stamp(stamp_ptr, sbase, i, 2, rows0, STAMP)
                mcu = gl.where(mc == NEG_INF, 0.0, mc)
                if FOLD:
                    alpha = gl.exp2((m_i - mcu) * qk_scale)
                    p = gl.exp2(gl.fma(s, qk_scale, -(mcu * qk_scale)[:, None]))
                else:
                    alpha = gl.exp2(m_i - mcu)
                    p = gl.exp2(s - mcu[:, None])
                if LAZY:
                    if _any_row((mc != m_i) & (m_i != NEG_INF)):
                        acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
                else:
                    acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
                l_i = l_i * alpha + gl.sum(p, 1)
                m_i = mc
                pb = p.to(gl.float16)
                # p1 of step i - 1 was read by warpgroup 0's P V, retired before its xbar[0] arrive
                p1.index(z0).store(pb)
                fence_async_shared()
                gl.thread_barrier()
                mbarrier.arrive(pbar.index(1), count=1)
                _stamp(stamp_ptr, sbase, i, 3, rows0, STAMP)
                # the other P V first, so that R(0) is released one P V earlier
                mbarrier.wait(pbar.index(0), ph)
                mbarrier.wait(_full(full_r, 0, 1, FQ), ph)
                fence_async_shared()
                acc = _mma(ropep.index(z0), latv.index(z0).slice(256, 256, dim=1), acc, NOPV)
                _stamp(stamp_ptr, sbase, i, 4, rows0, STAMP)
                if ODD:
                    if has1:
                        acc1 = warpgroup_mma_wait(1, deps=(_mma(gl.convert_layout(pb, P_L),
                                                                 latv.index(z1).slice(256, 256, dim=1), acc, NOPV),))
                    else:  # its P is 0 (its block past the list): no product of its own
                        acc1 = warpgroup_mma_wait(0, deps=(acc,))
                    acc = acc1
                else:
                    acc = _mma(gl.convert_layout(pb, P_L), latv.index(z1).slice(256, 256, dim=1), acc, NOPV)
                    acc = warpgroup_mma_wait(1, deps=(acc,))
                _release(free_r.index(0), PREL)  # R(0): warpgroup 0's S and P, the other P V retired
                _stamp(stamp_ptr, sbase, i, 5, rows0, STAMP)
                acc = warpgroup_mma_wait(0, deps=(acc,))
                _release(free_r.index(1), PREL)  # R(1): its S and its own P V retired
                _stamp(stamp_ptr, sbase, i, 6, rows0, STAMP)

        # l = l_0 + l_1 (the same order in both), 1 / l, this half of O; warpgroup 0 stores lse
        npairs = gl.cdiv(nblocks, 2)
        x_smem.index(2 + H).store(l_i)
        gl.thread_barrier()
        mbarrier.arrive(xbar.index(H), count=1)
        mbarrier.wait(xbar.index(1 - H), npairs & 1)
        l_o = x_smem.index(3 - H).load(ROW_S)
        if H == 0:
            l_i = l_i + l_o
        else:
            l_i = l_o + l_i
        empty = l_i == 0.0
        inv_l = 256.0 / gl.where(empty, 1.0, l_i)
        if VST:  # PrefillConfig.vst: through this warpgroup's stage (both warpgroups and the producer are done with it)
            _store_rows_tile(acc * gl.convert_layout(inv_l, ROW_O)[:, None], lat.index(H), t0, tok_end, h0, num_heads,
                             out_ptr, stride_ot, stride_oh, H * 256, HPT)
        else:
            _store_rows(acc * gl.convert_layout(inv_l, ROW_O)[:, None], t0, tok_end, h0, num_heads, out_ptr,
                        stride_ot, stride_oh, H * 256, HPT)
        if H == 0:
            if FOLD:
                m_i = m_i * qk_scale
            lse = gl.where(empty, NEG_INF, (m_i + gl.log2(gl.where(empty, 1.0, l_i))) * LN2)
            rl = gl.arange(0, ROWS, ROW_S)
            lt = t0 + rl // HPT
            lh = h0 + rl % HPT
            gl.store(lse_ptr + lt.to(gl.int64) * stride_lt + lh * stride_lh, lse,
                     mask=(lt < tok_end) & (lh < num_heads))
        _stamp(stamp_ptr, sbase, 0, 2, rows0, STAMP, 1)  # this warpgroup's stores issued
        _stamp(stamp_ptr, sbase, 0, 9, rows0, STAMP, 1)

    @gluon.jit(do_not_specialize=["num_slots", "num_heads", "topk", "token0", "tok_end", "stride_os", "stride_ls",
                                  "splits"])
    def pair_prefill_kernel(
            q_ptr, stride_qt, stride_qh, kv_ptr,
            idx_ptr, stride_it, end_ptr, mask_ptr,
            out_ptr, stride_ot, stride_oh, lse_ptr, stride_lt, stride_lh, stride_os, stride_ls, splits,
            num_slots, num_heads, topk, token0, tok_end, qk_scale,
            stride_kv: gl.constexpr, HAS_LEN: gl.constexpr, G: gl.constexpr, HPT: gl.constexpr,
            PROFILE: gl.constexpr, V_REGS: gl.constexpr, PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
            num_warps: gl.constexpr, SPLIT: gl.constexpr = 0, SFOLD: gl.constexpr = 0, PREL: gl.constexpr = 0,
            FQ: gl.constexpr = 0, QREG: gl.constexpr = 0, LAZY: gl.constexpr = 0, VST: gl.constexpr = 0,
            stamp_ptr=None, ODD: gl.constexpr = 0):
        """gluon_prefill.sparse_mla_prefill_kernel's grid and arguments (its docstring), D_qk 576, over converted
        rows (config pre16), with the pair schedule (module docstring)."""
        gl.static_assert(G * HPT == 64, "64 rows a program")
        BN: gl.constexpr = 64
        GROUPED: gl.constexpr = G > 1
        t0, h0, hi, idx_row, mask_row, out_ptr, lse_ptr = _work_item(
            idx_ptr, stride_it, end_ptr, mask_ptr, out_ptr, lse_ptr, stride_os, stride_ls, splits, num_heads, topk,
            token0, G, HPT, BN, HAS_LEN, SPLIT)
        LAT_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, 512], gl.bfloat16)
        ROPE_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, 64], gl.bfloat16)
        # q and p1 as [1, ...] views that _wg_pair indexes by a value the compiler cannot prove zero (_s_half)
        q3 = gl.allocate_shared_memory(gl.float16, [1, ROWS, 512],
                                       gl.NVMMASharedLayout.get_default_for([ROWS, 512], gl.float16))
        qr3 = gl.allocate_shared_memory(gl.bfloat16, [1, ROWS, 64], ROPE_S)
        lat = gl.allocate_shared_memory(gl.bfloat16, [2, BN, 512], LAT_S)
        rope = gl.allocate_shared_memory(gl.bfloat16, [2, BN, 64], ROPE_S)
        p1 = gl.allocate_shared_memory(gl.float16, [1, ROWS, BN],
                                       gl.NVMMASharedLayout.get_default_for([ROWS, BN], gl.float16))
        x_smem = gl.allocate_shared_memory(gl.float32, [4, ROWS], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        # each half's full mbarrier takes one cp.async arrive a producer thread; its free one, one releasing
        # warpgroup
        NF: gl.constexpr = 4 if FQ else 2  # FQ 1: two parts a half (_full)
        full_l = gl.allocate_shared_memory(gl.int64, [NF, 1], mbarrier.MBarrierLayout())
        full_r = gl.allocate_shared_memory(gl.int64, [NF, 1], mbarrier.MBarrierLayout())
        free_l = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        free_r = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        xbar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        pbar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        qbar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        for k in gl.static_range(2):
            mbarrier.init(full_l.index(k), count=PRODUCER_WARPS * 32)
            mbarrier.init(full_r.index(k), count=PRODUCER_WARPS * 32)
            if FQ:
                mbarrier.init(full_l.index(k + 2), count=PRODUCER_WARPS * 32)
                mbarrier.init(full_r.index(k + 2), count=PRODUCER_WARPS * 32)
            mbarrier.init(free_l.index(k), count=128 if PREL else 1)  # (_release)
            mbarrier.init(free_r.index(k), count=128 if PREL else 1)
            mbarrier.init(xbar.index(k), count=1)
            mbarrier.init(pbar.index(k), count=1)
        mbarrier.init(qbar, count=2)  # both warpgroups' halves of q stored
        # warpgroup 1's role in the default partition, warpgroup 0's (more live values a step) in the worker, which
        # setmaxnreg gives pair_regs
        gl.warp_specialize([
            (_wg_pair, (q_ptr, stride_qt, stride_qh, idx_row, mask_row, hi, t0, tok_end, h0, num_slots, num_heads,
                        qk_scale, out_ptr, stride_ot, stride_oh, lse_ptr, stride_lt, stride_lh,
                        q3, qr3, lat, rope, p1, x_smem, full_l, full_r, free_l, free_r, xbar, pbar, qbar,
                        GROUPED, HPT, BN, 1, PROFILE, SFOLD, PREL, FQ, QREG, LAZY, VST, stamp_ptr, ODD)),
            (_wg_pair, (q_ptr, stride_qt, stride_qh, idx_row, mask_row, hi, t0, tok_end, h0, num_slots, num_heads,
                        qk_scale, out_ptr, stride_ot, stride_oh, lse_ptr, stride_lt, stride_lh,
                        q3, qr3, lat, rope, p1, x_smem, full_l, full_r, free_l, free_r, xbar, pbar, qbar,
                        GROUPED, HPT, BN, 0, PROFILE, SFOLD, PREL, FQ, QREG, LAZY, VST, stamp_ptr, ODD)),
            (_pair_producer, (idx_row, hi, num_slots, kv_ptr, lat, rope, full_l, full_r, free_l, free_r, stride_kv,
                              BN, PROFILE, PRODUCER_WARPS, FQ, ODD)),
        ], [4, PRODUCER_WARPS], [V_REGS, PRODUCER_REGS])
