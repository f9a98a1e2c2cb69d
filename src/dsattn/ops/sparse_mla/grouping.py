"""Query-group union lists for the grouped sparse MLA prefill kernel.

The grouped prefill kernel runs one program over M = 64 rows: G neighbouring query tokens x hpt heads.
It gathers the UNION of the G tokens' top-k lists once and masks each score by whether the row's token
listed that entry. This module builds those unions:

    group_shape(num_heads)                      -> (hpt, G)
    prefill_scratch_spec(num_tokens, heads, K)  -> the buffers build_groups fills ([] when G == 1)
    build_groups(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts)
    build_groups_reference(...)                 the same in plain PyTorch (the tests' twin)
    dense_fits(num_slots, G, K), dense_max_slots(G, K), dense_layout(num_slots, G): the dense path's reach
    fused_fits, fused_max_slots, dense_reach: the shared-memory kernel's reach, and the device's
    translate_entries(entries, counts, groups, key_slots): lists built over keys turned into slots in place
                                                (sparse_mla_prefill's key_slots)

Union entries (SPEC 3): entry ``i`` of token ``t``'s list is valid iff ``0 <= indices[t, i] < num_slots`` and ``i <
topk_length[t]`` (when given). A slot listed twice by one token counts twice, so union entries are (slot,
occurrence) pairs: entry (s, k) carries bit j of its mask when token j of the group lists s more than k times. For
group c (0-based within the chunk): ``entries[c, :counts[c]]`` are the slots, ``masks[c, :counts[c]]`` the token
bits. ORDER: unspecified (the grouped kernel takes any). The dense path (IMPL "auto", the default, "dense_smem" and
"dense", where dense_fits), the sort path and a rebuilt group (below) list them by ascending slot, then occurrence:
the order of build_groups_reference. The hash path lists a group's entries in its hash table's order, a function of
the group's slot set alone (ordered hashing: the same set gives the same table whatever the order of the inserts,
Shun & Blelloch 2014; the CPU test permutes the insertion order, the bench's same_after_timing checks it on a GPU).
Scratch: the hash path uses columns [0, G * K) of entries[c] / masks[c] as its table, so past counts[c] they hold
table cells (unspecified); the dense path keeps its map in masks[c, :D] (D <= G * K words, dense_layout), so past
counts[c] masks hold map words and entries nothing written (under dense_fused, the default on a GPU, the map lives in
shared memory and nothing past counts[c] is written); columns past G * K, and rows past the groups built, are never
written (the sort path writes nothing past counts[c]).

Dense path (_launch_dense; IMPL "dense" and "dense_smem" where dense_fits, IMPL "auto" and "dense_fused" where
fused_fits when the shared-memory kernel runs (a CUDA GPU with Gluon) and where dense_fits elsewhere, else the hash
path: no error, the env setting cannot know num_slots; nothing allocated, the scratch spec unchanged; on a GPU, under
auto / dense_fused steps 1 to 3 are one shared-memory kernel instead, and under dense_smem steps 1 and 2,
grouping_smem.py, with the same entries in the same order). The fused kernel compacts its map a chunk of 4096 words
at a time (session 46), so its reach is shared memory's, not the registers': fused_max_slots, at topk 2048 G 8 131072,
G 4 262144, G 2 524288, G 16 32768 slots (dense_reach gives the reach of the device's default path). Each group keeps
a map of its token bits over the whole slot range: GP = next power of 2 of G bits a slot (a field), SPW = 32 // GP slots
an int32 word, D = cdiv(num_slots, SPW) words, in masks[c, :D] (topk 2048, 16384 slots: G 8 4096 words, 16 KiB a
group; G 4 2048; G 2 1024). Three kernels and the sort path's repeated-slot kernel:
  1. clear: masks[c, :D] = 0, counts[c] = 0 (flat grid, 1024 words a program).
  2. insert, G * cdiv(K, 512) programs a group (4 warps, 4 slots a thread): each valid slot s of token j ORs
     bit j into field s % SPW of word s // SPW (one atomic a slot, its result unused: REDG.E.OR in the SASS;
     no probing, no dependent load); counts[c] += the program's valid entries (one atomic_add).
  3. compact, one program a group (DW = next power of 2 of D words in registers, DENSE_WORDS = 4096 at most,
     4-8 warps): loads the whole map, counts the occupied fields of each word, an exclusive prefix sum
     (tl.cumsum) gives each word's first entry, a barrier (every word read before any store: the entries
     overwrite the map), then field by field (a loop of SPW) writes entries[c, at] = slot, masks[c, at] =
     field; counts[c] = the number. A map that holds fewer bits (popcount) than the valid entries listed means a
     token listed a slot twice: counts[c] = -1, and
  4. _group_union_dups_kernel (the sort path's rebuild; a program looks at dups_block groups with one load and
     returns unless one is marked) rebuilds it
     (DENSE_INLINE puts that branch in the compaction instead: its registers, 128 and 688 bytes of stack at
     G 8, then set the compaction's occupancy).
The map must fit the compaction's registers and the masks row's first G * K columns: D <= min(DENSE_WORDS,
G * K), so num_slots <= dense_max_slots(G, K): at topk 2048 G 8 16384, G 4 32768, G 2 65536, G 16 8192 (the fused
kernel, whose map lives in shared memory, reaches further: above). G up to 16 (16-bit fields). The output order
(ascending slot) equals the reference's and may help the prefill kernel's gathers (not measured).
Measured (H200, session 11, bench/logs/s11_call2.log; the grouping bench, CUDA graph of 10 calls, overlap indices,
s_kv 16384, topk 2048): s_q 1024 G 8 / 4 / 2 42.5 / 52.3 / 72.6 us, s_q 8192 300.1 / 347.0 / 496.4, 2.5-3.8x faster
than the hash path; the insert (~2.1 M REDs in ~30 us at s_q 1024) sets the pace. The prediction before it, the time
of each kernel and the sm_90a compile check (no spill at the defaults; DENSE_WORDS 8192 spilled, hence 4096):
notes/sparse_mla.md, "grouping.py's docstring".

Hash path (_launch_hash; four launches, nothing allocated, no scratch beyond entries / masks / counts):
  1. clear: entries[c, :G*K] = -1 (EMPTY), counts[c] = 0.
  2. insert, G * cdiv(K, 128) programs a group: each valid slot of token j goes into group c's table (its
     entries row, G * K cells: load <= 1 always) by ordered linear probing (Amble & Knuth 1974; lock-free as in
     Shun & Blelloch 2014): a lane reads the cells from its position to the end of its HASH_W-aligned window
     (HASH_W 4: one 16-byte vector a round), takes the first holding EMPTY, its slot or a smaller slot, and
     atomic_max-es its slot there; EMPTY or its own slot ends it, a smaller slot
     was displaced and the lane carries that one on from the next cell. Cells only grow, so a stale read
     never skips a cell wrongly; a full table still settles. The lane that takes a cell from EMPTY (each cell
     once) zeroes the masks cell beside it. A program still probing after HASH_MAX_ROUNDS rounds marks its
     group (bit 30 of counts[c]) for the finish.
  3. mark, the same programs: each valid slot is found in the (now fixed) table and bit j OR-ed into the masks cell
     beside it; counts[c] += the program's valid entries (a marked group is skipped).
  4. compact, one program a group: occupied cells move to the front of the rows in place (block by block; a
     cell moves to the number of occupied cells before it, never past itself); counts[c] = their number. The
     same program rebuilds the group the sort path's way instead (one tl.sort, ascending slots; its spills,
     sm_90a G 8: 712 bytes of stack, cost only when taken) when the union fills HASH_SORTED_LOAD (0.85) of the
     table or more, or the masks hold fewer bits than the entries listed (a token listed a slot twice, never
     from the indexer). A marked group whose table already holds that many is rebuilt; one that holds fewer is
     first finished (_finish_group: every slot of its lists inserted again by this one program, then marked),
     after which the same rules apply. So the entries' order is a function of the lists: whether a program gave
     up depends on how the concurrent probes interleave, and session 46 saw two calls differ when a give-up
     went straight to the rebuild (session 47: bench/logs/s47/). Left to timing only: a finish that does not
     settle in HASH_FINISH_TURNS turns of the table (a safety bound), rebuilt.
IMPL "hash1" (_hash_fused_kernel): the same four phases in one program a group, one launch (barriers
between the phases, HASH1 = 2048 slots a probe step at 16 warps). sm_90a: 128 registers; without the
rebuild branch 4 bytes of spill (G 8), with it 712 bytes of stack (the rebuild's). Prediction: fewer
slots in flight an SM than the four-launch path but no launches or clear pass of its own; G 8 s_q 1024
~25-35 us (one wave of 128 programs), s_q 8192 ~200-280 us.
The passes run group-major, alternating direction, so that each pass starts on the tables the previous one touched
last (the tables stay in L2 while the programs running at once share a few groups). Measured (H200,
bench/logs/s10_final.log, CUDA graph of 10 calls): s_q 1024 G 8 / 4 / 2 119.6 / 129.8 / 200.1 us, s_q 8192 1149.5 /
1111.4 / 1457.2; hash1 faster at G 8 s_q 8192 only (1030.6 against 1116.1 us), HASH_W 8 slower than 4 everywhere
(bench/logs/s11_call1.log). The prediction and the CPU replay of the probe loops (--simulate): notes/sparse_mla.md.

Sort path (IMPL = "sort"; one program per group) sorts the G * K codes ``slot * GP + j`` (GP = next power
of 2 of G; invalid entries get a sentinel that sorts last) with one ``tl.sort`` and compacts the sorted runs
of equal slots into entries, each mask a segmented OR of the run's token bits. A group where some token
lists a slot twice is marked (counts = -1) and rebuilt by a second kernel launched right after (its
programs return at once for unmarked groups): occurrence ranks from the runs of equal codes, entry (s, k) at
base_s + k, masks by atomic OR after zeroing. Two launches.

sm_90a compile check of the hash and sort paths (registers and spills of each kernel, why INLINE_DUPS):
notes/sparse_mla.md. The sort path took about 3-4x the hash path's time on the H200 (sessions 9-10; not kept in a file).

Histogram path (session 14, removed in session 15): right, and 7-16x slower than the dense path on the H200
(bench/logs/s15_hist_grouping.log); its code at git c066183.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import torch

from ..._checks import check_tensor
from .._fastlaunch import launch as _fast
from .._triton import HAVE_TRITON, interpreting, kernels_available, next_pow2, triton, tl

__all__ = ["group_shape", "prefill_scratch_spec", "build_groups", "build_groups_reference",
           "SCRATCH_CAP_BYTES", "MAX_GROUP"]

ROWS = 64                     # M of the grouped kernel: G tokens x hpt heads
SCRATCH_CAP_BYTES = 64 << 20  # entries + masks of one chunk stay within this
MAX_GROUP = 16                # largest G build_groups accepts (group_shape gives at most 8)


def group_shape(num_heads: int) -> tuple[int, int]:
    """(hpt, G): heads per token in one program (8 for 1..8 heads, 16 for 9..16, 32 for 17..32, 64 above)
    and tokens per group G = 64 // hpt. 128 heads -> (64, 1): two head blocks of one token each."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or not 1 <= num_heads <= 128:
        raise ValueError(f"num_heads must be an int in 1..128, got {num_heads!r}")
    hpt = 8
    while hpt < min(num_heads, 64):
        hpt *= 2
    return hpt, ROWS // hpt


