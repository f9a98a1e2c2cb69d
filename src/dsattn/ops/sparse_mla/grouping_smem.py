"""The dense union-list path's map built in SHARED memory (grouping IMPL "dense_smem", the default from session 18 to
36: written in session 17 without a GPU, measured on the H200 in session 18, below), and since session 37 compacted
there too (IMPL "dense_fused", and "auto": the last section).

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

THE DEFAULT SINCE SESSION 37, grouping IMPL "dense_fused" (and "auto"): dense_union_smem_kernel builds the map as above
and then compacts it in the same program's shared memory, so the compaction kernel (grouping._dense_compact_kernel)
and the map's round trip through masks[c, :D] are gone. Why: at s_q 1024 the compaction took 10.4 / 17.8 / 34.5 us of
dense_smem's 17 / 23 / 41 at G 8 / 4 / 2 (252 of 298 at 8192, G 2; bench/logs/s37/call1/r/phases_slot.log), growing
with SPW (4 / 8 / 16 fields a word) for the same number of map words; Nsight Compute at G 2 (call 1,
r/ncu_compact_g2_slot.txt): L2 throughput 62%, 83% of the stalls on the scoreboard: each of its SPW field loops stores,
from the 32 lanes of a warp, entries spread over the same few lines that every other field loop also writes in part.
Here the program (8 warps, the words a [num_warps, DW / num_warps] tile with one warp a row, so that the prefix sums
and sums run within a warp by shuffles and no Triton operation uses shared memory) counts the occupied fields of each
word (the field bits folded onto the field's lowest bit, popc), takes an exclusive prefix sum within its warp's row,
adds the rows before it (per-warp totals through shared-memory words written and read by inline PTX), and writes
each occupied field's code (slot << GP | token bits) to its rank in a shared-memory array, field by field; after a
barrier it copies the n codes out to entries[c, :n] / masks[c, :n] with coalesced stores. The order is the
reference's (ascending slots), so the grouped prefill's outputs are bit-equal to dense_smem's. A token listing a
slot twice shows as the map's bits (popc over its words) short of the valid entries listed (per-thread counts summed
by redux.sync and one shared atomic add per warp): then counts[c] = -1 and nothing else is written, for grouping's
repeated-slot kernel. counts[c] is written before the barrier, and the copy loop's bound read back from a shared
word written beside it. Until session 80 the bound was counts[c] itself, read back through L2 (ld.global.cg); ~8%
of the stall samples at G 2, s_q 8192 waited on that round trip (Nsight Compute, H100). MEASURED (H100, session 80
call 2 at 3c34c35, bench/s80/run2.sh, bench/results/s80/; the grouping bench at G 2, old / new / old / new, every
case matching the reference): s_q 1024 11.5 / 10.2 / 11.9 / 10.2 us, s_q 8192 81.9 / 68.6 / 81.7 / 68.7 us.
Predicted 76-80 us at 8192: it gained more. The prefill call itself was not timed (arithmetic: ~13 of ~3100 us at
32 heads s_q 8192). GPU tests of the new kernel: 24 of test_grouping_gpu.py's fused-kernel tests (entry for
entry against the reference, past one chunk included) passed, none failed.
Shared memory: DW + 32 + OUTW words (OUTW = G x topk rounded up to a power of 2: 20.6 / 41.1 / 82.0 KB at G 2 / 4 / 8,
topk 2048, 16384 slots), exactly what the three buffers allocated to size it take (sm_90a compile: no other shared
memory, registers 40 / 99 / 128 at G 2 / 4 / 8, no spill: bench/grouping_smem_check.py --kernel union).
MEASURED (H200, session 37 call 2 at a602032, bench/gpu_s37.sh b, bench/logs/s37/call2/): the GPU tests
(tests/gpu/test_grouping_gpu.py, entry for entry against the reference, edge cases, the dense path's limits, 100
slots) 28 passed; build_groups (the grouping bench, CUDA graph of 10 calls) at s_q 1024 G 8 / 4 / 2 16.9 / 24.1 / 41.1
-> 12.5 / 11.1 / 13.3 us, at 8192 99 / 158 / 293 -> 81 / 82 / 88 us (the kernel itself 76-77 us there, the
repeated-slot kernel's 4096 early-returning programs 17 us at G 2); the prefill (`dsattn bench ab`, dense_smem against
dense_fused, outputs bit-equal, bench/results/ab_s37_fused_*.json) 8 / 16 / 32 heads s_q 1024 1.035x / 1.049x /
1.058x, s_q 8192 1.014x / 1.025x / 1.047x. PREDICTION made before the run (arithmetic): 41 -> ~8-12 us at G 2 s_q
1024 and 297 -> ~60-90 at 8192, the 32-head prefill ~5% faster; within it but for G 2 at 1024 (13.3).

MAPS PAST ONE CHUNK (session 46). The compaction held the whole map in registers ([num_warps, DW / num_warps], 16 words
a thread at DW 4096), which bounded the dense path at 16384 / 32768 / 65536 slots at G 8 / 4 / 2; past that the hash
path ran (session 45 on the prefill rows' inputs: the prefill at 0.64-0.79 of the dense path's speed). Now the program
walks its map CHUNK_WORDS (4096) words at a time: each chunk's occupied fields get their ranks from the per-warp scans
plus the totals of the chunk's warps before (two sets of totals words, alternate chunks, so one barrier a chunk) plus
the entries of the chunks before (a running count); the codes of a group with a repeated slot are written too (at most
the listed entries' number, within the code array) and then not copied out. One chunk is the old kernel. The map is
bound by shared memory (union_max_words: the map, TOT_WORDS and the codes within SMEM_BYTES; at most MAX_WORDS = 32768
words, 128 KiB): grouping.fused_max_slots, at topk 2048 G 8 / 4 / 2 / 16 131072 / 262144 / 524288 / 32768 slots.
sm_90a compile (bench/grouping_smem_check.py --kernel union, this CPU machine): G 8 at 16384 slots 128 registers as
before, 82176 B of shared memory (+128 B: the second set of totals); G 8 at 131072 / G 4 at 262144 / G 2 at 524288 /
G 16 at 32768 slots 128 / 99-106 / 75 / 201-255 registers, no spill, 196864 / 164096 / 147712 / 196864 B.
MEASURED (H200, bench/gpu_s46.sh a at 84cd1e4, bench/logs/s46/a/; the grouping bench, CUDA graph of 10 calls, overlap
indices; auto / hash us, s_q 1024 then 8192, every case matching the reference): 16384 slots G 8 / 4 / 2 10.5 / 120.6,
10.8 / 130.7, 12.6 / 200.1; 68.8 / 1116.5, 77.3 / 1089.8, 84.6 / 1434.8 (session 37's kernel: 12.5 / 11.1 / 13.3, 81 /
82 / 88); 65536 slots 18.3 / 134.6, 20.1 / 158.3, 27.4 / 323.2; 162.4 / 1269.3, 142.4 / 1330.5, 186.6 / 2289.2; 131072
28.4 / 142.7, 32.2 / 172.9, 45.8 / 371.6; 243.2 / 1327.6, 232.8 / 1418.0, 328.5 / 2572.9; 262144 (G 4 / 2) 63.6 / 185.7,
83.4 / 399.2; 513.8 / 1510.2, 631.2 / 2828.6; 524288 (G 2) 173.0 / 493.7, 1389.3 / 3368.3. So 2.4-12x the hash path's
speed wherever it reaches; its cost grows with the map's words (every chunk is scanned, and past 64 KiB of map one
program an SM). The prefill over such sources: README ("the prefill rows over a longer source") and
bench/results/sparse_mla_s46_prefill_kv*.json.

WARPS (session 47). Past one chunk a program is latency-bound (a barrier and dependent shared-memory loads a chunk,
~6700 clocks a 4096-word chunk at G 8 by session 46's numbers), and where its shared memory leaves no room for a second
program on an SM, one program of 8 warps hides little of it. union_warps gives those programs 16 warps (80-128
registers, no spill, bench/grouping_smem_check.py --kernel union); where two or more 8-warp programs share an SM, 16
warps were as fast or slower (why was not measured; at 80-99 registers fewer 16-warp programs fit an SM). Measured (H200, bench/gpu_s47.sh c and d, bench/logs/s47/): builds
16-48% faster where the rule takes 16 (union_warps' docstring has every case); the prefill, 8 heads, s_q 8192, overlap
indices, 65536 / 131072 slots 2.381 -> 2.350 / 2.662 -> 2.609 ms, outputs bit-equal
(bench/results/ab_s47_union_warps_kv*.json).
"""
from __future__ import annotations

