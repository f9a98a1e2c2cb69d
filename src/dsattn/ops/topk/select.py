"""Top-k of logits rows by selection, not sorting: one program per row.

Keys: an fp32 logit maps to a uint32 whose unsigned order is the float order (flip every bit of a
negative, set the sign bit of a positive; -0.0 first becomes +0.0, so the two tie). The k-th largest
key T is found by deciding its bits from the top (``_kth_largest``: 32 counting steps over keys held in
registers), then the row's keys > T and the first (k - #keys > T) keys == T in column order are written
out, which breaks ties toward the lower column.

A row of at most CAP (a power of two >= 2k; v4 takes twice the usual one for few rows a little wider than it,
``select_capacity``) valid columns is selected in registers directly. A longer row is first cut down to candidates:

1. sample SAMPLE keys (groups of 8 neighbours spread over the row) and take the sample's key of rank
   r = (k + CAP) / 2 * SAMPLE / L as a lower bound tau: about (k + CAP) / 2 of the row's keys are >= tau;
2. one pass over the row stores the columns of keys >= tau, in column order, into the row's scratch;
3. when their number c is in [k, CAP] (the k-th largest is among them), they are reloaded and selected
   in registers. Otherwise (a sample that misjudged the row, e.g. many equal logits) the row falls back
   to an exact radix select over the full row: four passes of 256-bin histograms, then one pass that
   writes the result.

So a typical long row costs one read of the row plus a small sample and the candidates' reloads.

That is v3 (``launch_topk_v3``, one fused kernel, one program per row; ``launch_topk(..., version=3)``).
v4 (``launch_topk_v4``, the default: ``DEFAULT_VERSION`` below) splits the same algorithm over three
launches so that the streaming pass runs in small programs of its own (a few warps, several per row
when rows are few) and the select in programs that do nothing else; see the v4 section below and
notes/indexer.md. For few long rows (a decode step over long contexts) v4 runs the same steps in one launch
(``_v4_fused``): a program per tile of a row finds the threshold itself and stores its candidates, and the
last of the row's programs to finish selects them.

On sm_90 (since session 48) rows that all fit the capacity are selected by gluon_select.select_rows_kernel instead
of ``_v4_select``: radix passes of 8 bits over shared-memory histograms, the same columns in the same order
(launch_topk_v4's ``gluon``; gluon_select's docstring has the design and the numbers).
"""
from __future__ import annotations

import torch

from .._triton import sm_count, tl, triton
from . import gluon_select

_GROUP = 8  # sampled neighbours per group: one 32-byte sector of fp32


def candidate_capacity(k: int) -> int:
    """Candidates a row can hold in registers: the next power of two >= 2k, at least 16."""
    return max(16, 1 << (2 * k - 1).bit_length())


