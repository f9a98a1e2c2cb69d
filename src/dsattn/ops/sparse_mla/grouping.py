"""Query-group union lists for the grouped sparse MLA prefill kernel.

The grouped prefill kernel runs one program over M = 64 rows: G neighbouring query tokens x hpt heads.
It gathers the UNION of the G tokens' top-k lists once and masks each score by whether the row's token
listed that entry. This module builds those unions:

    group_shape(num_heads)                      -> (hpt, G)
    prefill_scratch_spec(num_tokens, heads, K)  -> the buffers build_groups fills ([] when G == 1)
    build_groups(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts)
    build_groups_reference(...)                 the same in plain PyTorch (the tests' twin)

Union entries (SPEC 3): entry ``i`` of token ``t``'s list is valid iff ``0 <= indices[t, i] < num_slots``
and ``i < topk_length[t]`` (when given). A slot listed twice by one token counts twice, so union entries
are (slot, occurrence) pairs: entry (s, k) carries bit j of its mask when token j of the group lists s
more than k times. Entries are ordered by ascending slot, then occurrence (it keeps the kernel's gathers
local). For group c (0-based within the chunk): ``entries[c, :counts[c]]`` are the slots,
``masks[c, :counts[c]]`` the token bits; entries past ``counts[c]`` are never written (unspecified).

The Triton kernel (one program per group) sorts the G * K codes ``slot * GP + j`` (GP = next power of 2
of G; invalid entries get a sentinel that sorts last) with one ``tl.sort``, and compacts the sorted runs of
equal slots into entries, each mask a segmented OR of the run's token bits. Only when some token of the
group lists a slot twice (never from the indexer) does it take the slower branch: occurrence ranks from
the runs of equal codes, entry (s, k) at base_s + k, masks by atomic OR after zeroing. It allocates
nothing; build_groups launches it once.
"""
from __future__ import annotations

import argparse
import math

import torch

from ..._checks import check_tensor
from .._triton import HAVE_TRITON, interpreting, kernels_available, triton, tl

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