import os

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    HAVE_GLUON = True
except Exception:  # pragma: no cover - a Triton without Gluon
    HAVE_GLUON = False

MAP_WARPS = 8       # warps of a map program
MAP_TILE = 8192     # index entries a tile ([GP, BK], GP x BK of them): 32 a thread at 8 warps, 32 consecutive a warp
CHUNK_WORDS = 4096  # map words the fused kernel compacts at a time (16 a thread at 8 warps: its registers before
                    # session 46, when the whole map was one chunk and DENSE_WORDS = 4096 bounded it)
TOT_WORDS = 64      # shared words for the fused kernel's two sets of per-warp totals, the listed count and the total
                    # (at 8 warps; 128 at 16: tot_words)
UNION_WARPS = 0     # warps of a fused (union) program: 0 by its shared memory (union_warps), else 8 or 16 for all;
                    # DSATTN_UNION_WARPS (read at each launch) overrides it, for `dsattn bench ab`
SM_SMEM_BYTES = 233472  # shared memory an sm_90 SM holds (228 KiB); each resident block also takes 1 KiB of it
MAX_WORDS = 32768   # the fused kernel's largest map: 128 KiB of shared memory (union_max_words)
SMEM_BYTES = 232448  # shared memory a block may take on sm_90 (227 KiB)