if triton is not None:

    @triton.jit
    def _ordered_key(x):
        """fp32 -> uint32 whose unsigned order is the float order (-0.0 taken as +0.0: equal logits tie)."""
        bits = (x + 0.0).to(tl.uint32, bitcast=True)  # -0.0 + 0.0 = +0.0
        neg = (bits >> 31) != 0
        return tl.where(neg, bits ^ 0xFFFFFFFF, bits | 0x80000000)

    @triton.jit
    def _add3(a0, a1, a2, b0, b1, b2):
        return a0 + b0, a1 + b1, a2 + b2

    @triton.jit
    def _kth_largest(key, valid, k):
        """The k-th largest of the valid keys (uint32 scalar); 0 when fewer than k are valid.

        Two bits per step: the counts at three thresholds come out of one reduction (a tuple reduce
        shares its shuffles and barrier), so a row pays 16 reduction latencies instead of 32."""
        t = tl.full([], 0, tl.uint32)
        for i in range(16):
            shift = 30 - 2 * i
            c1, c2, c3 = tl.reduce(((valid & (key >= (t | (tl.full([], 1, tl.uint32) << shift)))).to(tl.int32),
                                    (valid & (key >= (t | (tl.full([], 2, tl.uint32) << shift)))).to(tl.int32),
                                    (valid & (key >= (t | (tl.full([], 3, tl.uint32) << shift)))).to(tl.int32)),
                                   0, _add3)
            digit = (c1 >= k).to(tl.uint32) + (c2 >= k).to(tl.uint32) + (c3 >= k).to(tl.uint32)
            t = t | (digit << shift)
        return t

    @triton.jit
    def _emit_registers(key, col, valid, k, out_row):
        """Write the k largest valid (key, col) entries' columns to out_row[0 .. n); returns n."""
        t = _kth_largest(key, valid, k)
        gt = valid & (key > t)
        eq = valid & (key == t) & (t > 0)
        n_gt = tl.sum(gt.to(tl.int32), axis=0)
        tie_rank = tl.cumsum(eq.to(tl.int32), axis=0)
        sel = gt | (eq & (tie_rank <= k - n_gt))
        pos = tl.cumsum(sel.to(tl.int32), axis=0) - 1
        tl.store(out_row + pos, col, mask=sel)
        return tl.sum(sel.to(tl.int32), axis=0)

    @triton.jit
    def _radix_full_row(row, n_valid, k, out_row, BLOCK: tl.constexpr):
        """Exact select over the whole row in memory (the fallback); returns the number written (k)."""
        bins = tl.arange(0, 256)
        prefix = tl.full([], 0, tl.uint32)
        need = k
        n_tiles = tl.cdiv(n_valid, BLOCK)
        for d in range(4):
            shift = 24 - 8 * d
            # bits above this digit must equal the prefix found so far (none for the first digit)
            high = (tl.full([], 0xFFFFFFFF, tl.uint64) << (shift + 8)).to(tl.uint32)
            hist = tl.zeros([256], dtype=tl.int32)
            for i in range(n_tiles):
                offs = i * BLOCK + tl.arange(0, BLOCK)
                key = _ordered_key(tl.load(row + offs, mask=offs < n_valid, other=0.0))
                match = (offs < n_valid) & (((key ^ prefix) & high) == 0)
                digit = ((key >> shift) & 255).to(tl.int32)
                hist += tl.histogram(digit, 256, mask=match)
            suffix = tl.cumsum(hist, axis=0, reverse=True)
            b = tl.sum((suffix >= need).to(tl.int32), axis=0) - 1
            need -= tl.sum(tl.where(bins > b, hist, 0), axis=0)
            prefix = prefix | (b.to(tl.uint32) << shift)
        # prefix is now the k-th largest key; `need` of its ties are taken, lowest columns first
        written = 0
        ties = 0
        for i in range(n_tiles):
            offs = i * BLOCK + tl.arange(0, BLOCK)
            valid = offs < n_valid
            key = _ordered_key(tl.load(row + offs, mask=valid, other=0.0))
            gt = valid & (key > prefix)
            eq = valid & (key == prefix)
            tie_rank = ties + tl.cumsum(eq.to(tl.int32), axis=0)
            sel = gt | (eq & (tie_rank <= need))
            pos = written + tl.cumsum(sel.to(tl.int32), axis=0) - 1
            tl.store(out_row + pos, offs, mask=sel)
            written += tl.sum(sel.to(tl.int32), axis=0)
            ties += tl.sum(eq.to(tl.int32), axis=0)
        return written

    @triton.jit
    def _compact(row, n_valid, tau, scr, CAP: tl.constexpr, TR: tl.constexpr, TC: tl.constexpr,
                 STAGES: tl.constexpr):
        """Columns of keys >= tau into scr[:CAP] and their keys into scr[CAP:], in column order; returns
        how many there are (all counted, at most CAP stored). A tile is [TR, TC]: each row's positions come from a short scan along the
        row plus one scan over the TR row totals, which is cheaper than one scan over TR * TC."""
        lanes = tl.arange(0, TR)[:, None] * TC + tl.arange(0, TC)[None, :]
        count = 0
        for i in tl.range(tl.cdiv(n_valid, TR * TC), num_stages=STAGES):
            offs = i * (TR * TC) + lanes
            ok = offs < n_valid
            key = _ordered_key(tl.load(row + offs, mask=ok, other=0.0))
            keep = (ok & (key >= tau)).to(tl.int32)
            per_row = tl.sum(keep, axis=1)
            before = tl.cumsum(per_row, axis=0) - per_row
            pos = count + before[:, None] + tl.cumsum(keep, axis=1) - 1
            store = (keep != 0) & (pos < CAP)
            tl.store(scr + pos, offs, mask=store)
            tl.store(scr + CAP + pos, key.to(tl.int32, bitcast=True), mask=store)
            count += tl.sum(per_row, axis=0)
        return count

    @triton.jit(do_not_specialize=["k"])
    def _topk_kernel(logits, stride_row, lengths, width, out, stride_out, scratch, stride_scratch, k,
                     CAP: tl.constexpr, SAMPLE: tl.constexpr, GROUP: tl.constexpr, PAD_BLOCK: tl.constexpr,
                     TR: tl.constexpr, TC: tl.constexpr, STAGES: tl.constexpr, STOP: tl.constexpr):
        """STOP (timing only): 1 ends after the sample's threshold, 2 after the candidate pass."""
        r = tl.program_id(0).to(tl.int64)
        row = logits + r * stride_row
        out_row = out + r * stride_out
        n_valid = tl.minimum(tl.maximum(tl.load(lengths + r), 0), width)
        cols = tl.arange(0, CAP)
        written = 0
        if n_valid <= CAP:
            valid = cols < n_valid
            key = _ordered_key(tl.load(row + cols, mask=valid, other=0.0))
            written = _emit_registers(key, cols, valid, k, out_row)
        else:
            # 1. a lower bound from a sample: groups of GROUP neighbours spread over the row
            n_groups: tl.constexpr = SAMPLE // GROUP
            spread = n_valid // n_groups
            si = tl.arange(0, SAMPLE)
            skey = _ordered_key(tl.load(row + (si // GROUP) * spread + si % GROUP))
            rank = tl.maximum(((k + CAP) // 2).to(tl.int64) * SAMPLE // n_valid, 1).to(tl.int32)
            tau = _kth_largest(skey, si < SAMPLE, rank)
            if STOP != 1:
                # 2. columns (and keys) of keys >= tau into the scratch row, in column order; a sample
                # that misjudged the row gets two more tries with its rank scaled by target / count
                scr = scratch + r * stride_scratch
                count = _compact(row, n_valid, tau, scr, CAP, TR, TC, STAGES)
                if STOP == 0:
                    tries = 0
                    while ((count < k) | (count > CAP)) & (tries < 2):
                        target = (k + CAP) // 2
                        rank = (rank.to(tl.int64) * target // tl.maximum(count, 1)).to(tl.int32)
                        rank = tl.minimum(tl.maximum(rank, 1), SAMPLE)
                        tau = _kth_largest(skey, si < SAMPLE, rank)
                        count = _compact(row, n_valid, tau, scr, CAP, TR, TC, STAGES)
                        tries += 1
                    if (count >= k) & (count <= CAP):
                        # 3. the k-th largest is among the candidates: select them in registers
                        tl.debug_barrier()  # the scratch stores above came from other threads of this program
                        valid = cols < count
                        cand = tl.load(scr + cols, mask=valid, other=0)
                        key = tl.load(scr + CAP + cols, mask=valid, other=0).to(tl.uint32, bitcast=True)
                        written = _emit_registers(key, cand, valid, k, out_row)
                    else:
                        # many equal logits (or a sample that missed three times): exact, slower
                        written = _radix_full_row(row, n_valid, k, out_row, CAP)
        for j in range(tl.cdiv(k, PAD_BLOCK)):
            offs = j * PAD_BLOCK + tl.arange(0, PAD_BLOCK)
            tl.store(out_row + offs, tl.full([PAD_BLOCK], -1, tl.int32), mask=(offs >= written) & (offs < k))

    # ---------------------------------------------------------------------------------------------
    # v4: three launches. _v4_tau (a threshold per row from a sample), _v4_filter (the one pass over
    # the row: small programs, several per row when rows are few, storing the candidates), _v4_select
    # (the k-th largest among the candidates, ties toward lower columns, retries and the fallback).
    # Scratch row (int32 columns): [0, 2 CAP + 2) CAP + 1 int64 slots, each a candidate's column (low
    # word) and key (high word), the last one spare (stores past the capacity land there); 2 CAP + 2:
    # tau; 2 CAP + 3: the candidate count (all keys >= tau, also those past the capacity).

    @triton.jit
    def _ordered_key_v4(x):
        """fp32 -> uint32 whose unsigned order is the float order, -0.0 taken as +0.0 (equal logits tie)."""
        bits = (x + 0.0).to(tl.int32, bitcast=True)  # -0.0 + 0.0 = +0.0 (one FADD; x + -0.0 would fold away)
        return (bits ^ ((bits >> 31) | -2147483648)).to(tl.uint32, bitcast=True)

    @triton.jit
    def _rel_keys(key, valid):
        """Keys relative to the smallest valid one (0 where not valid) and how many two-bit steps decide
        the largest (the bits of max - min, overestimated by one where the float conversion rounds up:
        harmless). Candidates spanning 2^24 need 12 steps instead of 16."""
        lo = tl.min(tl.where(valid, key, tl.full(key.shape, 0xFFFFFFFF, tl.uint32)), axis=0)
        hi = tl.max(tl.where(valid, key, tl.full(key.shape, 0, tl.uint32)), axis=0)
        span = hi - lo
        e = ((span.to(tl.float32).to(tl.uint32, bitcast=True) >> 23).to(tl.int32) - 126)
        nbits = tl.minimum(tl.maximum(e, 0), 32)
        return lo, tl.where(valid, key - lo, 0), (nbits + 1) // 2

    @triton.jit
    def _add2(a0, a1, b0, b1):
        return a0 + b0, a1 + b1

    @triton.jit
    def _rel_step(vals, t, shift, k):
        """One two-bit step: t (bits above `shift` decided) gains the two bits at `shift`. Counts of vals
        at the three thresholds t | j << shift (j = 1, 2, 3) come out of one tuple reduction."""
        one = tl.full([], 1, tl.uint32)
        c1, c2, c3 = tl.reduce(((vals >= (t | (one << shift))).to(tl.int32),
                                (vals >= (t | (tl.full([], 2, tl.uint32) << shift))).to(tl.int32),
                                (vals >= (t | (tl.full([], 3, tl.uint32) << shift))).to(tl.int32)),
                               0, _add3)
        digit = (c1 >= k).to(tl.uint32) + (c2 >= k).to(tl.uint32) + (c3 >= k).to(tl.uint32)
        return t | (digit << shift)

    @triton.jit
    def _rel_step_count(vals, t, shift, k, c):
        """_rel_step that also carries c, the count of vals >= t (-1 while t is 0: not known, since the
        zeros are never counted): the count at the chosen threshold, or c itself when the digit is 0."""
        one = tl.full([], 1, tl.uint32)
        c1, c2, c3 = tl.reduce(((vals >= (t | (one << shift))).to(tl.int32),
                                (vals >= (t | (tl.full([], 2, tl.uint32) << shift))).to(tl.int32),
                                (vals >= (t | (tl.full([], 3, tl.uint32) << shift))).to(tl.int32)),
                               0, _add3)
        digit = (c1 >= k).to(tl.uint32) + (c2 >= k).to(tl.uint32) + (c3 >= k).to(tl.uint32)
        c = tl.where(digit == 3, c3, tl.where(digit == 2, c2, tl.where(digit == 1, c1, c)))
        return t | (digit << shift), c

    @triton.jit
    def _kth_rel_early(rel, steps, n_steps, k):
        """Up to n_steps two-bit steps (from the top of `steps`), stopping once exactly k of rel are >= t
        (see _kth_rel's EARLY); returns t and the count of rel >= t (-1 while t is 0)."""
        t = tl.full([], 0, tl.uint32)
        i = tl.full([], 0, tl.int32)
        c = tl.full([], -1, tl.int32)
        while (i < n_steps) & (c != k):
            t, c = _rel_step_count(rel, t, (2 * (steps - 1 - i)).to(tl.uint32), k, c)
            i += 1
        return t, c

    @triton.jit
    def _kth_rel(rel, steps, k, tmp, SPLIT: tl.constexpr, SMALL: tl.constexpr, TOP: tl.constexpr,
                 EARLY: tl.constexpr):
        """The k-th largest of rel (>= k of them valid; invalid ones 0) in `steps` two-bit steps. A 0
        is never counted (every threshold is >= 1), so invalid entries need no mask.

        SPLIT > 0: after the first SPLIT steps only the entries whose decided bits equal t's (the k-th
        largest's bucket) can still matter; when at most SMALL of them are, they are written to tmp
        (int32, SMALL entries of this program's own memory) and the remaining steps run over a
        [SMALL] tensor instead of the full one (the count above the bucket moves into k). TOP > 0:
        only the top TOP steps are decided (lower bits 0), so t is a lower bound of the k-th largest.

        EARLY (SPLIT 0 only): stop as soon as exactly k entries are >= t (the k-th largest is then the
        smallest entry of t's bucket and the (k + 1)-th lies below the bucket, so "the entries >= t" is
        already the top k and the undecided low bits cannot change it). t is then a lower bound of the
        k-th largest with exactly k entries >= t; callers take the entries > t plus those == t, which is
        the same set. Rows of random keys stop after ~7 of 12 steps (CPU simulation, notes/indexer.md)."""
        t = tl.full([], 0, tl.uint32)
        if TOP > 0:
            n_steps = tl.minimum(steps, TOP)
        else:
            n_steps = steps
        if SPLIT == 0:
            if EARLY:
                t, c = _kth_rel_early(rel, steps, n_steps, k)
            else:
                for i in range(n_steps):
                    t = _rel_step(rel, t, (2 * (steps - 1 - i)).to(tl.uint32), k)
        else:
            first = tl.minimum(n_steps, SPLIT)
            for i in range(first):
                t = _rel_step(rel, t, (2 * (steps - 1 - i)).to(tl.uint32), k)
            if first < n_steps:
                sb = (2 * (steps - first)).to(tl.uint32)
                hi = rel >> sb
                tb = t >> sb
                inb = (hi == tb) & (rel != 0)  # a 0 is never counted: it need not move
                m, above = tl.reduce((inb.to(tl.int32), (hi > tb).to(tl.int32)), 0, _add2)
                if m <= SMALL:
                    pos = tl.cumsum(inb.to(tl.int32), axis=0) - 1
                    tl.store(tmp + pos, rel.to(tl.int32, bitcast=True), mask=inb)
                    tl.debug_barrier()  # the bucket was written by other threads of this program
                    j = tl.arange(0, SMALL)
                    small = tl.load(tmp + j, mask=j < m, other=0).to(tl.uint32, bitcast=True)
                    for i in range(first, n_steps):
                        t = _rel_step(small, t, (2 * (steps - 1 - i)).to(tl.uint32), k - above)
                    tl.debug_barrier()  # every thread has read tmp before anyone writes it again
                else:
                    for i in range(first, n_steps):
                        t = _rel_step(rel, t, (2 * (steps - 1 - i)).to(tl.uint32), k)
        return t

    @triton.jit
    def _kth_largest_rel(key, valid, k, tmp, SPLIT: tl.constexpr, SMALL: tl.constexpr, TOP: tl.constexpr,
                         EARLY: tl.constexpr):
        """The k-th largest valid key (needs >= k valid), deciding only the bits in which they differ
        (TOP > 0: a lower bound, see _kth_rel)."""
        lo, rel, steps = _rel_keys(key, valid)
        return lo + _kth_rel(rel, steps, k, tmp, SPLIT, SMALL, TOP, EARLY)

    @triton.jit
    def _kth_largest_hist(key, valid, k):
        """The k-th largest valid key (needs >= k valid): four rounds of 256-bin histograms (8 bits each)."""
        bins = tl.arange(0, 256)
        prefix = tl.full([], 0, tl.uint32)
        need = k
        for d in tl.static_range(4):
            shift = 24 - 8 * d
            if d == 0:
                match = valid
            else:
                high = (tl.full([], 0xFFFFFFFF, tl.uint64) << (shift + 8)).to(tl.uint32)
                match = valid & (((key ^ prefix) & high) == 0)
            digit = ((key >> shift) & 255).to(tl.int32)
            hist = tl.histogram(digit, 256, mask=match)
            suffix = tl.cumsum(hist, axis=0, reverse=True)
            b = tl.maximum(tl.sum((suffix >= need).to(tl.int32), axis=0) - 1, 0)
            need -= tl.sum(tl.where(bins > b, hist, 0), axis=0)
            prefix = prefix | (b.to(tl.uint32) << shift)
        return prefix

    @triton.jit
    def _kth(key, valid, k, MODE: tl.constexpr, tmp, SPLIT: tl.constexpr, SMALL: tl.constexpr, TOP: tl.constexpr,
             EARLY: tl.constexpr):
        """The k-th largest valid key by MODE (0 two-bit steps, 1 histograms, 2 two-bit steps over the
        relative keys; SPLIT, SMALL, TOP: see _kth_rel, mode 2 only)."""
        if MODE == 0:
            t = _kth_largest(key, valid, k)
        elif MODE == 1:
            t = _kth_largest_hist(key, valid, k)
        else:
            t = _kth_largest_rel(key, valid, k, tmp, SPLIT, SMALL, TOP, EARLY)
        return t

    @triton.jit
    def _emit_v4(key, col_src, valid, k, out_row, MODE: tl.constexpr, ORDERED: tl.constexpr,
                 LOAD_COL: tl.constexpr, SPLIT: tl.constexpr, SMALL: tl.constexpr, EARLY: tl.constexpr,
                 seg_len=1, SEGS: tl.constexpr = 1):
        """Write the columns of the k largest valid (key, column) entries to out_row[0 .. n); returns n.
        The columns are col_src, or (LOAD_COL) loaded from the int64 candidate slots at col_src (a
        scalar pointer; a slot's low word is its column) once the k-th key is known, so they take no
        registers (neither columns nor their addresses) during the search. Ties at the k-th key go to the lower
        columns: by position when ORDERED (entries in column order), else by a second select over the
        tied columns (only when the tie straddles the cut). Keys of invalid entries must be 0. SPLIT,
        SMALL (mode 2): see _kth_rel; out_row's first SMALL entries serve as its tmp (SMALL <= k).
        EARLY (mode 2, no split): the steps stop at exactly k entries >= t where they can, and then the
        entries >= t are the answer (no tie scan); the count written is min(n, k), not a reduction.
        The columns go out in entry order, or with SEGS > 1 (LOAD_COL: candidates of SEGS filter programs, each
        over seg_len columns, which reserved their tiles' slots by atomics in an order that changes from run to
        run, each program's own slots in column order) in ascending column order: a column's place is the count
        of taken columns in earlier segments plus its rank among its own segment's (one int32 scan per 2
        segments, their counts packed 16 bits each)."""
        n = tl.sum(valid.to(tl.int32), axis=0)
        if n <= k:
            sel = valid
        elif EARLY and MODE == 2 and SPLIT == 0:
            lo, key, steps = _rel_keys(key, valid)
            t, c = _kth_rel_early(key, steps, steps, k)
            if c == k:
                sel = key >= t  # t >= 1 here, so invalid entries (0) are not taken
            else:
                sel = _sel_at_cut(key, t, col_src, valid, k, out_row, MODE, ORDERED, LOAD_COL, SMALL, EARLY)
        else:
            if MODE == 2:
                # compare relative keys from here on: the absolute ones need no registers meanwhile
                lo, key, steps = _rel_keys(key, valid)
                t = _kth_rel(key, steps, k, out_row, SPLIT, SMALL, 0, EARLY)
            else:
                t = _kth(key, valid, k, MODE, out_row, 0, SMALL, 0, EARLY)
            sel = _sel_at_cut(key, t, col_src, valid, k, out_row, MODE, ORDERED, LOAD_COL, SMALL, EARLY)
        if LOAD_COL:
            col = tl.load(col_src + tl.arange(0, key.shape[0]), mask=sel, other=0).to(tl.int32)
        else:
            col = col_src
        if SEGS > 1:
            # per-segment counts packed 16 bits a segment, 2 segments an int32 scan (counts <= CAP < 2^15; an
            # int64 scan of 4 spilled 288 B at 80 registers, sm_90a)
            tl.static_assert(key.shape[0] < 32768, "16-bit packed counts")
            seg = col // seg_len
            pos = tl.zeros_like(col)
            before = 0
            for g in range(0, SEGS, 2):
                f = seg - g
                mine = sel & (f >= 0) & (f < 2)
                sh = tl.where(mine, f, 0) * 16
                one = tl.where(mine, 1 << sh, 0)
                tot = tl.sum(one, axis=0)
                rank = (tl.cumsum(one, axis=0) >> sh) & 0xFFFF      # inclusive: this entry counts itself
                pos = tl.where(mine, before + tl.where(f == 1, tot & 0xFFFF, 0) + rank - 1, pos)
                before += (tot & 0xFFFF) + (tot >> 16)
        else:
            pos = tl.cumsum(sel.to(tl.int32), axis=0) - 1
        tl.store(out_row + pos, col, mask=sel)
        if EARLY:
            written = tl.minimum(n, k)  # exactly k are taken when more than k are valid
        else:
            written = tl.sum(sel.to(tl.int32), axis=0)
        return written

    @triton.jit
    def _sel_at_cut(key, t, col_src, valid, k, out_row, MODE: tl.constexpr, ORDERED: tl.constexpr,
                    LOAD_COL: tl.constexpr, SMALL: tl.constexpr, EARLY: tl.constexpr):
        """Which entries _emit_v4 takes given the k-th largest key t: those > t and, of those == t, the
        lowest columns (see _emit_v4)."""
        gt = valid & (key > t)
        eq = valid & (key == t)
        need = k - tl.sum(gt.to(tl.int32), axis=0)
        if ORDERED:
            sel = gt | (eq & (tl.cumsum(eq.to(tl.int32), axis=0) <= need))
        else:
            n_eq = tl.sum(eq.to(tl.int32), axis=0)
            if n_eq > need:
                if LOAD_COL:
                    col = tl.load(col_src + tl.arange(0, key.shape[0]), mask=valid, other=0).to(tl.int32)
                else:
                    col = col_src
                inv = tl.where(eq, ~col, 0).to(tl.uint32, bitcast=True)  # larger for lower columns
                t2 = _kth(inv, eq, need, MODE, out_row, 0, SMALL, 0, EARLY)
                sel = gt | (eq & (inv >= t2))
            else:
                sel = gt | eq
        return sel

    @triton.jit
    def _v4_sample(row, n_valid, k, CAP: tl.constexpr, SAMPLE: tl.constexpr, GROUP: tl.constexpr):
        """The sample's keys (groups of GROUP neighbours spread over the row) and the first rank. A row shorter than
        GROUP x the groups (SAMPLE may exceed CAP) has its groups overlap, the last ones cut at its end."""
        n_groups: tl.constexpr = SAMPLE // GROUP
        spread = n_valid // n_groups
        si = tl.arange(0, SAMPLE)
        skey = _ordered_key_v4(tl.load(row + tl.minimum((si // GROUP) * spread + si % GROUP, n_valid - 1)))
        rank = tl.maximum(((k + CAP) // 2).to(tl.int64) * SAMPLE // n_valid, 1).to(tl.int32)
        return skey, rank

    @triton.jit(do_not_specialize=["k"])
    def _v4_tau(logits, stride_row, lengths, width, scratch, stride_scratch, k,
                CAP: tl.constexpr, SAMPLE: tl.constexpr, GROUP: tl.constexpr, MODE: tl.constexpr,
                SPLIT: tl.constexpr, SMALL: tl.constexpr, TOP: tl.constexpr, EARLY: tl.constexpr):
        """tau (the sample's key of rank (k + CAP) / 2 * SAMPLE / L) and a zero count per long row. Mode
        2 may split (the row's candidate slots, free until the filter, as tmp) and decide only the TOP
        top steps (tau then rounded down: a few more candidates, never fewer)."""
        r = tl.program_id(0).to(tl.int64)
        n_valid = tl.minimum(tl.maximum(tl.load(lengths + r), 0), width)
        if n_valid > CAP:
            skey, rank = _v4_sample(logits + r * stride_row, n_valid, k, CAP, SAMPLE, GROUP)
            scr = scratch + r * stride_scratch
            tau = _kth(skey, tl.arange(0, SAMPLE) < SAMPLE, rank, MODE, scr, SPLIT, SMALL, TOP, EARLY)
            tl.store(scr + 2 * CAP + 2, tau.to(tl.int32, bitcast=True))
            tl.store(scr + 2 * CAP + 3, 0)

    @triton.jit
    def _v4_keep(x, ok, tau, MASKED: tl.constexpr):
        """A [ROWS, 4] tile's keys, which of them are >= tau (int32 0/1), each tile row's count and the
        count of the rows before it (one scan over the ROWS totals), and the tile's count."""
        key = _ordered_key_v4(x)
        if MASKED:
            keep = (ok & (key >= tau)).to(tl.int32)
        else:
            keep = (key >= tau).to(tl.int32)
        per_row = tl.sum(keep, axis=1)
        before = tl.cumsum(per_row, axis=0) - per_row
        return key, keep, before, tl.sum(per_row, axis=0)

    @triton.jit
    def _v4_put(slots, key, keep, before, base, offs, CAP: tl.constexpr):
        """Store the kept (column, key) pairs at slots[base + rank]; ranks past CAP go to the spare slot."""
        pos = tl.minimum(base + before[:, None] + tl.cumsum(keep, axis=1) - 1, CAP)
        val = (key.to(tl.int64) << 32) | offs.to(tl.uint32).to(tl.int64)
        tl.store(slots + pos, val, mask=keep != 0)

    @triton.jit
    def _v4_compact(row, start, end, tau, slots, count_ptr, count, CAP: tl.constexpr, ROWS: tl.constexpr,
                    PREFETCH: tl.constexpr, ATOMIC: tl.constexpr, STAGES: tl.constexpr):
        """Columns [start, end) of a row: the (column, key) pairs of keys >= tau into the slots, after
        `count` earlier ones (ATOMIC: each tile reserves its slots from *count_ptr instead); returns
        count plus this range's. Full tiles load without masks (16-byte loads); one masked tile ends."""
        TILE: tl.constexpr = ROWS * 4
        lanes = tl.arange(0, ROWS)[:, None] * 4 + tl.arange(0, 4)[None, :]
        n_full = tl.maximum(end - start, 0) // TILE
        count = tl.full([], 0, tl.int32) + count  # a tensor even when a constant is passed
        if PREFETCH:
            x = tl.load(row + start + lanes, mask=n_full > 0, other=0.0)
        for i in tl.range(n_full, num_stages=STAGES):
            offs = start + i * TILE + lanes
            if PREFETCH:
                # the next tile (the last one again at the end: a cached reload, no mask needed)
                x_next = tl.load(row + start + tl.minimum(i + 1, n_full - 1) * TILE + lanes)
            else:
                x = tl.load(row + offs)
            key, keep, before, n_tile = _v4_keep(x, offs, tau, False)
            if ATOMIC:
                base = tl.atomic_add(count_ptr, n_tile, sem="relaxed")
            else:
                base = count
            _v4_put(slots, key, keep, before, base, offs, CAP)
            count += n_tile
            if PREFETCH:
                x = x_next
        offs = start + n_full * TILE + lanes
        if start + n_full * TILE < end:
            ok = offs < end
            x = tl.load(row + offs, mask=ok, other=0.0)
            key, keep, before, n_tile = _v4_keep(x, ok, tau, True)
            if ATOMIC:
                base = tl.atomic_add(count_ptr, n_tile, sem="relaxed")
            else:
                base = count
            _v4_put(slots, key, keep, before, base, offs, CAP)
            count += n_tile
        return count

    @triton.jit(do_not_specialize=["segs", "k"])
    def _v4_filter(logits, stride_row, lengths, width, scratch, stride_scratch, segs, seg_len, k,
                   CAP: tl.constexpr, ROWS: tl.constexpr, PREFETCH: tl.constexpr, ATOMIC: tl.constexpr,
                   STAGES: tl.constexpr, FUSE_TAU: tl.constexpr, SAMPLE: tl.constexpr, GROUP: tl.constexpr,
                   TAU_MODE: tl.constexpr, TAU_TOP: tl.constexpr, TAU_EARLY: tl.constexpr):
        """Program (row r, segment s) stores the (column, key) pairs of its keys >= tau. A tile is
        [ROWS, 4]: each tile row is one 16-byte load and one thread's run of 4 columns, so a tile row's
        count and ranks stay in its thread; one scan over the ROWS totals places them. With one segment
        per row (ATOMIC False) the candidates land in column order; with several, each tile reserves its
        slots with one atomic on the row's count (their order then free: the select breaks ties by column and
        lists its output in column order, _emit_v4's SEGS).
        FUSE_TAU (one segment per row only): the program first finds the row's tau itself, as _v4_tau
        would (same sample, rank and mode; no split), so no separate threshold launch runs and the
        threshold's latency-bound steps overlap other programs' streaming."""
        pid = tl.program_id(0)
        r = (pid // segs).to(tl.int64)
        s = pid % segs
        n_valid = tl.minimum(tl.maximum(tl.load(lengths + r), 0), width)
        if n_valid > CAP:
            scr = scratch + r * stride_scratch
            if FUSE_TAU:
                skey, rank = _v4_sample(logits + r * stride_row, n_valid, k, CAP, SAMPLE, GROUP)
                tau = _kth(skey, tl.arange(0, SAMPLE) < SAMPLE, rank, TAU_MODE, scr, 0, 16, TAU_TOP, TAU_EARLY)
                tl.store(scr + 2 * CAP + 2, tau.to(tl.int32, bitcast=True))
            else:
                tau = tl.load(scr + 2 * CAP + 2).to(tl.uint32, bitcast=True)
            start = s * seg_len
            end = tl.minimum(start + seg_len, n_valid)
            count = _v4_compact(logits + r * stride_row, start, end, tau, scr.to(tl.pointer_type(tl.int64)),
                                scr + 2 * CAP + 3, 0, CAP, ROWS, PREFETCH, ATOMIC, STAGES)
            if not ATOMIC:
                tl.store(scr + 2 * CAP + 3, count)

    @triton.jit
    def _v4_short_row(row, n_valid, k, out_row, CAP: tl.constexpr, MODE: tl.constexpr, SPLIT: tl.constexpr,
                      SMALL: tl.constexpr, EARLY: tl.constexpr):
        """A row of at most CAP valid columns, selected in registers; returns the number written."""
        cols = tl.arange(0, CAP)
        valid = cols < n_valid
        key = _ordered_key_v4(tl.load(row + cols, mask=valid, other=0.0))
        return _emit_v4(tl.where(valid, key, 0), cols, valid, k, out_row, MODE, True, False, SPLIT, SMALL, EARLY)

    @triton.jit
    def _v4_retry(row, n_valid, k, count, scr, out_row, CAP: tl.constexpr, MODE: tl.constexpr, SAMPLE: tl.constexpr,
                  GROUP: tl.constexpr, FIX_ROWS: tl.constexpr, SPLIT: tl.constexpr, SMALL: tl.constexpr,
                  EARLY: tl.constexpr):
        """A long row whose candidates (count of them) do not hold the k-th largest in [k, CAP]: up to two more
        tries with the sample's rank scaled by target / count, each one ordered pass of this program over the row
        into the slots, then the exact fallback; returns the number written."""
        slots = scr.to(tl.pointer_type(tl.int64))
        skey, rank = _v4_sample(row, n_valid, k, CAP, SAMPLE, GROUP)
        tries = 0
        while ((count < k) | (count > CAP)) & (tries < 2):
            target = (k + CAP) // 2
            rank = (rank.to(tl.int64) * target // tl.maximum(count, 1)).to(tl.int32)
            rank = tl.minimum(tl.maximum(rank, 1), SAMPLE)
            tau = _kth(skey, tl.arange(0, SAMPLE) < SAMPLE, rank, MODE, out_row, 0, SMALL, 0, False)
            tl.debug_barrier()  # every thread has read the count before the slots are rewritten
            count = _v4_compact(row, 0, n_valid, tau, slots, scr, 0, CAP, FIX_ROWS, False, False, 1)
            tries += 1
        tl.debug_barrier()  # the slot stores above came from other threads of this program
        if (count >= k) & (count <= CAP):
            cols = tl.arange(0, CAP)
            valid = cols < count
            key = tl.load(scr + 2 * cols + 1, mask=valid, other=0).to(tl.uint32, bitcast=True)
            written = _emit_v4(key, slots, valid, k, out_row, MODE, True, True, SPLIT, SMALL, EARLY)
        else:
            written = _radix_full_row(row, n_valid, k, out_row, FIX_ROWS * 4)
        return written

    @triton.jit
    def _v4_pad(out_row, written, k, PAD_BLOCK: tl.constexpr):
        """-1 in out_row[written .. k)."""
        for j in range(tl.cdiv(k, PAD_BLOCK)):
            offs = j * PAD_BLOCK + tl.arange(0, PAD_BLOCK)
            tl.store(out_row + offs, tl.full([PAD_BLOCK], -1, tl.int32), mask=(offs >= written) & (offs < k))

    @triton.jit(do_not_specialize=["k"])
    def _v4_select(logits, stride_row, lengths, width, out, stride_out, scratch, stride_scratch, k, seg_len,
                   CAP: tl.constexpr, PAD_BLOCK: tl.constexpr, MODE: tl.constexpr, ORDERED: tl.constexpr,
                   SEGS: tl.constexpr, SAMPLE: tl.constexpr, GROUP: tl.constexpr, FIX_ROWS: tl.constexpr,
                   SPLIT: tl.constexpr, SMALL: tl.constexpr, EARLY: tl.constexpr):
        """Per row: a row that fits CAP is selected in registers; a long row from its candidates when they
        hold the k-th largest (k <= count <= CAP); otherwise (the sample misjudged the row) _v4_retry. The rare
        path works in tiles of FIX_ROWS * 4 columns, small enough that it does not raise the kernel's registers
        (127 on sm_90 with 8 warps)."""
        r = tl.program_id(0).to(tl.int64)
        out_row = out + r * stride_out
        row = logits + r * stride_row
        n_valid = tl.minimum(tl.maximum(tl.load(lengths + r), 0), width)
        if n_valid <= CAP:
            written = _v4_short_row(row, n_valid, k, out_row, CAP, MODE, SPLIT, SMALL, EARLY)
        else:
            scr = scratch + r * stride_scratch
            count = tl.load(scr + 2 * CAP + 3)
            if (count >= k) & (count <= CAP):
                cols = tl.arange(0, CAP)
                valid = cols < count
                # keys from the high words of the slots (0 where not valid: below every threshold)
                key = tl.load(scr + 2 * cols + 1, mask=valid, other=0).to(tl.uint32, bitcast=True)
                written = _emit_v4(key, scr.to(tl.pointer_type(tl.int64)), valid, k, out_row, MODE, ORDERED, True,
                                   SPLIT, SMALL, EARLY, seg_len, SEGS)
            else:
                written = _v4_retry(row, n_valid, k, count, scr, out_row, CAP, MODE, SAMPLE, GROUP, FIX_ROWS, SPLIT,
                                    SMALL, EARLY)
        _v4_pad(out_row, written, k, PAD_BLOCK)

    # ---------------------------------------------------------------------------------------------
    # The one-launch path for few long rows (_v4_fused). Scratch row, after the slots, tau and count of v4:
    # 2 CAP + 4 the arrival count, 2 CAP + FUSED_TABLE + j the slot base of tile j's candidates and
    # 2 CAP + FUSED_TABLE + MAX_TILES + j their number (j < MAX_TILES). The count and the arrival count must
    # be 0 when the launch starts (launch_topk_v4 zeroes them just before).

    @triton.jit
    def _v4_run_source(tab, tiles, count, CAP: tl.constexpr, MAX_TILES: tl.constexpr):
        """Slot of each candidate d in column order (d < count): tile j's candidates are the slots [base_j,
        base_j + n_j), in column order among themselves, and come after those of tiles < j. The table
        (base, n) is rewritten as (the candidates before tile j, base_j minus that), then each d finds its
        tile by a binary search over the first column (the largest j with before_j <= d: never an empty
        tile, since before_(j + 1) > d)."""
        j = tl.arange(0, MAX_TILES)
        on = j < tiles
        base = tl.load(tab + j, mask=on, other=0, cache_modifier=".cg")
        n = tl.load(tab + MAX_TILES + j, mask=on, other=0, cache_modifier=".cg")
        before = tl.cumsum(n, axis=0) - n
        tl.debug_barrier()  # every thread has read the table before it is rewritten
        tl.store(tab + j, before, mask=on)
        tl.store(tab + MAX_TILES + j, base - before, mask=on)
        tl.debug_barrier()  # the rewritten table came from other threads of this program
        d = tl.arange(0, CAP)
        lo = tl.zeros([CAP], dtype=tl.int32)
        for b in tl.static_range(1, 16):
            if (MAX_TILES >> b) > 0:
                cand = lo + (MAX_TILES >> b)
                first = tl.load(tab + cand, mask=cand < tiles, other=2147483647)
                lo = tl.where(first <= d, cand, lo)
        return tl.where(d < count, d + tl.load(tab + MAX_TILES + lo), 0)

    @triton.jit(do_not_specialize=["k", "tiles"])
    def _v4_fused(logits, stride_row, lengths, width, out, stride_out, scratch, stride_scratch, k, tiles,
                  CAP: tl.constexpr, TILE: tl.constexpr, MAX_TILES: tl.constexpr, TABLE: tl.constexpr,
                  PAD_BLOCK: tl.constexpr, MODE: tl.constexpr, SAMPLE: tl.constexpr, GROUP: tl.constexpr,
                  FIX_ROWS: tl.constexpr, SMALL: tl.constexpr, EARLY: tl.constexpr, TAU_MODE: tl.constexpr,
                  TAU_TOP: tl.constexpr, TAU_EARLY: tl.constexpr, STOP: tl.constexpr = 0):
        """Threshold, filter and select of v4 in one launch: program (row r, tile s) of `tiles` a row. A row of at
        most CAP valid columns is selected by its tile 0 in registers. A longer one: every program loads its tile
        (TILE columns), finds the row's threshold from the sample itself (the same sample, rank and steps in each,
        so the same tau), reserves its candidates' slots with one atomic on the row's count, stores them in
        column order and its (base, number) in the table, then counts itself in on the row's arrival count
        (acq_rel, after a barrier: CUTLASS's semaphore pattern). The program that arrives last has every tile's
        candidates in place: it loads them in column order (_v4_run_source; L2 loads, not L1) and selects them
        as _v4_select does one filter program's, or takes _v4_retry when they do not hold the k-th largest.
        The selection comes out in ascending column order, the same in every run. STOP (timing only, wrong output):
        1 ends after the threshold (stored as v4's tau), 2 after the arrival."""
        pid = tl.program_id(0)
        r = (pid // tiles).to(tl.int64)
        s = pid % tiles
        out_row = out + r * stride_out
        row = logits + r * stride_row
        n_valid = tl.minimum(tl.maximum(tl.load(lengths + r), 0), width)
        if n_valid <= CAP:
            if s == 0:
                written = _v4_short_row(row, n_valid, k, out_row, CAP, MODE, 0, SMALL, EARLY)
                _v4_pad(out_row, written, k, PAD_BLOCK)
        else:
            scr = scratch + r * stride_scratch
            ROWS: tl.constexpr = TILE // 4
            offs = s * TILE + tl.arange(0, ROWS)[:, None] * 4 + tl.arange(0, 4)[None, :]
            ok = offs < n_valid
            x = tl.load(row + offs, mask=ok, other=0.0)  # in flight while the threshold is found
            skey, rank = _v4_sample(row, n_valid, k, CAP, SAMPLE, GROUP)
            tau = _kth(skey, tl.arange(0, SAMPLE) < SAMPLE, rank, TAU_MODE, scr, 0, 16, TAU_TOP, TAU_EARLY)
            if STOP == 1:
                tl.store(scr + 2 * CAP + 2, tau.to(tl.int32, bitcast=True) + tl.sum(x.to(tl.int32, bitcast=True)))
                return
            key, keep, before, n_tile = _v4_keep(x, ok, tau, True)
            slots = scr.to(tl.pointer_type(tl.int64))
            base = tl.atomic_add(scr + 2 * CAP + 3, n_tile, sem="relaxed")
            _v4_put(slots, key, keep, before, base, offs, CAP)
            tab = scr + 2 * CAP + TABLE
            tl.store(tab + s, base)
            tl.store(tab + MAX_TILES + s, n_tile)
            tl.debug_barrier()  # every thread's stores before the arrival that publishes them
            arrived = tl.atomic_add(scr + 2 * CAP + 4, 1, sem="acq_rel")
            if (arrived == tiles - 1) & (STOP == 0):
                count = tl.load(scr + 2 * CAP + 3, cache_modifier=".cg")
                if (count >= k) & (count <= CAP):
                    src = _v4_run_source(tab, tiles, count, CAP, MAX_TILES)
                    valid = tl.arange(0, CAP) < count
                    cand = tl.load(slots + src, mask=valid, other=0, cache_modifier=".cg")
                    ckey = (cand >> 32).to(tl.int32).to(tl.uint32, bitcast=True)  # 0 where not valid
                    written = _emit_v4(ckey, cand.to(tl.int32), valid, k, out_row, MODE, True, False, 0, SMALL,
                                       EARLY)
                else:
                    written = _v4_retry(row, n_valid, k, count, scr, out_row, CAP, MODE, SAMPLE, GROUP, FIX_ROWS, 0,
                                        SMALL, EARLY)
                _v4_pad(out_row, written, k, PAD_BLOCK)


def launch_topk_v3(logits: torch.Tensor, lengths: torch.Tensor, k: int, out: torch.Tensor, scratch: torch.Tensor,
                   *, cap: int | None = None, sample: int | None = None, num_warps: int | None = None,
                   tile_cols: int = 16, stages: int = 3, maxnreg: int | None = 128, stop: int = 0) -> None:
    """Run the v3 select (one fused kernel, one program per row). cap/sample/num_warps/tile_cols/stages/maxnreg override the defaults (tests use
    them to reach every path, benchmarks to tune); stop > 0 cuts the work short for stage timings
    (wrong output). maxnreg 128 keeps two 8-warp programs per SM: 1.50 ms instead of 1.83 ms for
    4096 x 65536 on the H200 (bench/results/topk_tune.json)."""
    t, w = logits.shape
    cap = cap or candidate_capacity(k)
    sample = min(sample or 2048, cap)
    if cap < 2 * k or cap & (cap - 1) or sample & (sample - 1) or sample < _GROUP:
        raise ValueError(f"cap must be a power of two >= 2k and sample a power of two >= {_GROUP}")
    if w > cap and (scratch.shape[0] < t or scratch.shape[1] < 2 * cap):
        raise ValueError(f"scratch must be at least [{t}, {2 * cap}], got {list(scratch.shape)}")
    num_warps = num_warps or (8 if cap >= 2048 else 4)
    tc = min(tile_cols, cap)
    _topk_kernel[(t,)](logits, logits.stride(0), lengths, w, out, out.stride(0), scratch,
                       scratch.stride(0) if scratch.dim() == 2 else 0, k,
                       CAP=cap, SAMPLE=sample, GROUP=_GROUP, PAD_BLOCK=min(1024, cap), TR=cap // tc, TC=tc,
                       STAGES=stages, STOP=stop, num_warps=num_warps, **({"maxnreg": maxnreg} if maxnreg else {}))


# int32 columns after the candidates: tau, count, the one-launch path's arrival count and its table of
# FUSED_MAX_TILES tiles' (slot base, number) at FUSED_TABLE (rest padding; rows stay 128-byte aligned)
SCRATCH_META = 160
FUSED_TABLE = 8
FUSED_MAX_TILES = 64


def sample_size(rows: int, sms: int) -> int:
    """launch_topk_v4's default sample: 4096 keys for 64 to 2 x SMs rows, else 2048. A row the sample misjudges (its
    candidates outside [k, cap]) costs its call the select's retries: H200, CUDA-graph replays, k 2048 x 65536
    (bench/results/topk_retry_s43.json), 1 row 21.9 -> 62.0 us, 128 rows 48.6 -> 99.9. Of 4096 iid rows the sample of
    2048 misjudged 0.07-0.10% at k 2048 x 65536 and 0.12% at k 512 x 16880, the sample of 4096 none
    (topk_layer_rows_c_s43.json, topk_retry_s43.json). 4096 keys cost 0.2-1.3 us a call at 64-128 rows of 65536,
    3.3 at 256 and 1.5-5 us at 1-16 (topk_sample_s43.json, topk_stages_s43.json, topk_retry_s43.json); so from 64
    rows (expected retries ~0.045-0.064 a call, ~2-3 us) the larger sample pays on average and takes the retries' tail
    away, below it the smaller one is cheaper on average. Past 2 x SMs rows (prefill-sized batches) it was not
    measured."""
    return 4096 if 64 <= rows <= 2 * sms else 2048


def fused_tiles(width: int, tile: int) -> int:
    """Programs a row of the one-launch path (_v4_fused): one per tile of the row."""
    return -(-width // tile)


def fused_tile_default(rows: int, width: int, cap: int, warps: int, sms: int) -> int:
    """The tile launch_topk_v4 takes for the one-launch path by default, 0 for three launches. Measured (H200, CUDA
    graph replays, every set right; bench/results/topk_few_s43.json, topk_few_k512_s43.json) at k 2048 (cap 4096,
    8 warps) and k 512 (cap 1024, 4 warps) only, so larger caps keep three launches. 512 columns a warp (4096 at
    8 warps) while every tile of every row has an SM to itself: 1 x 65536 37.9 -> 22.7 us, 1 x 131072 52.7 -> 22.1,
    1 x 262144 83.6 -> 23.6, 4 x 65536 40.1 -> 24.6, 1 x 16384 25.2 -> 21.8. Past that at 8 warps tiles twice as
    long (one program an SM) while they have an SM each: 16 x 65536 41.6 -> 27.0 (32.6 with 4096-column tiles),
    8 x 131072 56.5 -> 28.1, 64 x 12224 30.0 -> 26.8; and while they fit two an SM where rows are at least 32768
    columns (the three launches cost more there): 24 x 65536 42.9 -> 33.4, 32 x 65536 43.2 -> 39.8; not at 128 x
    12224 (32.3 against 44.7: two waves of one-launch programs, topk_rule_s43.json). At 4 warps the same tiles
    while they fit two an SM: k 512 32 x 16384 23.1 -> 19.2. More rows keep three launches (64 x 65536: 48.1
    against 58.3 with 8192-column tiles). A row takes at most FUSED_MAX_TILES tiles (the table's size)."""
    if cap > 4096:
        return 0
    tile = 512 * warps
    steps = ((tile, sms), (2 * tile, sms), (2 * tile, 2 * sms, 32768)) if warps == 8 else ((tile, 2 * sms),)
    for t, most, *min_width in steps:
        tiles = fused_tiles(width, t)
        if tiles <= FUSED_MAX_TILES and rows * tiles <= most and width >= (min_width or [0])[0]:
            return t
    return 0


def v4_segments(rows: int, width: int, tile: int, filt_warps: int, sm_count: int, per_sm: int = 16) -> int:
    """Programs per row for the filter: the fewest (a power of two) that give about per_sm warps' worth
    of programs per SM, each keeping at least two tiles of the row."""
    segs = 1
    while rows * segs * filt_warps < sm_count * per_sm and width // (2 * segs) >= 2 * tile:
        segs *= 2
    return segs


def select_register_cap(rows: int, cap: int, select_warps: int, sms: int) -> int:
    """launch_topk_v4's default select_maxnreg: 80 at cap 4096 (1024 < k <= 2048) with 8 select warps when the rows need
    more than two select programs an SM (rows > 2 x SMs), else 0 (no cap). Uncapped the select takes 127
    registers (2 programs an SM); the cap fits 3, with 120 bytes of spills: 4096 x 65536 0.7104 vs 0.7244 ms
    alone (notes/indexer.md, bench/results/topk_v3.json of its time). With no more rows than two programs an SM
    hold it buys no occupancy and its spills cost latency: H200, CUDA-graph replays, k 2048
    (bench/results/topk_small_s40.json), without the cap 1 x 65536 0.0383 vs 0.0451 ms, 32 x 65536 0.0421 vs
    0.0489, 128 x 65536 0.0479 vs 0.0520, 8 x 16384 0.0296 vs 0.0313, 1 x 4097 0.0305 vs 0.0308. 129-264 rows and
    265-4095 rows were not measured: there the rule follows the occupancy."""
    return 80 if cap == 4096 and select_warps == 8 and rows > 2 * sms else 0


# The widest row the select takes in registers (8 warps, 241 registers, no spill at sm_90a: bench/topk_compile_check.py;
# 16384 spills at 16 warps and loses, bench/results/topk_cap_s41.json).
WIDE_CAP_MAX = 8192


def select_capacity(rows: int, width: int, k: int, sms: int) -> int:
    """launch_topk_v4's default candidate capacity: candidate_capacity(k), or twice that (at most WIDE_CAP_MAX) when
    the rows are wider than the first but fit the second and there are at most two rows an SM. Then every row is
    selected in registers by the select alone: one launch instead of three (threshold, filter, select), at the cost of
    twice the keys a thread. H200, CUDA-graph replays, every set right (bench/results/topk_cap_s41.json,
    topk_cap_rows_s41.json, topk_cap_k512_s41.json): k 2048 (cap 4096 -> 8192) 1 x 4160 24.7 -> 14.7 us, 1 x 5000
    31.5 -> 18.1, 1 x 8192 26.8 -> 20.2, 8 x 8192 27.9 -> 18.5, 32 x 8192 28.7 -> 19.5, 128 x 8192 34.6 -> 26.5, 256 x
    8192 44.1 -> 35.7; even at 512 rows (66.7 / 64.9), slower from 1024 (104.9 / 120.5; 4096 rows 288 / 440); k 512
    (cap 1024 -> 2048) 1 x 1040 15.7 -> 9.6, 1 x 2048 16.0 -> 11.6, 8 x 1040 10.5 / 10.3. Four times the capacity did
    not pay at k 512 (cap 8192: 1 x 4160 19.7 / 19.9), so the rule stops at twice. Other k were not measured.
    In a decode layer (bench/decode_layer_kernels.py, decode_layer_kernels_s41_new.json against _usual.json) the span
    drops 6.4-9.0 us at 1-32 requests wherever rows pass the usual capacity (glm-5 TP8 48.2 -> 39.9 us at 1 request).
    It costs where a row fits the usual capacity in a wider buffer (8 x 4160 with random lengths, all within 4096:
    15.9 -> 17.5 us, topk_default_s41.json); the backend's decode chunks are as wide as their longest row, so they never
    hold that case. topk_scratch_spec still sizes the scratch for the usual capacity (it does not know the SM count);
    these rows leave it unread."""
    cap = candidate_capacity(k)
    wide = 2 * cap
    if cap < width <= wide <= WIDE_CAP_MAX and rows <= 2 * sms:
        return wide
    return cap


def _small(small: int, k: int) -> int:
    """The bucket size of a split select: a power of two, at most k (the output row is its tmp)."""
    small = min(small, k)
    return 1 << (small.bit_length() - 1)


def launch_topk_v4(logits: torch.Tensor, lengths: torch.Tensor, k: int, out: torch.Tensor, scratch: torch.Tensor,
                   *, cap: int | None = None, sample: int | None = None, segs: int | None = None,
                   filt_warps: int = 2, rows_per_thread: int = 4, prefetch: bool = True, filt_stages: int = 1,
                   select_warps: int | None = None, select_maxnreg: int | None = None, mode: int = 2,
                   tau_mode: int = 2, per_sm: int = 16, fix_rows: int = 0, split: int = 0, small: int = 256,
                   tau_split: int = 0, tau_small: int = 256, tau_top: int = 10, early: bool = True,
                   tau_early: bool = True, fuse_tau: bool = True, sort: bool = True, fused: bool | None = None,
                   fused_tile: int | None = None, gluon: bool | None = None, gluon_warps: int | None = None,
                   gluon_bits: int | None = None, gluon_ctas: int | None = None, stop: int = 0) -> None:
    """Run the v4 select: _v4_tau; _v4_filter over [rows x segs] programs of filt_warps warps (a tile is
    filt_warps * 32 * rows_per_thread rows of 4 columns; prefetch: the next tile is loaded before this
    one is used; filt_stages: Triton's software pipelining instead); _v4_select (with the retries and the fallback for rows the sample misjudged; fix_rows: their
    tiles' rows of 4); rows of at most `cap` columns skip the first two launches and are selected in registers
    (cap None: select_capacity, which widens it for rows a little past candidate_capacity(k) at few rows). mode: how
    the k-th largest is found (0 two-bit steps over the full key, 1 8-bit histograms, 2 two-bit steps over the
    bits in which the keys differ); tau_mode: the same for the sample's threshold. split/small (mode 2):
    after `split` two-bit steps the rest run over the k-th largest's bucket when it holds at most `small`
    keys (0: never); tau_split/tau_small the same for the threshold (tau_mode 2), tau_top > 0: the
    threshold decides only its top tau_top two-bit steps (rounded down; 0: every step). select_maxnreg:
    a register cap for the select (None: select_register_cap, 80 at cap 4096, i.e. 1024 < k <= 2048, with more
    rows than two select programs an SM hold, else none; 0: none).
    early (select, mode 2 without split) / tau_early (threshold, tau_mode 2 without tau_split): the two-bit
    steps stop once exactly k (rank) keys are >= the decided prefix (see _kth_rel). fuse_tau: when the
    filter runs one program per row, that program finds the threshold itself (no _v4_tau launch;
    tau_split is not used then); with several programs per row the threshold keeps its own launch.
    sort (several programs per row only): the select writes each row's selection in ascending column order
    (_emit_v4's SEGS: one scan per two filter programs of the row), the same in every run; without it the
    filter's atomics decide the order (SPEC 4 leaves the order free, but the attention sums in it). Its
    16-bit packed counts take cap < 32768 (k <= 8192); past that the order is the atomics' again.
    sample: the sample's size (a power of two; None: sample_size, 2048 or 4096 keys whatever the cap, at most the
    power of two at or above the width; before session 43 2048 capped at cap, so 1024 at k 512, where about 1.6% of
    long rows missed [k, cap] and took the select's retries, by the sample's order statistics: the glm-5.3-flash
    layer's rows of 16880 pooled keys gave counts with a spread of 90-126 around 768,
    bench/results/topk_layer_rows_s43.json).
    fused: long rows in one launch (_v4_fused: each program a tile of fused_tile columns finds the threshold itself;
    the last of a row to finish selects; the scratch's count and arrival count are zeroed just before). None: where
    fused_tile_default gives a tile (few rows) and the scratch has SCRATCH_META columns past the slots; True needs
    them (fused_tile None: 512 columns a select warp). The one-launch path takes mode, tau_mode, tau_top, early and
    tau_early as given; it has no split (split, tau_split), no filter knobs (segs, filt_warps, rows_per_thread,
    prefetch, filt_stages) and no register cap (select_maxnreg), and lists the selection in column order whatever
    sort says.
    The defaults (filt_warps 2, tau_mode 2, tau_top 10, select_maxnreg 80 at k 2048 over > 2 x SMs rows, early,
    tau_early, fuse_tau) are the fastest correct variant of bench/topk_v3.py on the H200 ("v4_fuse_early":
    4096 x 65536 0.582 ms = 5.72x torch.topk, bench/results/topk_v3_final.json; notes/indexer.md).
    gluon: rows that fit `cap` (every row then, one launch) selected by gluon_select.select_rows_kernel (radix passes
    over shared-memory histograms) instead of _v4_select, at capacities gluon_select.MIN_CAP..MAX_CAP (..MAX_CLUSTER_CAP
    with a row over a cluster); None: where gluon_select.usable says it runs (sm_90, not the interpreter,
    DSATTN_TOPK_GLUON not 0); True needs it. Where it runs, cap None also takes gluon_select.wide_capacity for rows
    wider than select_capacity's (up to 8192 columns at <= 2 x SMs rows, which at k 512 is past select_capacity's 2048;
    over clusters up to 16384 at <= SMs rows, 32768 at <= 30 and 65536 at <= 16, gluon_select.default_ctas: one
    launch instead of the long-row paths).
    gluon_warps / gluon_bits: its warps a CTA (None: gluon_select.default_warps) and bits a pass (None: default_bits);
    gluon_ctas: CTAs a row, a thread-block cluster (1, 2, 4 or 8; None: gluon_select.default_ctas). The same set in
    the same ascending column order as _v4_select's; stop there is select_rows_kernel's STOP.
    stop (timing only):
    1 ends after the threshold, 2 after the filter (wrong output); with fused=True the one-launch path's cuts
    (_v4_fused's STOP: 1 after the threshold, 2 after the arrival), else the three launches'."""
    t, w = logits.shape
    sms = sm_count(logits.device, 132)
    use_gluon = gluon is not False and gluon_select.usable(logits.device)
    ctas = gluon_ctas or gluon_select.default_ctas(t, w, sms)
    if not cap:
        cap = select_capacity(t, w, k, sms)
        if use_gluon and w > cap:
            cap = gluon_select.wide_capacity(t, w, k, sms, ctas) or cap
    # a sample longer than the row's power of two samples nothing more (and costs the CPU interpreter's reductions)
    sample = sample or min(sample_size(t, sms), max(_GROUP, 1 << (w - 1).bit_length()))
    if cap < 2 * k or cap & (cap - 1) or sample & (sample - 1) or sample < _GROUP:
        raise ValueError(f"cap must be a power of two >= 2k and sample a power of two >= {_GROUP}")
    for name, v in (("small", small), ("tau_small", tau_small)):
        if v < 1:  # checked before the first launch (the select's bucket size is worked out last)
            raise ValueError(f"{name} must be >= 1, got {v!r}")
    long_rows = w > cap
    if long_rows and (scratch.shape[0] < t or scratch.shape[1] < 2 * cap + 4):
        raise ValueError(f"scratch must be at least [{t}, {2 * cap + 4}], got {list(scratch.shape)}")
    if long_rows and (scratch.data_ptr() % 8 or scratch.stride(0) % 2 or scratch.stride(1) != 1):
        raise ValueError("scratch rows must be contiguous and 8-byte aligned (int64 candidate slots)")
    sstride = scratch.stride(0) if scratch.dim() == 2 else 0
    max_cap = gluon_select.max_capacity(ctas)
    if not long_rows and gluon is not False and gluon_select.MIN_CAP <= cap <= max_cap:
        if use_gluon:
            gluon_select.launch_select_rows(logits, lengths, k, out, cap, num_warps=gluon_warps, bits=gluon_bits,
                                            ctas=ctas, stop=stop)
            return
        if gluon:
            raise ValueError("gluon=True needs an sm_90 CUDA device, Gluon and no interpreter")
    select_warps = select_warps or (8 if cap >= 2048 else 4)
    if long_rows and (stop == 0 or fused) and fused is not False:
        if fused_tile is not None and (fused_tile < 4 or fused_tile & (fused_tile - 1)):
            raise ValueError(f"fused_tile must be a power of two >= 4, got {fused_tile!r}")
        room = scratch.shape[1] >= 2 * cap + FUSED_TABLE + 2 * FUSED_MAX_TILES
        if fused is None:
            fused_tile = fused_tile or fused_tile_default(t, w, cap, select_warps, sms)
            fused = room and fused_tile > 0 and fused_tiles(w, fused_tile) <= FUSED_MAX_TILES
        else:
            fused_tile = fused_tile or 512 * select_warps
            if not room or fused_tiles(w, fused_tile) > FUSED_MAX_TILES:
                raise ValueError(f"fused=True needs scratch rows of {2 * cap + SCRATCH_META} columns and rows of at "
                                 f"most {FUSED_MAX_TILES} tiles of {fused_tile}, got {list(scratch.shape)} and width "
                                 f"{w}")
        if fused:
            tiles = fused_tiles(w, fused_tile)
            scratch[:t, 2 * cap + 3:2 * cap + 5].zero_()  # the count and the arrival count
            _v4_fused[(t * tiles,)](logits, logits.stride(0), lengths, w, out, out.stride(0), scratch, sstride, k,
                                    tiles, CAP=cap, TILE=fused_tile, MAX_TILES=FUSED_MAX_TILES, TABLE=FUSED_TABLE,
                                    PAD_BLOCK=min(1024, cap), MODE=mode, SAMPLE=sample, GROUP=_GROUP,
                                    FIX_ROWS=fix_rows or max(1, cap // 16), SMALL=_small(small, k),
                                    EARLY=bool(early) and mode == 2, TAU_MODE=tau_mode,
                                    TAU_TOP=tau_top if tau_mode == 2 else 0,
                                    TAU_EARLY=bool(tau_early) and tau_mode == 2, STOP=stop, num_warps=select_warps)
            return
    if select_maxnreg is None:
        select_maxnreg = select_register_cap(t, cap, select_warps, sms)
    if long_rows:
        rows = 32 * filt_warps * rows_per_thread
        tile = rows * 4
        if segs is None:
            segs = v4_segments(t, w, tile, filt_warps, sms, per_sm)
        tau_in_filter = fuse_tau and segs == 1 and stop != 1
        tau_early = bool(tau_early) and tau_mode == 2
        if not tau_in_filter:
            _v4_tau[(t,)](logits, logits.stride(0), lengths, w, scratch, sstride, k,
                          CAP=cap, SAMPLE=sample, GROUP=_GROUP, MODE=tau_mode, SPLIT=tau_split,
                          SMALL=min(tau_small, 2 * cap), TOP=tau_top, EARLY=tau_early and not tau_split,
                          num_warps=4 if sample >= 1024 else 1)
        if stop == 1:
            return
        seg_len = triton.cdiv(triton.cdiv(w, segs), tile) * tile
        _v4_filter[(t * segs,)](logits, logits.stride(0), lengths, w, scratch, sstride, segs, seg_len, k,
                                CAP=cap, ROWS=rows, PREFETCH=prefetch, ATOMIC=segs > 1, STAGES=filt_stages,
                                FUSE_TAU=tau_in_filter, SAMPLE=sample, GROUP=_GROUP,
                                TAU_MODE=tau_mode if tau_in_filter else 0,
                                TAU_TOP=tau_top if tau_in_filter and tau_mode == 2 else 0,
                                TAU_EARLY=tau_in_filter and tau_early, num_warps=filt_warps)
        if stop == 2:
            return
    else:
        segs = 1
    _v4_select[(t,)](logits, logits.stride(0), lengths, w, out, out.stride(0), scratch, sstride, k,
                     seg_len if segs > 1 else 1,
                     CAP=cap, PAD_BLOCK=min(1024, cap), MODE=mode, ORDERED=segs == 1,
                     SEGS=segs if sort and cap < 32768 else 1,
                     num_warps=select_warps,
                     SAMPLE=sample, GROUP=_GROUP, FIX_ROWS=fix_rows or max(1, cap // 16),
                     SPLIT=split if mode == 2 else 0, SMALL=_small(small, k),
                     EARLY=bool(early) and mode == 2 and not split,
                     **({"maxnreg": select_maxnreg} if select_maxnreg else {}))


# v4 (filter programs of 2 warps) measured faster than v3 at every shape on the H200, every row's set
# right (tree a63691b): 4096 x 65536 0.729 vs 1.501 ms. With the threshold's 10 relative steps and the
# select's 80-register cap: 0.685 ms (previous default 0.724 in the same run, bench/results/topk_v3.json).
DEFAULT_VERSION = 4


def launch_topk(logits: torch.Tensor, lengths: torch.Tensor, k: int, out: torch.Tensor, scratch: torch.Tensor,
                *, version: int | None = None, **kw) -> None:
    """The select behind ``topk``: v3 (one fused kernel) or v4 (threshold, filter, select); kw go to
    that version's launcher."""
    if (version or DEFAULT_VERSION) == 4:
        launch_topk_v4(logits, lengths, k, out, scratch, **kw)
    else:
        launch_topk_v3(logits, lengths, k, out, scratch, **kw)