def _chunk_groups(g: int, topk: int) -> int:
    """Groups per chunk: entries + masks ((C, G * topk) int32 each) within SCRATCH_CAP_BYTES."""
    return max(1, SCRATCH_CAP_BYTES // (2 * 4 * g * topk))


def prefill_scratch_spec(num_tokens: int, num_heads: int, topk: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """Scratch of the grouped prefill kernel: [] when G == 1 (group_shape), else

        [((C, G * topk), int32),   entries: union slots of each group, ascending
         ((C, G * topk), int32),   masks: bit j set when token j of the group lists the entry
         ((C,), int32)]            counts: entries per group

    C = min(cdiv(num_tokens, G), chunk) groups, chunk = max(1, 64 MiB // (8 * G * topk)) so that entries
    and masks together stay within 64 MiB (G 8, topk 2048: 512 groups = 4096 tokens, 64 MiB; the
    launcher builds and runs the tokens in chunks of C * G).
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
    def _group_union_kernel(idx_ptr, idx_stride, len_ptr, num_slots, token0, ntokens,
                            ent_ptr, ent_stride, msk_ptr, msk_stride, cnt_ptr, K,
                            G: tl.constexpr, GP: tl.constexpr, KP: tl.constexpr,
                            HAS_LEN: tl.constexpr, WIDE: tl.constexpr):
        c = tl.program_id(0)
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
            SENT = tl.full((), 9223372036854775807, tl.int64)
            code = tl.where(ok, slot.to(tl.int64) * GP + j, SENT)
        else:
            SENT = tl.full((), 2147483647, tl.int32)
            code = tl.where(ok, slot * GP + j, SENT)
        code = tl.sort(tl.reshape(code, [N]))              # by slot, then token; invalid last
        pos = tl.arange(0, N)
        valid = code != SENT
        prev = _shift(code, pos, 1, N)
        nxt = _shift(code, pos, -1, N)
        s = code // GP
        bit = (1 << (code % GP)).to(tl.int32)
        same = (pos > 0) & (prev == code) & valid          # a token lists this slot again
        first = valid & ((pos == 0) | (prev // GP != s))   # first element of a slot's run
        last = valid & ((pos == N - 1) | (nxt // GP != s) | (nxt == SENT))
        f = first.to(tl.int32)
        ent_row = ent_ptr + c.to(tl.int64) * ent_stride
        msk_row = msk_ptr + c.to(tl.int64) * msk_stride
        if tl.max(same.to(tl.int32), 0) == 0:
            # every slot once per token: one entry per slot run, its mask the OR over the run
            at = tl.cumsum(f, 0) - 1
            _, m = tl.associative_scan((f, bit), 0, _seg_or_combine)
            tl.store(ent_row + at, s.to(tl.int32), mask=first)
            tl.store(msk_row + at, m, mask=last)
            tl.store(cnt_ptr + c, tl.sum(f, 0))
        else:
            # a token lists a slot more than once (never from the indexer): slot s has entries (s, 0..kmax),
            # kmax its largest occurrence; entry (s, k) sits at base_s + k and ORs the bits of its tokens.
            # occurrence rank: position within the run of equal codes
            occ = tl.where(valid, pos - tl.associative_scan(tl.where(same, 0, pos), 0, _max_combine), 0)
            _, kmax = tl.associative_scan((f, occ), 0, _seg_max_combine)
            size = tl.where(last, kmax + 1, 0)
            end = tl.cumsum(size, 0)                       # entries up to and including this slot run
            base = tl.associative_scan(tl.where(first, end - size, 0), 0, _max_combine)
            at = base + occ
            tl.store(msk_row + at, tl.zeros_like(bit), mask=valid)
            tl.debug_barrier()
            tl.store(ent_row + at, s.to(tl.int32), mask=valid)
            tl.atomic_or(msk_row + at, bit, mask=valid, sem="relaxed")
            tl.store(cnt_ptr + c, tl.sum(size, 0))


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _launch(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups, num_warps=None):
    k = indices.shape[1]
    gp, kp = _next_pow2(G), _next_pow2(k)
    wide = num_slots * gp + gp > 2**31 - 1
    if num_warps is None:
        num_warps = 1 if interpreting() else (16 if gp * kp >= 8192 else 8 if gp * kp >= 2048 else 4)
    _group_union_kernel[(groups,)](
        indices, indices.stride(0), topk_length if topk_length is not None else indices, num_slots, token0,
        ntokens, entries, entries.stride(0), masks, masks.stride(0), counts, k,
        G=G, GP=gp, KP=kp, HAS_LEN=topk_length is not None, WIDE=wide, num_warps=num_warps)


def build_groups(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts) -> int:
    """Union lists of the query groups of tokens [token0, token0 + ntokens), G tokens a group (the last may
    be partial); group c (0-based) goes to entries[c], masks[c], counts[c] (see the module docstring).

    indices      [T, K] (or [T, 1, K]) int32, contiguous last dim
    topk_length  [T] int32 or None
    num_slots    N: slots outside [0, N) are skipped
    entries      [C, >= G * K] int32, masks the same shape, counts [C] int32, C >= cdiv(ntokens, G)
    Returns the number of groups built, cdiv(ntokens, G). Runs the Triton kernel (no allocation) where
    kernels run (a CUDA GPU, or TRITON_INTERPRET=1), else build_groups_reference.
    """
    indices, groups = _check_args(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts)
    if groups == 0:
        return 0
    if not kernels_available(indices.device):
        return build_groups_reference(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts)
    _launch(indices, topk_length, num_slots, G, token0, ntokens, entries, masks, counts, groups)
    return groups


# ---------------------------------------------------------------------------------------------------
# bench hook: python -m dsattn.ops.sparse_mla.grouping --bench
# ---------------------------------------------------------------------------------------------------

def _bench(args) -> None:
    from ...bench.kernels_mla import overlap_indices

    dev = torch.device("cuda")
    for s_q in args.s_q:
        idx = overlap_indices(s_q, args.s_kv, args.topk, dev)
        for g in args.groups:
            shape = [((-(-s_q // g), g * args.topk), torch.int32)] * 2 + [((-(-s_q // g),), torch.int32)]
            ent, msk, cnt = (torch.empty(s, dtype=dt, device=dev) for s, dt in shape)
            run = (lambda: build_groups(idx, None, args.s_kv, g, 0, s_q, ent, msk, cnt))
            run()
            torch.cuda.synchronize()
            ref = [torch.empty_like(x) for x in (ent, msk, cnt)]
            build_groups_reference(idx, None, args.s_kv, g, 0, s_q, *ref)
            n = cnt.to(torch.int64)
            live = torch.arange(ent.shape[1], device=dev)[None, :] < n[:, None]
            ok = (torch.equal(cnt, ref[2]) and torch.equal(ent[live], ref[0][live])
                  and torch.equal(msk[live], ref[1][live]))
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.iters):
                run()
            end.record()
            torch.cuda.synchronize()
            us = start.elapsed_time(end) * 1e3 / args.iters
            print(f"s_q {s_q:5d} topk {args.topk} G {g}: {us:8.1f} us  union/topk {n.double().mean().item() / args.topk:.3f}"
                  f"  (x{g} tokens: {n.double().mean().item() / (g * args.topk):.3f} of the lists)  matches_reference {ok}",
                  flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", action="store_true", help="time build_groups on overlap indices (CUDA)")
    p.add_argument("--s-q", type=int, nargs="+", default=[1024, 8192])
    p.add_argument("--s-kv", type=int, default=16384)
    p.add_argument("--topk", type=int, default=2048)
    p.add_argument("--groups", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--iters", type=int, default=50)
    args = p.parse_args(argv)
    if not args.bench:
        p.print_help()
        return
    if not torch.cuda.is_available():
        raise SystemExit("--bench needs a CUDA GPU")
    _bench(args)


if __name__ == "__main__":
    main()
