"""The dense union-list path's map built in SHARED memory (grouping IMPL "dense_smem", and "auto", the default, since
session 18: written in session 17 without a GPU, measured on the H200 in session 18, below).

The dense path (grouping.py) keeps each group's map of token bits over the slot range in masks[c, :D] and builds it
with one global atomic OR per valid (token, entry) pair: s_q x topk REDs in all (2.1 M at s_q 1024, 16.8 M at 8192),
~30 us at s_q 1024 on the H200 whatever G (session 11, grouping_phases.py: about 40 REDs a clock; the clear pass
another ~1.4 us), so at s_q 8192 most of the 300-500 us that build_groups takes. Here one program builds one group's
map in its own shared memory instead: zero the map (D <= DENSE_WORDS words, 16 KiB at most), one shared-memory atomic
OR per valid pair (ATOMS.OR in the SASS: no L2 round trip), then the finished map and counts[c] (the valid pairs)
are written to masks[c, :D] / counts[c], exactly what grouping's clear + insert kernels leave there, so the
compaction and the repeated-slot rebuild that follow are unchanged. One launch replaces two.

Why inline PTX: Triton and Gluon have no shared-memory atomics (tl.histogram lowers to ballots and popcounts per bin,
which is why the histogram path lost in session 15), so the map is read and written by `st.shared` / `red.shared.or`
/ `ld.shared` at `global_smem + 4 w` (the kernel's dynamic shared memory, by name). A Gluon buffer of the map's size
(`res`) makes Triton size that memory: at least the map's bytes whatever offset it is given. Between the first store
and the last load of the map the kernel runs no Triton operation that uses shared memory (no reduction, no layout
conversion: the valid pairs are counted per thread and summed after), so nothing of Triton's shares those bytes;
barriers (bar.sync) separate the phases, and `res` is written only after a barrier that follows every read.

MEASURED (H200, session 18, tree 12a56fa; `python -m dsattn.ops.sparse_mla.grouping --bench --impl dense dense_smem
--s-q 1024 8192 --groups 8 4 2`, CUDA graph of 10 calls, bench/results/grouping_s18.txt): build_groups at s_q 1024
G 8 / 4 / 2 42.6 / 52.5 / 71.7 us (dense) -> 17.2 / 24.0 / 41.2 us, at s_q 8192 301 / 343 / 495 -> 100 / 160 / 296
us, every case matching the reference (and the edge cases); tests/gpu/test_grouping_gpu.py 11 passed. The prefill
(`dsattn bench ab`, bench/results/ab_s18_grouping_*.json, outputs bit-equal): 16 heads s_q 1024 0.466 -> 0.440 ms,
8192 3.101 -> 2.933 ms; 32 heads 0.690 -> 0.660, 4.836 -> 4.636 ms.

PREDICTION made before the run (session 17, arithmetic; the measurement is within it at s_q 1024 and at G 2, s_q
8192; at s_q 8192 G 8 came out faster than it, 100 us against 120-150, and G 4 slower, 160 against 120-150): the
program's work is its G x topk index loads (coalesced, 32 consecutive a warp, all issued before the atomics that use
them: one [GP, BK] tile at topk 2048 and G <= 4, two at G 8) and as many shared atomics (random words: ~2-4-way bank
conflicts), the map's zeroing and one write of it: bound by the index loads' bytes, s_q 8192 x 2048 x 4 B = 67 MB in
~20-30 us, s_q 1024 ~4-6 us (latency may set it there: one wave of programs), against the clear + insert's ~31 of 52
us at s_q 1024 (G 4). At s_q 8192 the split between the kernels was not measured; if the insert scales with its REDs
(8x, ~250 of the 347 us at G 4), build_groups there falls to ~120-150 us and the 16-head prefill at s_q 8192 from
~3.07 to ~2.85 ms (issue 3: 1.27-1.29x -> ~1.35x FlashMLA's 3.9-4.0).
Device run: bench/gpu_s18_grouping.sh (parts 1 and 2).
"""
from __future__ import annotations

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    HAVE_GLUON = True
except Exception:  # pragma: no cover - a Triton without Gluon
    HAVE_GLUON = False

MAP_WARPS = 8       # warps of a map program
MAP_TILE = 8192     # index entries a tile ([GP, BK], GP x BK of them): 32 a thread at 8 warps, 32 consecutive a warp