if HAVE_GLUON:
    from .._smem import add as _add, lds as _lds, sts as _sts, sts_if as _sts_if  # noqa: F401 (used in the kernels)

    @gluon.jit
    def _reds_or(off, bit):
        """red.shared.or.b32 [global_smem + off], bit where bit != 0 (elementwise; the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a; .reg .pred p; setp.ne.u32 p, $2, 0; mov.u32 a, global_smem; add.u32 a, a, $1; "
            "@p red.shared.or.b32 [a], $2; mov.u32 $0, 0; }",
            "=r,r,r", [off, bit], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _insert(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, G: gl.constexpr, GP: gl.constexpr,
                SPW: gl.constexpr, LOG_SPW: gl.constexpr, KP: gl.constexpr, BK: gl.constexpr, HAS_LEN: gl.constexpr,
                IL: gl.constexpr):
        """Group c's map (zeroed before) from its G tokens' valid entries (0 <= slot < num_slots, i < topk_length):
        a barrier, then one red.shared.or a valid entry, bit j of field slot % SPW of word slot // SPW. The lists are
        read as [GP, BK] tiles (token, entry) in layout IL, KP / BK of them (KP: K rounded up to a power of 2),
        unrolled, so that their loads do not wait for one another's atomics. Returns the valid entries counted per
        tile element ([GP, BK], IL)."""
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
        listed = gl.zeros([GP, BK], gl.int32, IL)
        for kb in gl.static_range(0, KP, BK):
            i = kb + gl.arange(0, BK, gl.SliceLayout(0, IL))
            ok = i[None, :] < n[:, None]
            slot = gl.load(idx_ptr + row[:, None] * idx_stride + i[None, :], mask=ok, other=-1)
            ok = ok & (slot >= 0) & (slot < num_slots)
            slot = gl.where(ok, slot, 0)
            _reds_or((slot >> LOG_SPW) * 4, gl.where(ok, bitj << ((slot & (SPW - 1)) * GP), 0))
            listed += ok.to(gl.int32)
        return listed

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
        listed = _insert(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, G, GP, SPW, LOG_SPW, KP, BK,
                         HAS_LEN, IL)                 # valid entries, per thread (summed after the map is read)
        gl.thread_barrier()
        w = _lds(wi * 4)
        gl.thread_barrier()                            # every word read before res (which may overlap it) is written
        res.store(w)
        gl.store(msk_ptr + c.to(gl.int64) * msk_stride + wi, w, mask=wi < D)
        gl.store(cnt_ptr + c, gl.sum(gl.sum(listed, 1), 0))


    @gluon.jit
    def _warp_add_smem(off, val):
        """red.shared.add.u32 [global_smem + off] of the warp's sum of val (redux.sync over the 32 lanes, added by
        lane 0; elementwise, every lane must take part; the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a, s, l; .reg .pred p; redux.sync.add.u32 s, $2, 0xffffffff; mov.u32 l, %laneid; "
            "setp.eq.u32 p, l, 0; mov.u32 a, global_smem; add.u32 a, a, $1; @p red.shared.add.u32 [a], s; "
            "mov.u32 $0, 0; }",
            "=r,r,r", [off, val], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit(do_not_specialize=["num_slots", "token0", "ntokens", "K", "D"])
    def dense_union_smem_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride,
                                msk_ptr, msk_stride, cnt_ptr, K, D, G: gl.constexpr, GP: gl.constexpr,
                                SPW: gl.constexpr, LOG_SPW: gl.constexpr, DW: gl.constexpr, CW: gl.constexpr,
                                KP: gl.constexpr, BK: gl.constexpr, OUTW: gl.constexpr, TW: gl.constexpr,
                                HAS_LEN: gl.constexpr, num_warps: gl.constexpr):
        """Program c (first group first): group c's union list in one program (grouping IMPL 'dense_fused'): the
        map built in shared memory as dense_map_smem_kernel builds it, then compacted there, ascending by slot, and
        written out whole: entries[c, :n], masks[c, :n], counts[c] = n; or counts[c] = -1 and nothing else
        written when a token listed a slot twice (the map holds fewer bits than the valid entries listed), for
        grouping's _group_union_dups_kernel. Shared memory (words from global_smem): the map [0, DW) (DW >= 32 x
        num_warps), two sets of per-warp totals, the listed count and the total [DW, DW + TW) (TW =
        tot_words(num_warps)), the compacted codes (slot << GP | token bits) [DW + TW, DW + TW + OUTW). The map's D
        words are compacted CW at a time (a chunk: a [num_warps, CW / num_warps] tile in registers, one warp a row),
        chunk after chunk, each chunk's entries after the previous chunks' (a running count), so the map may be
        larger than the registers hold (union_max_words). No Triton operation here uses shared memory (the scans and
        sums run within a warp; totals cross warps through the inline-PTX words, the two sets used by alternate chunks
        so that one barrier a chunk suffices), so the three buffers allocated below only size it."""
        c = gl.program_id(0)
        NW: gl.constexpr = num_warps
        R: gl.constexpr = CW // (32 * NW)
        RW: gl.constexpr = CW // NW
        TOT: gl.constexpr = DW                       # word offsets of the totals and of the codes
        OUT: gl.constexpr = DW + TW
        LISTED: gl.constexpr = TOT + 4 * NW
        TOTAL: gl.constexpr = LISTED + 1             # the count written out, for the copy loop's bound
        gl.static_assert(TOTAL < TOT + TW, "two sets of per-warp totals, the listed count and the total")
        FM: gl.constexpr = (1 << GP) - 1
        LOW: gl.constexpr = 0x55555555 if GP == 2 else 0x11111111 if GP == 4 else 0x01010101 if GP == 8 else 0x00010001
        L2: gl.constexpr = gl.BlockedLayout([1, R], [1, 32], [NW, 1], [1, 0])
        IL: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, NW], [1, 0])
        CL: gl.constexpr = gl.BlockedLayout([1], [32], [NW], [0])
        SL: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
        # size the kernel's dynamic shared memory (DW + TW + OUTW words); used through global_smem only
        res_map = gl.allocate_shared_memory(gl.int32, [DW], SL)
        res_tot = gl.allocate_shared_memory(gl.int32, [TW], SL)
        res_out = gl.allocate_shared_memory(gl.int32, [OUTW], SL)
        wk = gl.arange(0, NW, gl.SliceLayout(1, L2))
        wi = wk[:, None] * RW + gl.arange(0, RW, gl.SliceLayout(0, L2))[None, :]      # [NW, RW] word within a chunk
        chunks = (D + CW - 1) // CW
        for ch in range(chunks):
            _sts((ch * CW + wi) * 4, gl.zeros([NW, RW], gl.int32, L2))
        ci = gl.arange(0, 32 * NW, CL)
        _sts_if((TOT + ci) * 4, gl.zeros([32 * NW], gl.int32, CL), (ci < TW).to(gl.int32))
        listed = _insert(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, G, GP, SPW, LOG_SPW, KP, BK,
                         HAS_LEN, IL)
        _warp_add_smem(gl.full([BK], LISTED * 4, gl.int32, gl.SliceLayout(0, IL)), gl.sum(listed, 0))  # (in-thread)
        gl.thread_barrier()
        run = gl.zeros([NW], gl.int32, gl.SliceLayout(1, L2))     # entries of the chunks before
        nbits = gl.zeros([NW], gl.int32, gl.SliceLayout(1, L2))   # token bits of the chunks so far
        for ch in range(chunks):
            w = _lds((ch * CW + wi) * 4)
            if GP == 1:
                occ = _popc(w)                       # occupied fields (slots) of each word
            else:
                x = w
                for s in gl.static_range(4):         # fold each field's bits onto its lowest bit
                    if (1 << s) < GP:
                        x = x | (x >> (1 << s))
                occ = _popc(x & LOW)                 # occupied fields of each word
            bits = _popc(w)
            at = gl.associative_scan(occ, 1, _add) - occ   # entries before the word within its warp's row
            tset = TOT + (ch % 2) * (2 * NW)         # this chunk's set of totals
            _sts((tset + wk) * 4, gl.sum(occ, 1))
            _sts((tset + NW + wk) * 4, gl.sum(bits, 1))
            gl.thread_barrier()
            base = run
            for k in gl.static_range(NW):
                tk = _lds(wk * 0 + (tset + k) * 4)
                base += gl.where(wk > k, tk, 0)
                run += tk
                nbits += _lds(wk * 0 + (tset + NW + k) * 4)
            at += base[:, None]
            for f in range(SPW):                     # (a loop: fewer registers)
                m = (w >> (f * GP)) & FM
                _sts_if((OUT + at) * 4, (((ch * CW + wi) * SPW + f) << GP) | m, (m != 0).to(gl.int32))
                at += (m != 0).to(gl.int32)
        nlisted = _lds(gl.full([NW], LISTED * 4, gl.int32, gl.SliceLayout(1, L2)))
        # a map short of the listed entries' bits: a token listed a slot twice (counts -1: the dups kernel); the
        # codes written above stay in shared memory then (at most the union's size, which the listed entries bound)
        n_out = gl.where(nbits == nlisted, run, -1)  # (the same in every warp: each summed all the totals)
        gl.store(cnt_ptr + c + wk * 0, n_out, mask=wk == 0)
        _sts_if(wk * 0 + TOTAL * 4, n_out, (wk == 0).to(gl.int32))
        gl.thread_barrier()                          # the codes and the total written before they are read
        total = _lds(c * 0 + TOTAL * 4)              # (from shared memory: no round trip through L2 for counts[c])
        ent_row = ent_ptr + c.to(gl.int64) * ent_stride
        msk_row = msk_ptr + c.to(gl.int64) * msk_stride
        for p0 in range(0, total, 32 * NW):
            p = p0 + ci
            code = _lds((OUT + gl.minimum(p, OUTW - 1)) * 4)
            gl.store(ent_row + p, code >> GP, mask=p < total)
            gl.store(msk_row + p, code & FM, mask=p < total)
        gl.thread_barrier()                          # every raw read done before the buffers are touched
        res_map.slice(0, 32 * NW).store(gl.zeros([32 * NW], gl.int32, CL))
        res_tot.store(gl.zeros([TW], gl.int32, gl.BlockedLayout([1], [32], [NW], [0])))
        res_out.slice(0, 32 * NW).store(gl.zeros([32 * NW], gl.int32, CL))

    @gluon.jit
    def _popc(x):
        """popc.b32 of each int32."""
        return gl.inline_asm_elementwise("popc.b32 $0, $1;", "=r,r", [x], dtype=gl.int32, is_pure=True, pack=1)


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


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def tot_words(num_warps: int) -> int:
    """The fused kernel's totals words: two sets of per-warp totals, the listed count and the total (a power of 2)."""
    return max(TOT_WORDS, _pow2(4 * num_warps + 2))