def scratch_cap_bytes() -> int:
    """SCRATCH_CAP_BYTES, or DSATTN_PREFILL_SCRATCH_MIB MiB where set (read when a scratch spec is made: A/B runs
    of the chunk size; a caller that sizes its workspace from prefill_scratch_spec gets the chunks it sized)."""
    spec = os.environ.get("DSATTN_PREFILL_SCRATCH_MIB", "").strip()
    if not spec:
        return SCRATCH_CAP_BYTES
    if not spec.isdigit() or not 1 <= int(spec) <= 65536:
        raise ValueError(f"DSATTN_PREFILL_SCRATCH_MIB must be a whole number of MiB in 1..65536, got {spec!r}")
    return int(spec) << 20


def _chunk_groups(g: int, topk: int) -> int:
    """Groups per chunk: entries + masks ((C, G * topk) int32 each) within scratch_cap_bytes()."""
    return max(1, scratch_cap_bytes() // (2 * 4 * g * topk))


def prefill_scratch_spec(num_tokens: int, num_heads: int, topk: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """Scratch of the grouped prefill kernel: [] when G == 1 (group_shape), else

        [((C, G * topk), int32),   entries: union slots of each group (any order; build_groups' hash
                                   table while it builds them)
         ((C, G * topk), int32),   masks: bit j set when token j of the group lists the entry
         ((C,), int32)]            counts: entries per group

    C = min(cdiv(num_tokens, G), chunk) groups, chunk = max(1, 64 MiB // (8 * G * topk)) so that entries
    and masks together stay within 64 MiB (G 8, topk 2048: 512 groups = 4096 tokens, 64 MiB; the
    launcher builds and runs the tokens in chunks of C * G; DSATTN_PREFILL_SCRATCH_MIB sets another cap).
    """
    for name, v in (("num_tokens", num_tokens), ("topk", topk)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "num_tokens" else 1):
            raise ValueError(f"{name} must be an int >= {0 if name == 'num_tokens' else 1}, got {v!r}")
    _, g = group_shape(num_heads)
    if g == 1:
        return []
    c = min(-(-num_tokens // g), _chunk_groups(g, topk))
    return [((c, g * topk), torch.int32), ((c, g * topk), torch.int32), ((c,), torch.int32)]


# ---------------------------------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------------------------------

def _check_args(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts):
    """Returns (indices as [T, K], groups)."""
    check_tensor("indices", indices, dtype=torch.int32, ndim=(2, 3))
    if indices.dim() == 3:
        if indices.shape[1] != 1:
            raise ValueError(f"indices must have shape [T, K] or [T, 1, K], got {list(indices.shape)}")
        indices = indices[:, 0]
    t, k = indices.shape
    if k < 1:
        raise ValueError("indices must have at least one entry per token (dim -1)")
    if topk_length is not None:
        check_tensor("topk_length", topk_length, dtype=torch.int32, shape=(t,))
    for name, v, lo in (("num_slots", num_slots, 0), ("G", G, 1), ("token0", token0, 0), ("ntokens", ntokens, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if G > MAX_GROUP:
        raise ValueError(f"G must be at most {MAX_GROUP}, got {G}")
    if token0 + ntokens > t:
        raise ValueError(f"token0 + ntokens must be at most the tokens of indices ({t}), got {token0 + ntokens}")
    groups = -(-ntokens // G)
    check_tensor("entries", entries, dtype=torch.int32, ndim=2)
    c = entries.shape[0]
    if entries.shape[1] < G * k:
        raise ValueError(f"entries must have at least G * K = {G * k} columns, got {entries.shape[1]}")
    check_tensor("masks", masks, dtype=torch.int32, shape=tuple(entries.shape))
    check_tensor("counts", counts, dtype=torch.int32, shape=(c,))
    if groups > c:
        raise ValueError(f"entries must have a row per group ({groups} groups of {G} in {ntokens} tokens), "
                         f"got {c} rows")
    dev = indices.device
    for name, x in (("topk_length", topk_length), ("entries", entries), ("masks", masks), ("counts", counts)):
        if x is not None and x.device != dev:
            raise ValueError(f"{name} must be on the device of indices ({dev}), got {x.device}")
    return indices, groups


# ---------------------------------------------------------------------------------------------------
# reference (plain PyTorch)
# ---------------------------------------------------------------------------------------------------

def build_groups_reference(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts) -> int:
    """build_groups in plain PyTorch: sorts (group, slot, j) codes, takes run ranks for the occurrence,
    sorts again on (group, slot, occurrence, j) and sums the (distinct) token bits of each entry."""
    indices, groups = _check_args(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts)
    if groups == 0:
        return 0
    k = indices.shape[1]
    dev = indices.device
    idx = indices[token0:token0 + ntokens].to(torch.int64)
    pos = torch.arange(k, device=dev)[None, :]
    valid = (idx >= 0) & (idx < num_slots)
    if topk_length is not None:
        valid &= pos < topk_length[token0:token0 + ntokens].to(torch.int64)[:, None]
    local = torch.arange(ntokens, device=dev)[:, None].expand(ntokens, k)
    c, j, s = local[valid] // G, local[valid] % G, idx[valid]
    counts[:groups].zero_()
    if s.numel() == 0:
        return groups
    code = (c * num_slots + s) * G + j
    code, _ = torch.sort(code)
    _, run = torch.unique_consecutive(code, return_counts=True)
    start = torch.cumsum(run, 0) - run
    occ = torch.arange(code.numel(), device=dev) - torch.repeat_interleave(start, run)
    cs, j = code // G, code % G                                  # cs = c * num_slots + slot
    key = (cs * k + occ) * G + j
    key, _ = torch.sort(key)
    ent, j = key // G, key % G                                   # ent = (c * num_slots + slot) * k + occ
    uniq, inverse = torch.unique_consecutive(ent, return_inverse=True)
    bits = torch.zeros(uniq.numel(), dtype=torch.int64, device=dev).index_add_(0, inverse, 1 << j)
    gc = uniq // k // num_slots
    slot = uniq // k % num_slots
    n = torch.bincount(gc, minlength=groups)
    rank = torch.arange(uniq.numel(), device=dev) - torch.repeat_interleave(torch.cumsum(n, 0) - n, n)
    entries[gc, rank] = slot.to(torch.int32)
    masks[gc, rank] = bits.to(torch.int32)
    counts[:groups] = n.to(torch.int32)
    return groups


# ---------------------------------------------------------------------------------------------------
# Triton kernel
# ---------------------------------------------------------------------------------------------------

if HAVE_TRITON:
    @triton.jit
    def _max_combine(a, b):
        return tl.maximum(a, b)

    @triton.jit
    def _seg_or_combine(fa, va, fb, vb):
        # segmented inclusive OR: a segment starts where f is set
        return fa | fb, tl.where(fb != 0, vb, va | vb)

    @triton.jit
    def _seg_max_combine(fa, va, fb, vb):
        # segmented inclusive max: a segment starts where f is set
        return fa | fb, tl.where(fb != 0, vb, tl.maximum(va, vb))

    @triton.jit
    def _shift(x, pos, d: tl.constexpr, N: tl.constexpr):
        """x[pos - d] (clamped into range; callers mask the ends)."""
        return tl.gather(x, tl.minimum(tl.maximum(pos - d, 0), N - 1), 0)

    @triton.jit
    def _sentinel(WIDE: tl.constexpr):
        """The code past every real one (int64 codes when WIDE, else int32)."""
        if WIDE:
            return tl.full((), 9223372036854775807, tl.int64)
        else:
            return tl.full((), 2147483647, tl.int32)

    @triton.jit
    def _sorted_codes(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, SENT,
                      G: tl.constexpr, GP: tl.constexpr, KP: tl.constexpr, HAS_LEN: tl.constexpr,
                      WIDE: tl.constexpr):
        """Group c's codes slot * GP + j (j: token in the group), SENT for invalid entries, sorted."""
        N: tl.constexpr = GP * KP
        j = tl.arange(0, GP)[:, None]
        i = tl.arange(0, KP)[None, :]
        t = c * G + j                                      # token within the chunk
        tok_ok = (j < G) & (t < ntokens)
        row = (token0 + t).to(tl.int64)
        ok = tok_ok & (i < K)
        if HAS_LEN:
            n = tl.load(len_ptr + row, mask=tok_ok, other=0)
            ok = ok & (i < n)
        slot = tl.load(idx_ptr + row * idx_stride + i, mask=ok, other=-1)
        ok = ok & (slot >= 0) & (slot < num_slots)
        if WIDE:
            code = tl.where(ok, slot.to(tl.int64) * GP + j, SENT)
        else:
            code = tl.where(ok, slot * GP + j, SENT)
        return tl.sort(tl.reshape(code, [N]))              # by slot, then token; invalid last

    @triton.jit
    def _runs(code, SENT, GP: tl.constexpr, N: tl.constexpr):
        pos = tl.arange(0, N)
        valid = code != SENT
        prev = _shift(code, pos, 1, N)
        nxt = _shift(code, pos, -1, N)
        s = code // GP
        same = (pos > 0) & (prev == code) & valid          # a token lists this slot again
        first = valid & ((pos == 0) | (prev // GP != s))   # first element of a slot's run
        last = valid & ((pos == N - 1) | (nxt // GP != s) | (nxt == SENT))
        return pos, valid, s, same, first, last

    @triton.jit
    def _emit_dups(code, SENT, c, ent_ptr, ent_stride, msk_ptr, msk_stride, cnt_ptr,
                   GP: tl.constexpr, N: tl.constexpr):
        """A token lists a slot more than once (never from the indexer): slot s has entries (s, 0..kmax), kmax
        its largest occurrence; entry (s, k) sits at base_s + k and ORs the bits of its tokens (atomics)."""
        pos, valid, s, same, first, last = _runs(code, SENT, GP, N)
        f = first.to(tl.int32)
        bit = (1 << (code % GP)).to(tl.int32)
        # occurrence rank: position within the run of equal codes
        occ = tl.where(valid, pos - tl.associative_scan(tl.where(same, 0, pos), 0, _max_combine), 0)
        _, kmax = tl.associative_scan((f, occ), 0, _seg_max_combine)
        size = tl.where(last, kmax + 1, 0)
        end = tl.cumsum(size, 0)                           # entries up to and including this slot run
        base = tl.associative_scan(tl.where(first, end - size, 0), 0, _max_combine)
        at = base + occ
        ent_row = ent_ptr + c.to(tl.int64) * ent_stride
        msk_row = msk_ptr + c.to(tl.int64) * msk_stride
        tl.store(msk_row + at, tl.zeros_like(bit), mask=valid)
        tl.debug_barrier()
        tl.store(ent_row + at, s.to(tl.int32), mask=valid)
        tl.atomic_or(msk_row + at, bit, mask=valid, sem="relaxed")
        tl.store(cnt_ptr + c, tl.sum(size, 0))

    @triton.jit
    def _group_union_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens,
                            ent_ptr, ent_stride, msk_ptr, msk_stride, cnt_ptr, K,
                            G: tl.constexpr, GP: tl.constexpr, KP: tl.constexpr,
                            HAS_LEN: tl.constexpr, WIDE: tl.constexpr, INLINE_DUPS: tl.constexpr):
        """One program per group. A group whose tokens list a slot twice is built here when INLINE_DUPS, else
        marked counts[c] = -1 for _group_union_dups_kernel (keeps that branch's registers out of this one)."""
        c = tl.program_id(0)
        N: tl.constexpr = GP * KP
        SENT = _sentinel(WIDE)
        code = _sorted_codes(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, SENT,
                             G, GP, KP, HAS_LEN, WIDE)
        pos, valid, s, same, first, last = _runs(code, SENT, GP, N)
        if tl.max(same.to(tl.int32), 0) == 0:
            # every slot once per token: one entry per slot run, its mask the OR over the run
            f = first.to(tl.int32)
            bit = (1 << (code % GP)).to(tl.int32)
            at = tl.cumsum(f, 0) - 1
            _, m = tl.associative_scan((f, bit), 0, _seg_or_combine)
            tl.store(ent_ptr + c.to(tl.int64) * ent_stride + at, s.to(tl.int32), mask=first)
            tl.store(msk_ptr + c.to(tl.int64) * msk_stride + at, m, mask=last)
            tl.store(cnt_ptr + c, tl.sum(f, 0))
        else:
            if INLINE_DUPS:
                _emit_dups(code, SENT, c, ent_ptr, ent_stride, msk_ptr, msk_stride, cnt_ptr, GP, N)
            else:
                tl.store(cnt_ptr + c, -1)

    @triton.jit
    def _rebuild_group(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride, msk_ptr,
                       msk_stride, cnt_ptr, K, c, G: tl.constexpr, GP: tl.constexpr, KP: tl.constexpr,
                       HAS_LEN: tl.constexpr, WIDE: tl.constexpr):
        """Group c built the sort path's way with (slot, occurrence) entries (a token listed a slot twice): one
        tl.sort of its codes, then _emit_dups. The repeated-slot kernel and both compactions end here."""
        SENT = _sentinel(WIDE)
        code = _sorted_codes(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, SENT,
                             G, GP, KP, HAS_LEN, WIDE)
        _emit_dups(code, SENT, c, ent_ptr, ent_stride, msk_ptr, msk_stride, cnt_ptr, GP, GP * KP)

    @triton.jit(do_not_specialize=["groups"])
    def _group_union_dups_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens,
                                 ent_ptr, ent_stride, msk_ptr, msk_stride, cnt_ptr, K, groups,
                                 G: tl.constexpr, GP: tl.constexpr, KP: tl.constexpr,
                                 HAS_LEN: tl.constexpr, WIDE: tl.constexpr, BLOCK: tl.constexpr):
        """Builds the groups _group_union_kernel marked (counts[c] == -1). Program p looks at groups [p BLOCK,
        (p + 1) BLOCK) with one load and returns unless one is marked; then it rebuilds its marked groups one after
        the other (dups_block: about one program an SM, so a launch over many groups, nearly all unmarked, is one
        wave of programs rather than one short-lived program a group)."""
        c0 = tl.program_id(0) * BLOCK
        cs = c0 + tl.arange(0, BLOCK)
        if tl.min(tl.load(cnt_ptr + cs, mask=cs < groups, other=0), 0) < 0:
            for j in range(BLOCK):
                c = c0 + j
                if (c < groups) & (tl.load(cnt_ptr + c, mask=c < groups, other=0) < 0):
                    _rebuild_group(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride,
                                   msk_ptr, msk_stride, cnt_ptr, K, c, G, GP, KP, HAS_LEN, WIDE)

    # -----------------------------------------------------------------------------------------------
    # hash path (the default): an ordered hash table per group in the group's own entries / masks row
    # -----------------------------------------------------------------------------------------------

    @triton.jit
    def _hash_home(slot, TS):
        """Home cell of a slot in a table of TS cells: multiplicative hash, multiply-shift range reduction."""
        x = (slot.to(tl.int64) * 2654435761) & 0xFFFFFFFF
        return ((x * TS) >> 32).to(tl.int32)

    @triton.jit
    def _token_slots(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, j, kb,
                     G: tl.constexpr, BK: tl.constexpr, HAS_LEN: tl.constexpr):
        """Block kb of token j of group c: (slots, valid)."""
        i = kb * BK + tl.arange(0, BK)
        t = c * G + j
        tok_ok = t < ntokens
        row = (token0 + t).to(tl.int64)
        ok = (i < K) & tok_ok
        if HAS_LEN:
            n = tl.load(len_ptr + row, mask=tok_ok, other=0)
            ok = ok & (i < n)
        slot = tl.load(idx_ptr + row * idx_stride + i, mask=ok, other=-1)
        ok = ok & (slot >= 0) & (slot < num_slots)
        return tl.where(ok, slot, 0), ok

    @triton.jit
    def _group_order(pid, per_group, groups, REVERSE: tl.constexpr):
        """(group, index within it) of a flat program id, groups in launch order (REVERSE: last group first):
        the programs running at once share a few groups' tables (L2-resident), and a pass that follows one
        in the other direction starts on the tables its predecessor touched last."""
        c = pid // per_group
        if REVERSE:
            c = groups - 1 - c
        return c, pid % per_group

    @triton.jit
    def _hash_clear_kernel(ent_ptr, ent_stride, cnt_ptr, TS, groups, NB, CB: tl.constexpr):
        """Cells [0, TS) of each group's entries row EMPTY (-1), counts 0 (the masks cells are zeroed by the
        insert, each when its cell is first taken). Flat grid, NB programs a group, last group first."""
        c, b = _group_order(tl.program_id(0), NB, groups, True)
        offs = b * CB + tl.arange(0, CB)
        inb = offs < TS
        tl.store(ent_ptr + c.to(tl.int64) * ent_stride + offs, tl.full([CB], -1, tl.int32), mask=inb)
        if b == 0:
            tl.store(cnt_ptr + c, 0)

    @triton.jit
    def _probe_insert(key, pend, row, msk_row, TS, BK: tl.constexpr, W: tl.constexpr, MAX_ROUNDS):
        """Inserts the pending lanes' keys into the table at row (cells [0, TS)) by ordered linear probing
        (Amble & Knuth; lock-free as in Shun & Blelloch 2014): a lane reads the cells from its position to the
        end of its W-aligned window (one 16-byte vector at W 4), takes the first holding EMPTY (-1), its key,
        or a smaller key, and atomic_max-es its key there; EMPTY or its key -> done, a smaller key -> that key
        was displaced and the lane carries it on from the next cell. Cells only grow, so a stale read never
        skips a cell wrongly, and the final table is the same for every interleaving. A cell taken from EMPTY
        (once, ever) gets its masks cell zeroed by the lane that took it. Returns the lanes still pending after
        MAX_ROUNDS rounds (the caller gives the group up to _finish_group). Stopped there, the table is still the
        ordered table of the keys it holds (a pending lane carries one key that no cell holds), so inserting every
        key again settles it to the table of the whole set, the same as had nothing stopped."""
        wi = tl.arange(0, W)[None, :]
        p = _hash_home(key, TS)
        rounds = 0
        while (tl.max(pend.to(tl.int32), 0) > 0) & (rounds < MAX_ROUNDS):
            base = tl.multiple_of(p - p % W, W)        # W-aligned window (W divides TS)
            offs = base[:, None] + wi
            vals = tl.load(row + offs, mask=pend[:, None], other=2147483647, cache_modifier=".cg")
            cand = (vals <= key[:, None]) & (offs >= p[:, None])         # first cell EMPTY, key or smaller
            fw = tl.min(tl.where(cand, wi, W), 1)
            has = pend & (fw < W)
            at = wi == fw[:, None]
            v = tl.sum(tl.where(at, vals, 0), 1)
            tgt = base + fw
            found = has & (v == key)
            put = has & (v != key)
            # the atomic on the [BK, W] tile (one cell a row) keeps the loop in the tile's layout (a [BK] atomic
            # made Triton convert layouts through shared memory every round)
            sel = at & put[:, None]
            old = tl.atomic_max(row + offs, tl.broadcast_to(key[:, None], [BK, W]), mask=sel, sem="relaxed")
            tl.store(msk_row + offs, tl.zeros_like(old), mask=sel & (old == -1))   # a cell taken: mask 0
            old = tl.sum(tl.where(sel, old, 0), 1)
            done = found | (put & ((old == -1) | (old == key)))
            swap = put & (old >= 0) & (old < key)                        # placed; carry the displaced key
            key = tl.where(swap, old, key)
            pend = pend & (done == 0)
            p = tl.where(has, tgt + 1, base + W)
            p = tl.where(p >= TS, 0, p)
            rounds += 1
        return pend

    @triton.jit
    def _probe_mark(key, ok, j, row, msk_row, TS, BK: tl.constexpr, W: tl.constexpr):
        """Finds each valid lane's key in the (final) table at row and ORs bit j into the masks cell beside
        it (a key the table lacks, after a give-up, is skipped after a full turn)."""
        wi = tl.arange(0, W)[None, :]
        p = _hash_home(key, TS)
        pend = ok
        rounds = 0
        max_rounds = TS // W + 3                               # every cell once, and then some
        while (tl.max(pend.to(tl.int32), 0) > 0) & (rounds < max_rounds):
            base = tl.multiple_of(p - p % W, W)
            offs = base[:, None] + wi
            vals = tl.load(row + offs, mask=pend[:, None], other=-2, cache_modifier=".cg")
            fw = tl.min(tl.where((vals == key[:, None]) & (offs >= p[:, None]), wi, W), 1)
            hit = pend & (fw < W)
            tl.atomic_or(msk_row + offs, tl.full([BK, W], 1, tl.int32) << j,
                         mask=(wi == fw[:, None]) & hit[:, None], sem="relaxed")
            pend = pend & (hit == 0)
            p = base + W
            p = tl.where(p >= TS, 0, p)
            rounds += 1

    @triton.jit
    def _finish_group(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_row, msk_row, K, TS, c,
                      FINISH_ROUNDS, G: tl.constexpr, BK: tl.constexpr, W: tl.constexpr, HAS_LEN: tl.constexpr):
        """A group whose insert stopped (a program still probing after HASH_MAX_ROUNDS rounds, which depends on how
        the concurrent programs' probes interleave) finished by one program: every valid slot of its G lists
        inserted again, BK at a time (slots already placed are found; the rest placed, up to FINISH_ROUNDS rounds a
        block), then marked (the mark pass skipped the group). The table ends as the set's ordered table, whether or
        not the insert stopped, so the entries' order does not depend on timing. Returns the valid entries listed,
        or 2^30 when a block was still probing after FINISH_ROUNDS (then nothing is marked). hash1's program builds
        its group with it from a cleared table."""
        nkb = tl.cdiv(K, BK)
        stuck = 0
        q = 0
        while q < G * nkb:
            key, pend = _token_slots(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, q // nkb,
                                     q % nkb, G, BK, HAS_LEN)
            pend = _probe_insert(key, pend, ent_row, msk_row, TS, BK, W, FINISH_ROUNDS)
            stuck = stuck | tl.max(pend.to(tl.int32), 0)
            q += 1
        tl.debug_barrier()                                 # the table settled before any mark reads it
        listed = 1 << 30
        if stuck == 0:
            listed = 0
            q = 0
            while q < G * nkb:
                key, ok = _token_slots(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, q // nkb,
                                       q % nkb, G, BK, HAS_LEN)
                _probe_mark(key, ok, q // nkb, ent_row, msk_row, TS, BK, W)
                listed += tl.sum(ok.to(tl.int32), 0)
                q += 1
            tl.debug_barrier()                             # the marks land before the compaction reads them
        return listed

    @triton.jit
    def _compact_finish(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride,
                        msk_ptr, msk_stride, cnt_ptr, K, TS, c, listed, FINISH_ROUNDS, SORTED_AT,
                        G: tl.constexpr, CB: tl.constexpr, GP: tl.constexpr, KP: tl.constexpr, BK: tl.constexpr,
                        W: tl.constexpr, HAS_LEN: tl.constexpr, WIDE: tl.constexpr, REBUILD: tl.constexpr):
        """Group c's occupied cells to the front of its rows, in table order, in place (a cell moves to the
        number of occupied cells before it, never past itself; each block is loaded whole before it is
        stored), counts[c] their number. The group is rebuilt the sort path's way instead (_emit_dups: ascending
        slots; REBUILD False: counts[c] = -1, for the tests) when its union holds SORTED_AT slots or more, or
        the masks hold fewer bits than `listed` (the valid entries: a token listed a slot twice). listed >= 2^30:
        the insert gave up (a matter of timing), so the table may lack a few slots: when it already holds
        SORTED_AT, the union does too (rebuilt); else _finish_group settles it first (BK slots a probe block,
        FINISH_ROUNDS rounds; 0: no finish, the rebuild), and the rule above applies to the whole union. Either
        way the entries' order is a function of the lists, not of how the probes interleaved (but for a finish
        that does not settle in FINISH_ROUNDS, a safety bound: rebuilt)."""
        ent_row = ent_ptr + c.to(tl.int64) * ent_stride
        msk_row = msk_ptr + c.to(tl.int64) * msk_stride
        if listed >= (1 << 30):
            held = 0
            b = 0
            while b < TS:
                offs = b + tl.arange(0, CB)
                k = tl.load(ent_row + offs, mask=offs < TS, other=-1, cache_modifier=".cg")
                held += tl.sum((k >= 0).to(tl.int32), 0)
                b += CB
            if (held < SORTED_AT) & (FINISH_ROUNDS > 0):
                tl.debug_barrier()                         # every cell counted before the finish moves any
                listed = _finish_group(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_row, msk_row, K,
                                       TS, c, FINISH_ROUNDS, G, BK, W, HAS_LEN)
        n = 0
        bits = 0
        if listed < (1 << 30):
            b = 0
            while b < TS:                                  # (a while: the interpreter takes no tensor range)
                offs = b + tl.arange(0, CB)
                inb = offs < TS
                k = tl.load(ent_row + offs, mask=inb, other=-1, cache_modifier=".cg")
                m = tl.load(msk_row + offs, mask=inb, other=0, cache_modifier=".cg")
                occ = k >= 0
                at = n + tl.cumsum(occ.to(tl.int32), 0) - 1
                pc = tl.zeros_like(m)
                for jj in tl.static_range(G):
                    pc += (m >> jj) & 1
                tl.debug_barrier()
                tl.store(ent_row + at, k, mask=occ)
                tl.store(msk_row + at, m, mask=occ)
                n += tl.sum(occ.to(tl.int32), 0)
                bits += tl.sum(tl.where(occ, pc, 0), 0)
                b += CB
        if (bits == listed) & (n < SORTED_AT):
            tl.store(cnt_ptr + c, n)
        else:
            if REBUILD:
                tl.debug_barrier()                         # the compaction's stores land before the rebuild's
                _rebuild_group(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride, msk_ptr,
                               msk_stride, cnt_ptr, K, c, G, GP, KP, HAS_LEN, WIDE)
            else:
                tl.store(cnt_ptr + c, -1)

    @triton.jit
    def _hash_insert_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride,
                            msk_ptr, msk_stride, cnt_ptr, K, TS, G: tl.constexpr, BK: tl.constexpr, W: tl.constexpr,
                            MAX_ROUNDS: tl.constexpr, HAS_LEN: tl.constexpr):
        """Program (c, j, kb) inserts block kb of token j's valid slots into group c's table (_probe_insert);
        a program still probing after MAX_ROUNDS marks the group (bit 30 of counts[c]) for the rebuild. Flat
        grid, G * cdiv(K, BK) programs a group, first group first."""
        nkb = tl.cdiv(K, BK)
        c, r = _group_order(tl.program_id(0), G * nkb, 0, False)
        j = r // nkb
        kb = r % nkb
        key, pend = _token_slots(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, j, kb,
                                 G, BK, HAS_LEN)
        pend = _probe_insert(key, pend, ent_ptr + c.to(tl.int64) * ent_stride, msk_ptr + c.to(tl.int64) * msk_stride,
                             TS, BK, W, MAX_ROUNDS)
        if tl.max(pend.to(tl.int32), 0) > 0:
            tl.atomic_or(cnt_ptr + c, 1 << 30, sem="relaxed")

    @triton.jit
    def _hash_mark_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride,
                          msk_ptr, msk_stride, cnt_ptr, K, TS, groups, G: tl.constexpr, BK: tl.constexpr,
                          W: tl.constexpr, HAS_LEN: tl.constexpr):
        """Program (c, j, kb): ORs bit j into the masks cells of its block's valid slots (_probe_mark) and adds
        its number of valid entries to counts[c] (skipped when the insert marked the group). A token listing
        a slot twice ORs its bit twice: compaction sees fewer bits than counts[c] says and rebuilds. Flat grid,
        last group first (the insert's last tables are still in L2)."""
        nkb = tl.cdiv(K, BK)
        c, r = _group_order(tl.program_id(0), G * nkb, groups, True)
        j = r // nkb
        kb = r % nkb
        if tl.load(cnt_ptr + c) < (1 << 30):
            key, ok = _token_slots(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, K, c, j, kb,
                                   G, BK, HAS_LEN)
            _probe_mark(key, ok, j, ent_ptr + c.to(tl.int64) * ent_stride, msk_ptr + c.to(tl.int64) * msk_stride,
                        TS, BK, W)
            tl.atomic_add(cnt_ptr + c, tl.sum(ok.to(tl.int32), 0), sem="relaxed")

    @triton.jit
    def _hash_compact_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens,
                             ent_ptr, ent_stride, msk_ptr, msk_stride, cnt_ptr, K, TS, FINISH_ROUNDS, SORTED_AT,
                             G: tl.constexpr, CB: tl.constexpr, GP: tl.constexpr, KP: tl.constexpr,
                             BK: tl.constexpr, W: tl.constexpr, HAS_LEN: tl.constexpr, WIDE: tl.constexpr,
                             REBUILD: tl.constexpr):
        """Program c: _compact_finish of group c with counts[c] (the valid entries, bit 30 on a give-up)."""
        c = tl.program_id(0)
        _compact_finish(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride,
                        msk_ptr, msk_stride, cnt_ptr, K, TS, c, tl.load(cnt_ptr + c), FINISH_ROUNDS, SORTED_AT,
                        G, CB, GP, KP, BK, W, HAS_LEN, WIDE, REBUILD)

    @triton.jit
    def _hash_fused_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens,
                           ent_ptr, ent_stride, msk_ptr, msk_stride, cnt_ptr, K, TS, FINISH_ROUNDS, SORTED_AT,
                           G: tl.constexpr, BK: tl.constexpr, W: tl.constexpr, MAX_ROUNDS: tl.constexpr,
                           CB: tl.constexpr, GP: tl.constexpr, KP: tl.constexpr, HAS_LEN: tl.constexpr,
                           WIDE: tl.constexpr, REBUILD: tl.constexpr):
        """IMPL 'hash1': one program builds group c alone, one launch: clear its table, then insert the G lists
        BK slots at a time and mark them (_finish_group's phases, here up to MAX_ROUNDS rounds a block), then
        compact (barriers between the phases; the table's loads bypass L1)."""
        c = tl.program_id(0)
        ent_row = ent_ptr + c.to(tl.int64) * ent_stride
        msk_row = msk_ptr + c.to(tl.int64) * msk_stride
        b = 0
        while b < TS:
            offs = b + tl.arange(0, CB)
            tl.store(ent_row + offs, tl.full([CB], -1, tl.int32), mask=offs < TS)
            b += CB
        tl.debug_barrier()
        listed = _finish_group(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_row, msk_row, K, TS, c,
                               MAX_ROUNDS, G, BK, W, HAS_LEN)
        _compact_finish(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride,
                        msk_ptr, msk_stride, cnt_ptr, K, TS, c, listed, FINISH_ROUNDS, SORTED_AT, G, CB, GP, KP, BK,
                        W, HAS_LEN, WIDE, REBUILD)

    # -----------------------------------------------------------------------------------------------
    # dense path (IMPL "auto" / "dense_smem" / "dense" where the slot range fits): a map of token bits over the
    # slot range
    # -----------------------------------------------------------------------------------------------

    @triton.jit
    def _popcount32(x):
        """Set bits of each int32 (SWAR; arithmetic shifts are masked, so negative words count right)."""
        x = x - ((x >> 1) & 0x55555555)
        x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
        x = (x + (x >> 4)) & 0x0F0F0F0F
        x = x + (x >> 8)
        x = x + (x >> 16)
        return x & 0x3F

    @triton.jit
    def _dense_clear_kernel(msk_ptr, msk_stride, cnt_ptr, D, groups, NB, CB: tl.constexpr):
        """Words [0, D) of each group's masks row (its dense map) 0, counts 0. Flat grid, NB programs a group,
        last group first."""
        c, b = _group_order(tl.program_id(0), NB, groups, True)
        offs = b * CB + tl.arange(0, CB)
        tl.store(msk_ptr + c.to(tl.int64) * msk_stride + offs, tl.zeros([CB], tl.int32), mask=offs < D)
        if b == 0:
            tl.store(cnt_ptr + c, 0)

    @triton.jit
    def _dense_insert_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, msk_ptr, msk_stride, cnt_ptr,
                             K, G: tl.constexpr, GP: tl.constexpr, SPW: tl.constexpr, LOG_SPW: tl.constexpr,
                             BK: tl.constexpr, HAS_LEN: tl.constexpr):
        """Program (c, j, kb): block kb (BK slots) of token j; bit j of the field of each valid slot s goes into
        word s // SPW of group c's map (field s % SPW, GP bits) by one atomic OR (its result unused: a RED);
        counts[c] += the block's valid entries. The index load has the atomics' layout (BK / (32 * num_warps)
        slots a thread, 32 * num_warps apart: contiguity hint 1, so not vectorized; a vectorized load made
        Triton convert layouts through shared memory) and is issued whole before the atomics. Flat grid,
        G * cdiv(K, BK) programs a group, first group first."""
        nkb = tl.cdiv(K, BK)
        c, r = _group_order(tl.program_id(0), G * nkb, 0, False)
        j = r // nkb
        i = (r % nkb) * BK + tl.max_contiguous(tl.arange(0, BK), 1)
        t = c * G + j
        tok_ok = t < ntokens
        row = (token0 + t).to(tl.int64)
        ok = (i < K) & tok_ok
        if HAS_LEN:
            ok = ok & (i < tl.load(len_ptr + row, mask=tok_ok, other=0))
        slot = tl.load(idx_ptr + row * idx_stride + i, mask=ok, other=-1)
        ok = ok & (slot >= 0) & (slot < num_slots)
        slot = tl.where(ok, slot, 0)
        bit = (1 << j) << ((slot & (SPW - 1)) * GP)
        tl.atomic_or(msk_ptr + c.to(tl.int64) * msk_stride + (slot >> LOG_SPW), bit, mask=ok, sem="relaxed")
        tl.atomic_add(cnt_ptr + c, tl.sum(ok.to(tl.int32), 0), sem="relaxed")

    @triton.jit
    def _dense_compact_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride,
                              msk_ptr, msk_stride, cnt_ptr, K, D, groups,
                              G: tl.constexpr, GP: tl.constexpr, SPW: tl.constexpr, DW: tl.constexpr,
                              KP: tl.constexpr, HAS_LEN: tl.constexpr, WIDE: tl.constexpr, REBUILD: tl.constexpr):
        """Program c (last group first): group c's whole map (D <= DW words) into registers, then (a barrier: every
        word loaded before any store) its occupied fields written to entries / masks [0, n) ascending by slot
        (word w's fields go to the occupied fields before it, an exclusive prefix sum, field by field), counts[c]
        = n. When the map holds fewer bits than counts[c] (the valid entries listed: a token listed a slot twice)
        the group is rebuilt the sort path's way instead (REBUILD: _emit_dups here; else counts[c] = -1, which
        _group_union_dups_kernel, launched next unless the tests switch it off, rebuilds)."""
        c = groups - 1 - tl.program_id(0)
        ent_row = ent_ptr + c.to(tl.int64) * ent_stride
        msk_row = msk_ptr + c.to(tl.int64) * msk_stride
        wi = tl.arange(0, DW)
        # one word a thread a load (contiguity hint 1: not vectorized), the layout of the scattered stores below (a
        # vectorized load made Triton convert every field's pointers and values through shared memory)
        w = tl.load(msk_row + tl.max_contiguous(wi, 1), mask=wi < D, other=0, cache_modifier=".cg")
        listed = tl.load(cnt_ptr + c)
        FM: tl.constexpr = (1 << GP) - 1
        occupied = tl.zeros([DW], tl.int32)
        for f in tl.static_range(SPW):
            occupied += (((w >> (f * GP)) & FM) != 0).to(tl.int32)
        at = tl.cumsum(occupied, 0) - occupied             # entries before word w
        n = tl.sum(occupied, 0)
        bits = tl.sum(_popcount32(w), 0)
        tl.debug_barrier()                                 # the map is read whole before the rows are written
        if bits == listed:
            for fld in range(SPW):                         # (a loop: unrolled it took ~250 registers)
                m = (w >> (fld * GP)) & FM
                occ = m != 0
                tl.store(ent_row + at, wi * SPW + fld, mask=occ)
                tl.store(msk_row + at, m, mask=occ)
                at += occ.to(tl.int32)
            tl.store(cnt_ptr + c, n)
        else:
            if REBUILD:
                _rebuild_group(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens, ent_ptr, ent_stride, msk_ptr,
                               msk_stride, cnt_ptr, K, c, G, GP, KP, HAS_LEN, WIDE)
            else:
                tl.store(cnt_ptr + c, -1)


INLINE_DUPS = False  # see _group_union_kernel; the bench's --inline-dups times the other choice
DUPS_WAVE = 128  # programs of _group_union_dups_kernel to aim at (session 77): one an SM at most fits (sm_90a, G 2,
#                 topk 2048: 182 registers at 8 warps; 234 since, bench/s77/dups_check.py), so one program a group
#                 ran 4096 programs in ~31 waves at s_q 8192 for ~16 us, nearly all returning at once (sessions 37
#                 and 76, H200). Measured
#                 (H100, session 77, bench/results/s77/s77_call1_h100.log, torch.profiler): 32 heads s_q 8192 16.9 ->
#                 3.4 us, 1024 2.8 -> 1.4; 8 heads 8192 5.8 -> 3.1; the 8-head s_q 8192 call 1.004x (95% CI
#                 0.997-1.010, ab_s77_dups_8192_h8_h100.json). DSATTN_DUPS_BLOCK (read at each call, before its
#                 first kernel) sets the groups a program instead, for `dsattn bench ab` (1: one a group, as before).


def dups_block(groups: int) -> int:
    """Groups a program of the repeated-slot kernel looks at: the power of 2 (at most 32) that leaves DUPS_WAVE to
    2 x DUPS_WAVE programs (1 below 2 x DUPS_WAVE groups), or DSATTN_DUPS_BLOCK (a power of 2 from 1 to 1024)."""
    env = os.environ.get("DSATTN_DUPS_BLOCK", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1 or int(env) > 1024 or int(env) & (int(env) - 1):
            raise ValueError(f"DSATTN_DUPS_BLOCK must be a power of 2 from 1 to 1024, got {env!r}")
        return int(env)
    b = 1
    while b < 32 and groups >= 2 * b * DUPS_WAVE:
        b *= 2
    return b


def _launch_dups(args, groups, block, **meta):
    """The repeated-slot kernel over `groups` groups, `block` a program (dups_block; args: the union kernels')."""
    _fast(_group_union_dups_kernel, (-(-groups // block),), *args, groups, BLOCK=block, **meta)


def _launch(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups, num_warps=None,
            inline_dups=None):
    k = indices.shape[1]
    gp, kp = next_pow2(G), next_pow2(k)
    wide = num_slots * gp + gp > 2**31 - 1
    inline = INLINE_DUPS if inline_dups is None else inline_dups
    if num_warps is None:
        num_warps = 1 if interpreting() else (16 if gp * kp >= 8192 else 8 if gp * kp >= 2048 else 4)
    args = (indices, indices.stride(0), topk_length if topk_length is not None else indices, num_slots, token0,
            ntokens, entries, entries.stride(0), masks, masks.stride(0), counts, k)
    meta = dict(G=G, GP=gp, KP=kp, HAS_LEN=topk_length is not None, WIDE=wide, num_warps=num_warps)
    block = dups_block(groups)  # (DSATTN_DUPS_BLOCK checked before any kernel)
    _fast(_group_union_kernel, (groups,), *args, INLINE_DUPS=inline, **meta)
    if not inline:
        _launch_dups(args, groups, block, **meta)


# build_groups' kernels: "auto" (the default: "dense_fused" where the dense map fits, else the hash table),
# "dense_fused" (each group's map built AND compacted in shared memory by one Gluon program, then the repeated-slot
# kernel; grouping_smem.py), "dense_smem" (the map built in shared memory by one Gluon program, then the compaction
# kernel; under the interpreter, or without Gluon, both take the global-memory map), "dense" (the global-memory map
# where it fits: a clear and an insert of global atomic ORs; the hash path otherwise, never an error), "hash" (the
# table, 4 launches), "hash1" (the same, one program a group, 1 launch) or "sort" (one tl.sort a group). auto took
# "dense" until session 18: dense_smem's build is 2.1-3.0x faster at G 8 / 4 and 1.7x at G 2 and the prefill at 16 /
# 32 heads 4-6% (H200, bench/results/grouping_s18.txt, bench/results/ab_s18_grouping_*.json); and "dense_smem" until
# session 37: dense_fused's build at s_q 1024 G 8 / 4 / 2 12.5 / 11.1 / 13.3 us against 16.9 / 24.1 / 41.1, at 8192
# 81 / 82 / 88 against 99 / 158 / 293, and the prefill 1.035x / 1.049x / 1.058x faster at 8 / 16 / 32 heads, s_q
# 1024 (1.014x / 1.025x / 1.047x at 8192), outputs bit-equal (H200, bench/logs/s37/call2/,
# bench/results/ab_s37_fused_*.json). DSATTN_GROUPING_IMPL overrides it (read at import, and again at each call where
# set, so that `dsattn bench ab` can switch it: _impl)
IMPLS = ("auto", "dense", "dense_smem", "dense_fused", "hash", "hash1", "sort")
IMPL = os.environ.get("DSATTN_GROUPING_IMPL", "auto").strip().lower() or "auto"
if IMPL not in IMPLS:
    raise ValueError(f"DSATTN_GROUPING_IMPL must be one of {', '.join(IMPLS)}, got {IMPL!r}")


def _impl() -> str:
    """DSATTN_GROUPING_IMPL where set now (validated), else IMPL (the tests set IMPL itself)."""
    impl = os.environ.get("DSATTN_GROUPING_IMPL", "").strip().lower()
    if not impl:
        return IMPL
    if impl not in IMPLS:
        raise ValueError(f"DSATTN_GROUPING_IMPL must be one of {', '.join(IMPLS)}, got {impl!r}")
    return impl


DENSE_WORDS = 4096         # largest dense map (int32 words a group) the compaction holds in registers (sm_90a:
                           # 80 registers at 8 warps; 8192 words at 16 warps: 128 and 16 bytes of spill)
DENSE_INSERT = (512, 4)    # dense insert: slots a program (a power of 2), num_warps
DENSE_REBUILD = True       # groups with a repeated slot rebuilt the sort path's way (False: counts -1; tests)
DENSE_INLINE = False       # the rebuild inside the compaction (True) or in _group_union_dups_kernel after it
DENSE_COMPACT_WARPS = 0    # compaction num_warps (0: 4 / 8 / 16 by map size; the bench's --dense-compact sweeps it)
HASH_W = 4             # cells a probing lane reads per round (a power of 2; cut to one that divides G * K)
HASH_MAX_ROUNDS = 256  # insert rounds before a program gives its group up to the finish
HASH_FINISH_TURNS = 4  # the finish (_finish_group) probes a block up to this many turns of the table, after which
                       # the group is rebuilt in slot order (0: no finish, a give-up goes straight to the rebuild:
                       # sessions 10-46's behaviour, whose entries' order depended on timing; bench/tests). In the
                       # finish a carried key never passes a whole turn (every cell then holds a larger key: more
                       # keys than cells), so four are a safety bound, not a limit expected to be reached.
HASH_FINISH_BLOCK = 2048  # slots a probe block of the finish (the compaction's 16 warps, as hash1's step)
HASH_SORTED_LOAD = 0.85   # a union filling this fraction of its table (G * K cells) or more is rebuilt in slot order:
                          # that is where inserts give up (their probe chains grow as 1 / (1 - load)^2), and a
                          # group that gave up there is rebuilt without a finish, whose single program is slow in a
                          # nearly full table (session 47: 10.7 ms against 1.4 ms, random lists, G 4, s_q 1024)


def _finish_rounds(ts: int, w: int) -> int:
    """The finish's round bound for a table of ts cells read w a round (0 when HASH_FINISH_TURNS is 0)."""
    return HASH_FINISH_TURNS * (ts // w + 1)


def _sorted_at(ts: int, load: float | None = None) -> int:
    """Union size from which a group of a ts-cell table is rebuilt in slot order (load: HASH_SORTED_LOAD unless
    given; > ts: never)."""
    return max(1, min(ts + 1, math.ceil((HASH_SORTED_LOAD if load is None else load) * ts)))
HASH_PROBE = (128, 4)      # insert / mark: slots a program, num_warps: one slot a thread
# sm_90a registers (insert / mark, topk 2048): W 4 at 128 slots / 4 warps 34 / 26 (~15 programs, 1920 slots in
# flight an SM); W 8: 64 / 38 (half the slots in flight); W 8 at 512 slots / 8 warps 116 / 64. The probe loops
# are latency-bound (a dependent load + atomic a round), so slots in flight an SM set the speed (prediction).
HASH_REBUILD = True        # compaction rebuilds the groups it cannot take (False: leaves counts -1; tests)
HASH_COMPACT = (8192, 16)  # compaction: cells a block, num_warps (sm_90a: 114 registers, no spill; 16384
                           # cells spill 160 bytes)


HASH1 = (2048, 16)         # IMPL 'hash1': slots a probe step, num_warps


def _launch_hash1(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups):
    """IMPL 'hash1': _hash_fused_kernel, one program a group, one launch."""
    k = indices.shape[1]
    ts = G * k
    gp, kp = next_pow2(G), next_pow2(k)
    _fast(_hash_fused_kernel, (groups,),
        indices, indices.stride(0), topk_length if topk_length is not None else indices, num_slots, token0, ntokens,
        entries, entries.stride(0), masks, masks.stride(0), counts, k, ts,
        _finish_rounds(ts, min(HASH_W, ts & -ts)), _sorted_at(ts),
        G=G, BK=min(next_pow2(k), HASH1[0]), W=min(HASH_W, ts & -ts), MAX_ROUNDS=HASH_MAX_ROUNDS,
        CB=min(next_pow2(ts), HASH_COMPACT[0]), GP=gp, KP=kp, HAS_LEN=topk_length is not None,
        WIDE=num_slots * gp + gp > 2**31 - 1, REBUILD=HASH_REBUILD, num_warps=1 if interpreting() else HASH1[1])


def _launch_hash(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups):
    """clear, insert, mark, compact (which finishes a group whose table did not settle in HASH_MAX_ROUNDS, and
    rebuilds a group with a repeated slot the sort path's way): four launches, nothing allocated."""
    k = indices.shape[1]
    ts = G * k
    interp = interpreting()
    bk = min(next_pow2(k), HASH_PROBE[0])
    cb = min(next_pow2(ts), HASH_COMPACT[0])
    len_ptr = topk_length if topk_length is not None else indices
    has_len = topk_length is not None
    nb = -(-ts // cb)
    _fast(_hash_clear_kernel, (groups * nb,), entries, entries.stride(0), counts, ts, groups, nb, CB=cb,
          num_warps=1 if interp else 4)
    grid = (groups * G * -(-k // bk),)
    src = (indices, indices.stride(0), len_ptr, num_slots, token0, ntokens, entries, entries.stride(0))
    pw = 1 if interp else HASH_PROBE[1]
    w = min(HASH_W, ts & -ts)             # a power of 2 dividing TS: windows never cross the table's end
    _fast(_hash_insert_kernel, grid, *src, masks, masks.stride(0), counts, k, ts, G=G, BK=bk, W=w,
          MAX_ROUNDS=HASH_MAX_ROUNDS, HAS_LEN=has_len, num_warps=pw)
    _fast(_hash_mark_kernel, grid, *src, masks, masks.stride(0), counts, k, ts, groups, G=G, BK=bk, W=w,
          HAS_LEN=has_len, num_warps=pw)
    gp, kp = next_pow2(G), next_pow2(k)
    _fast(_hash_compact_kernel, (groups,), *src, masks, masks.stride(0), counts, k, ts, _finish_rounds(ts, w),
          _sorted_at(ts), G=G, CB=cb, GP=gp, KP=kp, BK=min(next_pow2(k), HASH_FINISH_BLOCK), W=w, HAS_LEN=has_len,
          WIDE=num_slots * gp + gp > 2**31 - 1, REBUILD=HASH_REBUILD, num_warps=1 if interp else HASH_COMPACT[1])


def dense_layout(num_slots: int, G: int) -> tuple[int, int, int]:
    """(GP, SPW, D) of the dense map: GP = next power of 2 of G bits a slot (its field), SPW = 32 // GP slots a
    word, D = max(1, cdiv(num_slots, SPW)) words a group."""
    gp = next_pow2(G)
    spw = 32 // gp
    return gp, spw, max(1, -(-num_slots // spw))


def dense_fits(num_slots: int, G: int, topk: int) -> bool:
    """Whether the dense path takes this call: its map (dense_layout's D words) fits in the compaction's registers
    (D <= DENSE_WORDS) and in the masks row's first G * topk columns (where it lives), G <= 16 (GP <= 16: two
    fields a word at least) and G * topk < 2^30. Largest num_slots at topk 2048 and DENSE_WORDS 4096: G 8 16384,
    G 4 32768, G 2 65536, G 16 8192 (dense_max_slots)."""
    gp, _, d = dense_layout(num_slots, G)
    return gp <= 16 and d <= min(DENSE_WORDS, G * topk) and G * topk < 1 << 30


def dense_max_slots(G: int, topk: int) -> int:
    """The largest num_slots dense_fits takes (0 if none)."""
    gp, spw, _ = dense_layout(0, G)
    return min(DENSE_WORDS, G * topk) * spw if gp <= 16 and G * topk < 1 << 30 else 0


def fused_max_slots(G: int, topk: int) -> int:
    """The largest num_slots the fused shared-memory path (IMPL 'auto' / 'dense_fused' where grouping_smem.usable)
    takes dense (0 if none): its map of grouping_smem.union_max_words words, compacted CHUNK_WORDS at a time, so not
    bound by the registers as dense_fits is; (slot << GP) must stay below 2^31 (its codes). At topk 2048: G 8 131072,
    G 4 262144, G 2 524288, G 16 32768 slots (dense_fits: 16384 / 32768 / 65536 / 8192)."""
    gp, spw, _ = dense_layout(0, G)
    if gp > 16 or G * topk >= 1 << 30:
        return 0
    from . import grouping_smem
    return min(grouping_smem.union_max_words(G, topk) * spw, (1 << 31) >> gp)


def fused_fits(num_slots: int, G: int, topk: int) -> bool:
    """Whether the fused shared-memory path takes this call dense (num_slots <= fused_max_slots)."""
    return num_slots <= fused_max_slots(G, topk)


def dense_reach(G: int, topk: int, device) -> int:
    """The largest flat source (num_slots) whose union lists build_groups builds on the dense path on `device` under
    the default IMPL: fused_max_slots where the shared-memory kernel runs (a CUDA GPU with Gluon), else
    dense_max_slots (the interpreter's and other devices' kernels)."""
    from . import grouping_smem
    if grouping_smem.usable(torch.device(device)):
        return fused_max_slots(G, topk)
    return dense_max_slots(G, topk)


def _launch_dense(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups,
                  smem_map: bool = False, fused: bool = False):
    """clear, insert, compact (which rebuilds a group with a repeated slot the sort path's way): three launches,
    nothing allocated; the map lives in masks[c, :D] (dense_layout), the entries come out ascending by slot.
    smem_map (IMPL 'dense_smem', where grouping_smem.usable): one launch builds each group's map in shared memory
    and writes it there instead of the clear and the insert. fused (IMPL 'auto' / 'dense_fused', where
    grouping_smem.usable): one launch builds and compacts each group's map in shared memory (the same entries in the
    same order; nothing past counts[c] written), then the repeated-slot kernel."""
    k = indices.shape[1]
    gp, spw, d = dense_layout(num_slots, G)
    interp = interpreting()
    len_ptr = topk_length if topk_length is not None else indices
    has_len = topk_length is not None
    src = (indices, indices.stride(0), len_ptr, num_slots, token0, ntokens)
    block = dups_block(groups)  # (DSATTN_DUPS_BLOCK checked before any kernel)
    if fused:
        from . import grouping_smem
        grouping_smem.launch_union(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups,
                                   gp, spw, d, _fast)
        kp = next_pow2(k)
        if DENSE_REBUILD:
            _launch_dups((*src, entries, entries.stride(0), masks, masks.stride(0), counts, k), groups, block, G=G,
                         GP=gp, KP=kp, HAS_LEN=has_len, WIDE=num_slots * gp + gp > 2**31 - 1,
                         num_warps=16 if gp * kp >= 8192 else 8 if gp * kp >= 2048 else 4)
        return
    if smem_map:
        from . import grouping_smem
        grouping_smem.launch_map(indices, topk_length, num_slots, G, token0, ntokens, masks, counts, groups, gp, spw,
                                 d, _fast)
    else:
        cb = min(next_pow2(d), 1024)
        nb = -(-d // cb)
        _fast(_dense_clear_kernel, (groups * nb,), masks, masks.stride(0), counts, d, groups, nb, CB=cb,
              num_warps=1 if interp else 4)
        bk = min(next_pow2(k), DENSE_INSERT[0])
        _fast(_dense_insert_kernel, (groups * G * -(-k // bk),),
            *src, masks, masks.stride(0), counts, k, G=G, GP=gp, SPW=spw, LOG_SPW=spw.bit_length() - 1, BK=bk,
            HAS_LEN=has_len, num_warps=1 if interp else DENSE_INSERT[1])
    dw, kp = next_pow2(d), next_pow2(k)
    wide = num_slots * gp + gp > 2**31 - 1
    inline = DENSE_INLINE and DENSE_REBUILD
    work = max(dw, gp * kp) if inline else dw
    nw = 1 if interp else (DENSE_COMPACT_WARPS or (16 if work >= 8192 else 8 if work >= 2048 else 4))
    _fast(_dense_compact_kernel, (groups,), *src, entries, entries.stride(0), masks, masks.stride(0), counts, k, d,
          groups, G=G, GP=gp, SPW=spw, DW=dw, KP=kp, HAS_LEN=has_len, WIDE=wide, REBUILD=inline, num_warps=nw)
    if DENSE_REBUILD and not inline:
        _launch_dups((*src, entries, entries.stride(0), masks, masks.stride(0), counts, k), groups, block, G=G,
                     GP=gp, KP=kp, HAS_LEN=has_len, WIDE=wide,
                     num_warps=1 if interp else (16 if gp * kp >= 8192 else 8 if gp * kp >= 2048 else 4))


def build_groups(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts) -> int:
    """Union lists of the query groups of tokens [token0, token0 + ntokens), G tokens a group (the last may
    be partial); group c (0-based) goes to entries[c], masks[c], counts[c] (see the module docstring).

    indices      [T, K] (or [T, 1, K]) int32, contiguous last dim
    topk_length  [T] int32 or None
    num_slots    N: slots outside [0, N) are skipped
    entries      [C, >= G * K] int32, masks the same shape, counts [C] int32, C >= cdiv(ntokens, G)
    Returns the number of groups built, cdiv(ntokens, G). Runs the Triton kernels (IMPL: the dense path where
    dense_fits, else the hash path; or the hash / hash1 / sort path; no allocation) where kernels run (a CUDA
    GPU, or TRITON_INTERPRET=1), else build_groups_reference. Entries come in no particular order (module
    docstring; the dense path's is the reference's).
    """
    indices, groups = _check_args(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts)
    return _build_groups(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups)


def _build_groups(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups) -> int:
    """build_groups after its checks (indices [T, K]; groups = cdiv(ntokens, G)): the grouped prefill's launcher
    calls it per chunk on inputs sparse_mla_prefill has validated."""
    if groups == 0:
        return 0
    if not kernels_available(indices.device):
        return build_groups_reference(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts)
    impl = _impl()
    smem_map = fused = False
    if impl in ("auto", "dense_smem", "dense_fused"):
        from . import grouping_smem
        smem_map = grouping_smem.usable(indices.device)
        fused = smem_map and impl in ("auto", "dense_fused")
        impl = "dense"
    if impl == "dense":
        fits = fused_fits if fused else dense_fits
        impl = "dense" if fits(num_slots, G, indices.shape[1]) else "hash"
    if impl == "dense":
        _launch_dense(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups, smem_map,
                      fused)
    elif impl in ("hash", "hash1") and G * indices.shape[1] < 1 << 30:     # (counts[c] flags bit 30)
        launch = _launch_hash if impl == "hash" else _launch_hash1
        launch(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups)
    else:
        _launch(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups)
    return groups


# ---------------------------------------------------------------------------------------------------
# keys -> slots: union lists built over keys (sparse_mla_prefill's key_slots)
# ---------------------------------------------------------------------------------------------------

TRANSLATE_BLOCK = 1024   # union entries a translation program rewrites

if HAVE_TRITON:
    @triton.jit
    def _translate_kernel(ent_ptr, ent_stride, cnt_ptr, map_ptr, msk_ptr, msk_stride, num_slots, BLOCK: tl.constexpr,
                          CLEAR: tl.constexpr):
        c = tl.program_id(0)
        p = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        live = p < tl.load(cnt_ptr + c)
        row = ent_ptr + c.to(tl.int64) * ent_stride
        key = tl.load(row + p, mask=live, other=0)
        slot = tl.load(map_ptr + key, mask=live, other=-1)
        tl.store(row + p, slot, mask=live)
        if CLEAR:  # an entry whose slot is outside the source: no token's bit
            bad = live & ((slot < 0) | (slot >= num_slots))
            tl.store(msk_ptr + c.to(tl.int64) * msk_stride + p, tl.zeros_like(slot), mask=bad)


def translate_entries(entries, counts, groups: int, key_slots, masks=None, num_slots: int = 0) -> None:
    """entries[c, :counts[c]] = key_slots[entries[c, :counts[c]]] for the first `groups` groups, in place: union lists
    build_groups made over keys (each in [0, len(key_slots)): build_groups skips the others) turned into the slots
    the grouped kernel reads. A key's slot may be any value: one outside the kernel's source is skipped there, as
    any invalid entry. With masks (the lists' masks), such an entry's mask is also cleared (slot outside [0,
    num_slots)), for a kernel that reads validity from the masks alone (gluon_pair). Entries past counts[c] are not
    touched. Inputs as build_groups' (not checked again)."""
    if groups == 0:
        return
    if not kernels_available(entries.device):
        for c in range(groups):
            n = int(counts[c])
            slots = key_slots[entries[c, :n].long()]
            entries[c, :n] = slots
            if masks is not None:
                masks[c, :n][(slots < 0) | (slots >= num_slots)] = 0
        return
    w = entries.shape[1]
    clear = masks is not None
    _fast(_translate_kernel, (groups, -(-w // TRANSLATE_BLOCK)), entries, entries.stride(0), counts, key_slots,
          masks if clear else entries, masks.stride(0) if clear else 0, num_slots, BLOCK=TRANSLATE_BLOCK,
          CLEAR=clear, num_warps=4)


# ---------------------------------------------------------------------------------------------------
# bench hook: python -m dsattn.ops.sparse_mla.grouping --bench
# ---------------------------------------------------------------------------------------------------

def _pairs(ent, msk, cnt, groups):
    """Each group's live (slot, mask) pairs as sorted int64 codes (slot << 17 | mask; -1 past the count)."""
    live = torch.arange(ent.shape[1], device=ent.device)[None, :] < cnt[:groups, None].to(torch.int64)
    code = (ent[:groups].to(torch.int64) << 17) | msk[:groups].to(torch.int64)
    return torch.sort(torch.where(live, code, -1), dim=1, descending=True).values


def _same(got, ref, groups) -> bool:
    """The same counts and, in each group, the same multiset of (slot, mask) entries (any order)."""
    (ent, msk, cnt), (rent, rmsk, rcnt) = got, ref
    if not torch.equal(cnt[:groups], rcnt[:groups]):
        return False
    return torch.equal(_pairs(ent, msk, cnt, groups), _pairs(rent, rmsk, rcnt, groups))


def _time_us(run, iters: int, dev) -> float:
    """Mean microseconds a call: on CUDA, replays of a graph of 10 calls (no host launch cost)."""
    if dev.type != "cuda":
        t0 = time.perf_counter()
        for _ in range(iters):
            run()
        return (time.perf_counter() - t0) * 1e6 / iters
    reps = max(1, iters // 10)
    try:
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            for _ in range(10):
                run()
        step = graph.replay
    except Exception as e:  # noqa: BLE001 - a bench: time the plain launches instead, and say so
        print(f"(graph capture failed, timing plain launches: {e!r})", flush=True)

        def step():
            for _ in range(10):
                run()
    step()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        step()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / (reps * 10)


def _runner(impl, w, knobs, inline_dups):
    """A launch of one implementation: impl 'dense' (dense where it fits, else hash), 'auto' / 'dense_smem'
    (build_groups' rule: the same with the shared-memory map where grouping_smem.usable),
    'hash' / 'hash1' (knobs: module constants, e.g. {HASH_W, HASH_COMPACT, HASH_PROBE} or {DENSE_INSERT}, set
    for the launch) or 'sort' (w: num_warps)."""
    def go(idx, lens, num_slots, g, token0, n, ent, msk, cnt, groups):
        if impl in ("dense", "auto", "dense_smem", "dense_fused"):
            from . import grouping_smem
            mod = globals()
            own = {name: v for name, v in knobs.items() if name != "UNION_WARPS"}
            saved = {name: mod[name] for name in own}
            saved_warps = grouping_smem.UNION_WARPS
            mod.update(own)
            grouping_smem.UNION_WARPS = knobs.get("UNION_WARPS", saved_warps)
            try:
                smem = impl in ("auto", "dense_smem", "dense_fused") and grouping_smem.usable(idx.device)
                fused = smem and impl in ("auto", "dense_fused")
                if (fused_fits if fused else dense_fits)(num_slots, g, idx.shape[1]):
                    _launch_dense(idx, lens, num_slots, g, token0, n, ent, msk, cnt, groups, smem, fused)
                else:
                    _launch_hash(idx, lens, num_slots, g, token0, n, ent, msk, cnt, groups)
            finally:
                mod.update(saved)
                grouping_smem.UNION_WARPS = saved_warps
        elif impl in ("hash", "hash1"):
            mod = globals()
            saved = {name: mod[name] for name in knobs}
            mod.update(knobs)
            try:
                (_launch_hash if impl == "hash" else _launch_hash1)(idx, lens, num_slots, g, token0, n, ent, msk, cnt,
                                                                    groups)
            finally:
                mod.update(saved)
        else:
            _launch(idx, lens, num_slots, g, token0, n, ent, msk, cnt, groups, num_warps=w, inline_dups=inline_dups)
    return go


def _same_order(got, ref, groups) -> bool:
    """The same counts and the same live entries and masks, in the same order (cells past a count not compared)."""
    (ent, msk, cnt), (rent, rmsk, rcnt) = got, ref
    if not torch.equal(cnt[:groups], rcnt[:groups]):
        return False
    live = torch.arange(ent.shape[1], device=ent.device)[None, :] < cnt[:groups, None].to(torch.int64)
    return bool(((ent[:groups] == rent[:groups]) & (msk[:groups] == rmsk[:groups]) | ~live).all())


def _repeat_check(run, first, bufs, groups, repeats, impl, knobs, go, call, sync) -> None:
    """`repeats` more calls, each compared with `first` (counts, live entries and masks, in order: _same_order);
    for hash / hash1 also how many groups came in slot order for their load (the first's counts against the
    variant's HASH_SORTED_LOAD) and how many gave up, counted in as many calls with no finish, no rebuild and
    no load rule (those groups end with counts -1). Prints one line."""
    differ = 0
    for _ in range(repeats):
        for b in bufs:
            b.fill_(-7)
        run()
        sync()
        differ += not _same_order(bufs, first, groups)
    line = f"    repeats {repeats}: {differ} not equal to the first (order too)"
    if impl in ("hash", "hash1"):
        at = _sorted_at(bufs[0].shape[1], knobs.get("HASH_SORTED_LOAD"))
        big = int((first[2][:groups] >= at).sum().item())
        mod = globals()
        saved, saved_knobs = mod["HASH_REBUILD"], dict(knobs)
        knobs.update(HASH_FINISH_TURNS=0, HASH_SORTED_LOAD=2.0)     # (go sets the knobs for its launch)
        mod["HASH_REBUILD"] = False
        try:
            gave = []
            for _ in range(repeats):
                go(*call, *bufs, groups)
                sync()
                gave.append(int((bufs[2][:groups] < 0).sum().item()))
        finally:
            mod["HASH_REBUILD"] = saved
            knobs.clear()
            knobs.update(saved_knobs)
        line += (f"; groups in slot order for their load: {big}; groups that gave up a call (of {groups}): "
                 f"min {min(gave)} max {max(gave)}")
    print(line, flush=True)


def _bench(args) -> None:
    """Timings first (one compile per G and variant), then the SPEC 3 edge cases on the device with each
    implementation's first variant (a second compile: topk_length), so a time limit cuts the checks, not the
    timings. Outputs are also compared with those after the timed calls (same_after_timing: counts, live entries
    and masks in order; the hash paths' order is a function of the lists since session 47, the dense and sort
    paths' ascending; cells past a count are not compared: a group rebuilt after its compaction leaves there
    what its table held, which may differ call to call and is never read)."""
    from ...bench.kernels_mla import overlap_indices

    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    variants = []
    for impl in args.impl:
        if impl in ("dense_smem", "auto", "dense_fused"):
            from . import grouping_smem
            for dc in args.dense_compact or [DENSE_COMPACT_WARPS]:
                for uw in (args.union_warps or [grouping_smem.UNION_WARPS]) if impl != "dense_smem" else [None]:
                    knobs = dict(DENSE_COMPACT_WARPS=dc)
                    if uw:
                        knobs["UNION_WARPS"] = uw
                    variants.append((impl, None, knobs, f"{impl} compact warps {dc or 'auto'}"
                                     + (f" union warps {uw}" if uw else "")))
        elif impl == "dense":
            for di in args.dense_insert or [f"{DENSE_INSERT[0]}:{DENSE_INSERT[1]}"]:
                for dc in args.dense_compact or [DENSE_COMPACT_WARPS]:
                    knobs = dict(DENSE_INSERT=tuple(int(x) for x in di.split(":")), DENSE_COMPACT_WARPS=dc)
                    variants.append((impl, None, knobs, f"{impl} insert {di} compact warps {dc or 'auto'}"))
        elif impl == "hash1":
            for hw in args.hash_w or [HASH_W]:
                for h1 in args.hash1 or [f"{HASH1[0]}:{HASH1[1]}"]:
                    for ft in args.hash_finish_turns or [HASH_FINISH_TURNS]:
                        for sl in args.hash_sorted_load or [HASH_SORTED_LOAD]:
                            knobs = dict(HASH_W=hw, HASH1=tuple(int(x) for x in h1.split(":")),
                                         HASH_FINISH_TURNS=ft, HASH_SORTED_LOAD=sl)
                            variants.append((impl, None, knobs, f"hash1 W {hw} step {h1} finish {ft} sorted {sl}"))
        elif impl == "hash":
            for hw in args.hash_w or [HASH_W]:
                for hc in args.hash_compact or [f"{HASH_COMPACT[0]}:{HASH_COMPACT[1]}"]:
                    for hp in args.hash_probe or [f"{HASH_PROBE[0]}:{HASH_PROBE[1]}"]:
                        for ft in args.hash_finish_turns or [HASH_FINISH_TURNS]:
                            for sl in args.hash_sorted_load or [HASH_SORTED_LOAD]:
                                knobs = dict(HASH_W=hw, HASH_COMPACT=tuple(int(x) for x in hc.split(":")),
                                             HASH_PROBE=tuple(int(x) for x in hp.split(":")), HASH_FINISH_TURNS=ft,
                                             HASH_SORTED_LOAD=sl)
                                variants.append((impl, None, knobs,
                                                 f"hash W {hw} probe {hp} compact {hc} finish {ft} sorted {sl}"))
        else:
            variants += [(impl, w, None, f"sort warps {w or 'auto'}{' inline' if args.inline_dups else ''}")
                         for w in (args.warps or [None])]
    for g in args.groups:
        if any(v[0] in ("dense", "dense_smem") for v in variants):
            print(f"G {g} topk {args.topk} s_kv {args.s_kv}: "
                  f"{'dense' if dense_fits(args.s_kv, g, args.topk) else 'HASH (past the dense limit)'} "
                  f"(dense up to {dense_max_slots(g, args.topk)} slots)", flush=True)
        if any(v[0] in ("auto", "dense_fused") for v in variants):
            print(f"G {g} topk {args.topk} s_kv {args.s_kv}, fused: "
                  f"{'dense' if fused_fits(args.s_kv, g, args.topk) else 'HASH (past the fused limit)'} "
                  f"(up to {fused_max_slots(g, args.topk)} slots)", flush=True)
    for s_q in args.s_q:
        idx = overlap_indices(s_q, args.s_kv, args.topk, dev, noise=args.noise)
        for g in args.groups:
            groups = -(-s_q // g)
            shape = [((groups, g * args.topk), torch.int32)] * 2 + [((groups,), torch.int32)]
            bufs = [torch.empty(s, dtype=dt, device=dev) for s, dt in shape]
            ref = [torch.empty_like(x) for x in bufs]
            build_groups_reference(idx, None, args.s_kv, g, 0, s_q, *ref)
            for impl, w, hw, tag in variants:
                go = _runner(impl, w, hw, args.inline_dups)
                run = (lambda: go(idx, None, args.s_kv, g, 0, s_q, *bufs, groups))
                run()
                sync()
                ok = _same(bufs, ref, groups)
                first = [x.clone() for x in bufs]
                us = _time_us(run, args.iters, dev)
                sync()
                det = _same_order(bufs, first, groups)
                mean = bufs[2].double().mean().item()
                rebuilt = int((bufs[2][:groups] < 0).sum().item())
                print(f"s_q {s_q:5d} topk {args.topk} G {g} {tag}: {us:8.1f} us  union/topk {mean / args.topk:.3f} "
                      f"(of the {g} lists: {mean / (g * args.topk):.3f})  matches_reference {ok}  "
                      f"same_after_timing {det}{f'  NEGATIVE_COUNTS {rebuilt}' if rebuilt else ''}", flush=True)
                if args.repeats:
                    _repeat_check(run, first, bufs, groups, args.repeats, impl, hw, go,
                                  (idx, None, args.s_kv, g, 0, s_q), sync)
    if args.skip_edge:
        return
    # SPEC 3 edge cases: repeated slots (the atomic-OR branch), -1, past the end, topk_length
    gen = torch.Generator(device=dev).manual_seed(1)
    t = 64
    bad = overlap_indices(t, args.s_kv, args.topk, dev)
    bad[:, 1::97] = bad[:, :1]
    bad[::3, 5::11] = -1
    bad[1::4, 7::13] = args.s_kv + 3
    lens = torch.randint(0, args.topk + 1, (t,), dtype=torch.int32, device=dev, generator=gen)
    for g in args.groups:
        eg = -(-t // g)
        shape = [((eg, g * args.topk), torch.int32)] * 2 + [((eg,), torch.int32)]
        ref = [torch.empty(s, dtype=dt, device=dev) for s, dt in shape]
        build_groups_reference(bad, lens, args.s_kv, g, 0, t, *ref)
        firsts = [v for i, v in enumerate(variants) if v[0] not in [u[0] for u in variants[:i]]]
        for impl, w, hw, tag in firsts:                      # each implementation's first variant: compiles
            got = [torch.full_like(x, -7) for x in ref]
            _runner(impl, w, hw, args.inline_dups)(bad, lens, args.s_kv, g, 0, t, *got, eg)
            sync()
            print(f"edge cases (duplicates, -1, past the end, topk_length) G {g} {tag}: "
                  f"matches_reference {_same(got, ref, eg)}", flush=True)


def _simulate(args) -> None:
    """The hash path's probe loops replayed on the CPU (numpy) for the first groups of overlap indices: one
    program at a time, its lanes' loads each round before their atomics (applied lane by lane), as the
    interpreter runs them. Prints rounds a program (the loop runs until its slowest lane is done), rounds a
    lane, and the table's load. No contention between programs: a GPU runs them at once (fewer slots found
    already placed, more retries), so these are lower bounds of a kind."""
    import numpy as np
    from ...bench.kernels_mla import overlap_indices

    def home(s, ts):
        return ((s.astype(np.int64) * 2654435761) & 0xFFFFFFFF) * ts >> 32

    idx = overlap_indices(args.sim_tokens, args.s_kv, args.topk, torch.device("cpu")).numpy()
    bk = args.sim_probe
    for g in args.groups:
        for w in args.hash_w or [HASH_W]:
            ts = g * args.topk
            w = min(w, ts & -ts)
            ins, lanes, mark, load = [], [], [], []
            for c in range(args.sim_tokens // g):
                lists = idx[c * g:(c + 1) * g]
                tab = np.full(ts, -1, np.int64)
                for j in range(g):
                    for kb in range(0, args.topk, bk):
                        key = lists[j, kb:kb + bk].astype(np.int64)
                        pend = key >= 0
                        key = np.where(pend, key, 0)
                        p = home(key, ts)
                        rounds, lane = 0, np.zeros(len(key), np.int64)
                        while pend.any() and rounds < HASH_MAX_ROUNDS:
                            base = p - p % w
                            offs = base[:, None] + np.arange(w)[None, :]
                            vals = tab[offs]
                            cand = (vals <= key[:, None]) & (offs >= p[:, None])
                            fw = np.where(cand.any(1), cand.argmax(1), w)
                            for i in np.nonzero(pend)[0]:
                                lane[i] += 1
                                if fw[i] == w:
                                    p[i] = base[i] + w if base[i] + w < ts else 0
                                    continue
                                tgt = base[i] + fw[i]
                                if vals[i, fw[i]] == key[i]:
                                    pend[i] = False
                                    continue
                                old = tab[tgt]
                                tab[tgt] = max(old, key[i])
                                if old == -1 or old == key[i]:
                                    pend[i] = False
                                elif old < key[i]:
                                    key[i] = old
                                p[i] = tgt + 1 if tgt + 1 < ts else 0
                            rounds += 1
                        ins.append(rounds)
                        lanes.extend(lane[lists[j, kb:kb + bk] >= 0])
                where = {int(v): i for i, v in enumerate(tab) if v >= 0}
                for j in range(g):
                    for kb in range(0, args.topk, bk):
                        key = lists[j, kb:kb + bk]
                        key = key[key >= 0]
                        if len(key):
                            h = home(key, ts)
                            d = (np.array([where[int(k)] for k in key]) - (h - h % w)) % ts
                            mark.append(int((d // w).max()) + 1)
                load.append((tab >= 0).mean())
            print(f"G {g} W {w} {bk} slots a program: insert rounds a program {np.mean(ins):.2f} (max {max(ins)}), "
                  f"a lane {np.mean(lanes):.2f}; mark rounds a program {np.mean(mark):.2f}; table load "
                  f"{np.mean(load):.2f}", flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", action="store_true", help="time build_groups on overlap indices (CUDA)")
    p.add_argument("--s-q", type=int, nargs="+", default=[1024, 8192])
    p.add_argument("--s-kv", type=int, default=16384)
    p.add_argument("--topk", type=int, default=2048)
    p.add_argument("--groups", type=int, nargs="+", default=[8, 4, 2])
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--inline-dups", action="store_true", help="one kernel, the repeated-slot branch inline")
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: a dry run under TRITON_INTERPRET=1
    p.add_argument("--warps", type=int, nargs="*", default=None, help="sort: num_warps to sweep (default: its own)")
    p.add_argument("--impl", nargs="+", choices=("dense", "dense_smem", "dense_fused", "auto", "hash", "hash1", "sort"),
                   default=["auto"], help="kernels to time (dense / auto: dense where it fits, else hash; dense_smem: "
                   "the dense path with the map built in shared memory)")
    p.add_argument("--dense-insert", nargs="*", default=None,
                   help="dense: insert SLOTS:WARPS, SLOTS a power of 2 (sweep; default DENSE_INSERT)")
    p.add_argument("--dense-compact", type=int, nargs="*", default=None,
                   help="dense: compaction num_warps, 0 = by map size (sweep; default DENSE_COMPACT_WARPS)")
    p.add_argument("--hash1", nargs="*", default=None, help="hash1: SLOTS:WARPS a probe step (sweep; default HASH1)")
    p.add_argument("--hash-w", type=int, nargs="*", default=None,
                   help="hash: cells a lane reads a round, powers of 2 (sweep; default HASH_W)")
    p.add_argument("--skip-edge", action="store_true", help="timings only (no edge-case compiles)")
    p.add_argument("--simulate", action="store_true", help="hash: replay the probe loops on the CPU (numpy)")
    p.add_argument("--sim-tokens", type=int, default=64, help=argparse.SUPPRESS)
    p.add_argument("--sim-probe", type=int, default=HASH_PROBE[0], help=argparse.SUPPRESS)
    p.add_argument("--hash-probe", nargs="*", default=None,
                   help="hash: insert / mark SLOTS:WARPS, SLOTS a power of 2 (sweep; default HASH_PROBE)")
    p.add_argument("--hash-compact", nargs="*", default=None,
                   help="hash: compaction CELLS:WARPS, CELLS a power of 2 (sweep; default HASH_COMPACT)")
    p.add_argument("--hash-finish-turns", type=int, nargs="*", default=None,
                   help="hash / hash1: HASH_FINISH_TURNS (sweep; 0: a give-up goes straight to the rebuild)")
    p.add_argument("--union-warps", type=int, nargs="*", default=None,
                   help="auto / dense_fused: grouping_smem.UNION_WARPS, 8 or 16 (sweep; the fused program's warps)")
    p.add_argument("--hash-sorted-load", type=float, nargs="*", default=None,
                   help="hash / hash1: HASH_SORTED_LOAD (sweep; 2: no union rebuilt for its load)")
    p.add_argument("--noise", type=float, default=0.5,
                   help="overlap indices' per-token noise (large: independent random lists, nearly full hash tables)")
    p.add_argument("--repeats", type=int, default=0,
                   help="after the timing, this many more calls, each compared bit for bit with the first output; "
                        "hash / hash1 also count the groups whose insert gave up, in as many calls without finish "
                        "or rebuild")
    args = p.parse_args(argv)
    if args.simulate:
        _simulate(args)
        return
    if not args.bench:
        p.print_help()
        return
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--bench needs a CUDA GPU")
    _bench(args)


if __name__ == "__main__":
    main()