if HAVE_GLUON:
    @gluon.jit
    def _sts(off, val):
        """st.shared.b32 [global_smem + off], val (elementwise; the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a; mov.u32 a, global_smem; add.u32 a, a, $1; st.shared.b32 [a], $2; mov.u32 $0, 0; }",
            "=r,r,r", [off, val], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _reds_or(off, bit):
        """red.shared.or.b32 [global_smem + off], bit where bit != 0 (elementwise; the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a; .reg .pred p; setp.ne.u32 p, $2, 0; mov.u32 a, global_smem; add.u32 a, a, $1; "
            "@p red.shared.or.b32 [a], $2; mov.u32 $0, 0; }",
            "=r,r,r", [off, bit], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _lds(off):
        """ld.shared.b32 [global_smem + off] (elementwise; not pure, so it stays after the barrier before it)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a; mov.u32 a, global_smem; add.u32 a, a, $1; ld.shared.b32 $0, [a]; }",
            "=r,r", [off], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit(do_not_specialize=["num_slots", "token0", "ntokens", "K", "D"])
    def dense_map_smem_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, msk_ptr, msk_stride, cnt_ptr,
                              K, D, G: gl.constexpr, GP: gl.constexpr, SPW: gl.constexpr, LOG_SPW: gl.constexpr,
                              DW: gl.constexpr, KP: gl.constexpr, BK: gl.constexpr, HAS_LEN: gl.constexpr,
                              num_warps: gl.constexpr):
        """Program c (first group first): group c's dense map (grouping.dense_layout: word s // SPW, field s % SPW of
        GP bits, bit j for token j of the group) in shared memory from its G tokens' valid entries (0 <= slot <
        num_slots, i < topk_length), then masks[c, :D] = the map and counts[c] = the valid entries: what grouping's
        _dense_clear_kernel + _dense_insert_kernel leave. DW: the map's words rounded up to a power of 2; the G lists
        are read as [GP, BK] tiles (token, entry), KP / BK of them (KP: K rounded up to a power of 2), unrolled, so
        that their loads do not wait for one another's atomics."""
        c = gl.program_id(0)
        WL: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
        IL: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, num_warps], [1, 0])
        # sizes the kernel's dynamic shared memory (at least DW words); the map itself is used through global_smem
        res = gl.allocate_shared_memory(gl.int32, [DW], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        wi = gl.arange(0, DW, WL)
        _sts(wi * 4, gl.zeros([DW], gl.int32, WL))
        j = gl.arange(0, GP, gl.SliceLayout(1, IL))                  # the token within the group
        t = c * G + j
        tok = (j < G) & (t < ntokens)
        row = (token0 + t).to(gl.int64)
        n = gl.full([GP], K, gl.int32, gl.SliceLayout(1, IL))
        if HAS_LEN:
            n = gl.minimum(gl.load(len_ptr + row, mask=tok, other=0), K)
        n = gl.where(tok, n, 0)
        bitj = (1 << j)[:, None]
        gl.thread_barrier()
        listed = gl.zeros([GP, BK], gl.int32, IL)      # valid entries, per thread (summed after the map is read)
        for kb in gl.static_range(0, KP, BK):
            i = kb + gl.arange(0, BK, gl.SliceLayout(0, IL))
            ok = i[None, :] < n[:, None]
            slot = gl.load(idx_ptr + row[:, None] * idx_stride + i[None, :], mask=ok, other=-1)
            ok = ok & (slot >= 0) & (slot < num_slots)
            slot = gl.where(ok, slot, 0)
            _reds_or((slot >> LOG_SPW) * 4, gl.where(ok, bitj << ((slot & (SPW - 1)) * GP), 0))
            listed += ok.to(gl.int32)
        gl.thread_barrier()
        w = _lds(wi * 4)
        gl.thread_barrier()                            # every word read before res (which may overlap it) is written
        res.store(w)
        gl.store(msk_ptr + c.to(gl.int64) * msk_stride + wi, w, mask=wi < D)
        gl.store(cnt_ptr + c, gl.sum(gl.sum(listed, 1), 0))


def usable(device) -> bool:
    """Whether the shared-memory map kernel can run on `device`: a CUDA device and Gluon (never under the
    interpreter, which runs no inline PTX)."""
    from .._triton import interpreting
    return HAVE_GLUON and device.type == "cuda" and not interpreting()


def launch_map(indices, topk_length, num_slots, G, token0, ntokens, masks, counts, groups, gp, spw, d, fast):
    """The map and counts of `groups` groups (grouping._launch_dense's first step under IMPL 'dense_smem')."""
    k = indices.shape[1]
    dw = 1 << max(0, (d - 1).bit_length())
    kp = 1 << max(0, (k - 1).bit_length())
    bk = min(kp, max(32 * MAP_WARPS, MAP_TILE // gp))
    fast(dense_map_smem_kernel, (groups,), indices, indices.stride(0),
         topk_length if topk_length is not None else indices, num_slots, token0, ntokens, masks, masks.stride(0),
         counts, k, d, G=G, GP=gp, SPW=spw, LOG_SPW=spw.bit_length() - 1, DW=dw, KP=max(kp, bk), BK=bk,
         HAS_LEN=topk_length is not None, num_warps=MAP_WARPS)