def union_out_words(G: int, topk: int, num_warps: int) -> int:
    """The fused kernel's code array: G x topk words rounded up to a power of 2 (at least a word a thread)."""
    return max(_pow2(G * topk), 32 * num_warps)


def union_bytes(d: int, G: int, topk: int, num_warps: int) -> int:
    """Shared memory of a fused program over a map of d words: the map (a power of 2, at least a word a thread), the
    totals and the code array."""
    return 4 * (max(_pow2(d), 32 * num_warps) + tot_words(num_warps) + union_out_words(G, topk, num_warps))


def union_warps(d: int, G: int, topk: int) -> int:
    """Warps of a fused program over a map of d words: 16 where its shared memory (at 8 warps) leaves no room for a
    second program on an SM, else 8. Past one chunk a program is latency-bound (a barrier and dependent shared-memory
    loads a chunk), and one program of 8 warps an SM hides little of it. Measured (H200, bench/gpu_s47.sh c, the
    grouping bench, overlap indices, s_q 1024 / 8192, us at 8 -> 16 warps): one program an SM: G 8 65536 slots 18.3 ->
    15.7 / 162.5 -> 120.3, 131072 28.7 -> 23.6 / 243.3 -> 181.2; G 4 262144 63.7 -> 53.6 / 513.2 -> 425.2; G 2 524288
    173.0 -> 150.7 / 1391.7 -> 1193.0; G 16 32768 23.3 -> 14.4 / 135.2 -> 70.8. Two or more an SM, 16 warps as fast or
    slower: G 8 16384 10.5 -> 9.4 / 68.8 -> 70.9; G 4 65536 20.3 -> 21.4 / 142.3 -> 165.1, 131072 32.1 -> 32.1 /
    232.6 -> 251.4; G 2 16384 12.6 -> 15.6 / 84.8 -> 114.1, 262144 83.5 -> 83.0 / 631.6 -> 649.4 (why was not
    measured; at 80-99 registers a thread fewer 16-warp programs fit an SM). UNION_WARPS or DSATTN_UNION_WARPS (8 or 16)
    override it. Session 80 (H100, the grouping bench at G 2, 16384 slots, s_q 1024 / 8192, bench/results/s80/): 4 / 8
    / 16 warps 12.7 / 12.6 / 14.9 us, 87.2 / 82.3 / 108.8 us; 8 warps capped at 32 registers (.maxnreg: 6 -> 8
    programs an SM by registers, 12 bytes of spill) 12.6 / 87.2, the 32-head s_q 8192 prefill 0.995x (95% CI
    0.990-1.003): neither kept (code at 5fb380c). Nsight Compute there (8 warps, 80 us): DRAM 51%, occupancy 70%
    of 75%, the stalls on the index loads' first use (~29%) and on counts[c]'s reload before the copy (~8%)."""
    forced = os.environ.get("DSATTN_UNION_WARPS", "").strip() or UNION_WARPS
    if forced:
        if str(forced) not in ("8", "16"):
            raise ValueError(f"DSATTN_UNION_WARPS / UNION_WARPS must be 8 or 16, got {forced!r}")
        return int(forced)
    return 16 if 2 * (union_bytes(d, G, topk, 8) + 1024) > SM_SMEM_BYTES else 8


