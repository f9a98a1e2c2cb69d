"""Top-k of logits rows by selection, not sorting: one program per row.

Keys: an fp32 logit maps to a uint32 whose unsigned order is the float order (flip every bit of a
negative, set the sign bit of a positive). The k-th largest key T is found by deciding its bits from
the top (``_kth_largest``: 32 counting steps over keys held in registers), then the row's keys > T and
the first (k - #keys > T) keys == T in column order are written out, which breaks ties toward the lower
column.

A row of at most CAP (a power of two >= 2k) valid columns is selected in registers directly. A longer
row is first cut down to candidates:

1. sample SAMPLE keys (groups of 8 neighbours spread over the row) and take the sample's key of rank
   r = (k + CAP) / 2 * SAMPLE / L as a lower bound tau: about (k + CAP) / 2 of the row's keys are >= tau;
2. one pass over the row stores the columns of keys >= tau, in column order, into the row's scratch;
3. when their number c is in [k, CAP] (the k-th largest is among them), they are reloaded and selected
   in registers. Otherwise (a sample that misjudged the row, e.g. many equal logits) the row falls back
   to an exact radix select over the full row: four passes of 256-bin histograms, then one pass that
   writes the result.

So a typical long row costs one read of the row plus a small sample and the candidates' reloads.
"""
from __future__ import annotations

import torch

from .._triton import triton, tl

_GROUP = 8  # sampled neighbours per group: one 32-byte sector of fp32


def candidate_capacity(k: int) -> int:
    """Candidates a row can hold in registers: the next power of two >= 2k, at least 16."""
    return max(16, 1 << (2 * k - 1).bit_length())


if triton is not None:

    @triton.jit
    def _ordered_key(x):
        """fp32 -> uint32 whose unsigned order is the float order."""
        bits = x.to(tl.uint32, bitcast=True)
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


def launch_topk(logits: torch.Tensor, lengths: torch.Tensor, k: int, out: torch.Tensor, scratch: torch.Tensor,
                *, cap: int | None = None, sample: int | None = None, num_warps: int | None = None,
                tile_cols: int = 16, stages: int = 3, maxnreg: int | None = 128, stop: int = 0) -> None:
    """Run the select. cap/sample/num_warps/tile_cols/stages/maxnreg override the defaults (tests use
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