def union_max_words(G: int, topk: int) -> int:
    """The largest map (a power of 2 of int32 words, at most MAX_WORDS) whose program fits a block's shared memory
    beside its totals and code array, at 8 or 16 warps (the larger totals and code array counted): at topk 2048 G 2 /
    4 / 8 32768 words (128 KiB; the codes 16 / 32 / 64 KiB), G 16 16384 (the codes 128 KiB); 0 when not even one chunk
    fits."""
    room = SMEM_BYTES // 4 - tot_words(16) - union_out_words(G, topk, 16)
    if room < CHUNK_WORDS:
        return 0
    return min(MAX_WORDS, 1 << (room.bit_length() - 1))


def launch_union(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups, gp, spw, d, fast):
    """The union lists of `groups` groups in one launch (grouping._launch_dense under IMPL 'dense_fused'); groups
    with a repeated slot get counts -1, for the repeated-slot kernel that follows. d: the map's words
    (grouping.dense_layout), at most union_max_words(G, K). union_warps(d, G, K) warps a program."""
    k = indices.shape[1]
    nw = union_warps(d, G, k)
    dw = max(_pow2(d), 32 * nw)
    cw = min(dw, CHUNK_WORDS)
    kp = _pow2(k)
    bk = min(kp, max(32 * nw, MAP_TILE // gp))
    fast(dense_union_smem_kernel, (groups,), indices, indices.stride(0),
         topk_length if topk_length is not None else indices, num_slots, token0, ntokens, entries, entries.stride(0),
         masks, masks.stride(0), counts, k, d, G=G, GP=gp, SPW=spw, LOG_SPW=spw.bit_length() - 1, DW=dw, CW=cw,
         KP=max(kp, bk), BK=bk, OUTW=union_out_words(G, k, nw), TW=tot_words(nw), HAS_LEN=topk_length is not None,
         num_warps=nw)
