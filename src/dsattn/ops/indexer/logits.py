"""Triton kernels of the indexer logits: ragged rows over a flat key array (prefill) and rows over the
paged 132-byte key cache (decode).

Both put keys on the M side of one matrix product per key tile, ``S = K_tile [BN, 128] @ Q^T [128, N]``
where N is (query rows x heads): then relu, the head weights and the sum over heads act along the
accumulator's columns, which stay inside a thread and its quad, and no cross-warp reduction is needed.
A positive fp8 key scale commutes with relu, so it multiplies the head-summed logit once per key.

The prefill kernel gives each program BT consecutive query rows (their key ranges overlap almost fully
in a causal prefill, so one key tile feeds BT rows) and, optionally, one contiguous share of the key
tiles (a split) when there are too few row blocks to fill the GPU.

The paged kernels give each program one query row and one contiguous share of its key tiles. Where the
cache's block size is a multiple of 64, a tile's 64 keys are fetched by the tensor memory accelerator
(``_paged_tma_kernel``: Triton multi-buffers those loads; the block id and scales of the next tile are
loaded by hand one iteration ahead, so no load is waited for in the iteration that issues it); other
block sizes take ``_paged_kernel``'s pipelined pointer loads (``pipe_splits``; a program's block ids loaded once
before its loop, its tiles' taken by tl.gather, the scales one tile ahead). Session 42 measured the first 1.5-2.2x
faster at a decode layer's shapes, session 44 the second's preloaded block ids 1.25-1.8x faster than block ids loaded
in each tile's iteration from 128 x 3056 and 16 x 16896 pooled keys up (notes/indexer.md).

Products: fp8 x fp8 stay fp8; bf16 queries over fp8 keys run as fp16 products with each head's queries scaled by a
power of two (``_q_fp16``): bit-equal to bf16 products and, since e4m3 widens to fp16 in one conversion, faster
(H200, session 44, bench/results/logits_bf16q_s44.json): paged 1.4-1.6x from 32 requests of 4K keys or 4 of 64K
(1.25x at 64 heads), prefill 1.08-1.17x.
"""
from __future__ import annotations

from ...formats import FP8, INDEX_ROW_BYTES
from .._triton import interpreting, next_pow2, sm_count, tl, triton


if triton is not None:
    NEG_INF = tl.constexpr(float("-inf"))

    @triton.jit
    def _scores(k_tile, q_t, w, HP: tl.constexpr, BT: tl.constexpr, UPCAST: tl.constexpr):
        """[BN, 128] keys x [128, BT * HP] queries -> [BN, BT] head-weighted relu logits."""
        if UPCAST:  # the interpreter's bf16 dot is wrong (see _triton.py); fp32 is exact there
            s = tl.dot(k_tile.to(tl.float32), q_t.to(tl.float32), input_precision="ieee")
        else:
            s = tl.dot(k_tile, q_t)
        s = tl.maximum(s, 0.0) * w[None, :]
        return tl.sum(tl.reshape(s, (s.shape[0], BT, HP)), axis=2)

    @triton.jit
    def _q_fp16(q_t, w):
        """bf16 queries q^T [128, N] as fp16 operands for fp8 keys, with their weights [N]: each column is scaled by
        the power of two 2^s that puts its largest |value| in [2^14, 2^15), its weight by 2^-s. e4m3 widens to fp16
        in one conversion (to bf16 in two: the conversions, not the memory, held the bf16-query paged kernel at
        ~2 TB/s). Every value down to 2^-31 of its column's largest is exact in fp16, the products scale by the same
        power (relu commutes with it), so the weighted logits are the bf16 products' own."""
        qf = q_t.to(tl.float32)
        e = (tl.max(tl.abs(qf), axis=0).to(tl.int32, bitcast=True) >> 23) & 0xFF  # biased exponent of the max
        e = tl.minimum(tl.maximum(e, 15), 254)  # both powers stay normal fp32
        up = ((268 - e) << 23).to(tl.float32, bitcast=True)  # 2^(14 - (e - 127))
        down = ((e - 14) << 23).to(tl.float32, bitcast=True)  # its inverse
        return (qf * up[None, :]).to(tl.float16), w * down

    @triton.jit
    def _logits_kernel(q, stride_qt, stride_qh, w, stride_wt, stride_wh, k, stride_k, k_scale, ks, ke,
                       out, stride_out, num_rows, num_heads, width, num_splits,
                       HP: tl.constexpr, BT: tl.constexpr, BN: tl.constexpr, FILL: tl.constexpr,
                       HAS_SCALE: tl.constexpr, DOT_DTYPE: tl.constexpr, Q16: tl.constexpr, UPCAST: tl.constexpr):
        """Grid (cdiv(num_rows, BT), num_splits). Q16: bf16 queries as scaled fp16 (_q_fp16), DOT_DTYPE fp16."""
        row0 = tl.program_id(0) * BT
        split = tl.program_id(1)
        d = tl.arange(0, 128)

        # queries of the block as Q^T [128, BT * HP]: column c is (row c // HP, head c % HP)
        c = tl.arange(0, BT * HP)
        c_row = row0 + c // HP
        c_head = c % HP
        c_ok = (c_row < num_rows) & (c_head < num_heads)
        q_ptr = q + c_row.to(tl.int64)[None, :] * stride_qt + c_head[None, :] * stride_qh + d[:, None]
        q_t = tl.load(q_ptr, mask=c_ok[None, :], other=0.0)
        wc = tl.load(w + c_row.to(tl.int64) * stride_wt + c_head * stride_wh, mask=c_ok, other=0.0)
        if Q16:
            q_t, wc = _q_fp16(q_t, wc)
        else:
            q_t = q_t.to(DOT_DTYPE)

        rows = row0 + tl.arange(0, BT)
        r_ok = rows < num_rows
        r_ks = tl.load(ks + rows, mask=r_ok, other=0)
        r_ke = tl.load(ke + rows, mask=r_ok, other=0)
        r_ke = tl.where(r_ok, tl.minimum(r_ke, r_ks + width), r_ks)  # keys past `width` columns are dropped
        r_len = tl.maximum(r_ke - r_ks, 0)
        lo = tl.min(tl.where(r_ok, r_ks, 2147483647), axis=0)
        hi = tl.max(tl.where(r_ok, r_ke, -2147483647), axis=0)
        hi = tl.maximum(hi, lo)
        out_rows = out + rows.to(tl.int64)[None, :] * stride_out  # [1, BT]

        # this split's contiguous share of the key tiles
        n_tiles = tl.cdiv(hi - lo, BN)
        per_split = tl.cdiv(n_tiles, num_splits)
        first = split * per_split
        count = tl.minimum(per_split, n_tiles - first)
        for i in range(count):
            kn = lo + (first + i) * BN + tl.arange(0, BN)
            kn_safe = tl.minimum(kn, hi - 1).to(tl.int64)  # always a real key: no masked loads
            k_tile = tl.load(k + kn_safe[:, None] * stride_k + d[None, :]).to(DOT_DTYPE)
            logit = _scores(k_tile, q_t, wc, HP, BT, UPCAST)
            if HAS_SCALE:
                logit = logit * tl.load(k_scale + kn_safe)[:, None]
            col = kn[:, None] - r_ks[None, :]
            keep = (kn[:, None] >= r_ks[None, :]) & (kn[:, None] < r_ke[None, :])
            tl.store(out_rows + col, logit, mask=keep)

        # -inf past each row's keys; the splits share the fill tiles round-robin
        fill_lo = tl.min(tl.where(r_ok, r_len, width), axis=0)
        n_fill = tl.cdiv(width - fill_lo, FILL)
        fc = tl.arange(0, FILL)
        for f in range(tl.cdiv(tl.maximum(n_fill - split, 0), num_splits)):
            cols = fill_lo + (split + f * num_splits) * FILL + fc
            keep = (cols[:, None] >= r_len[None, :]) & (cols[:, None] < width) & r_ok[None, :]
            tl.store(out_rows + cols[:, None], tl.full((FILL, BT), NEG_INF, tl.float32), mask=keep)

    @triton.jit
    def _paged_row(q, stride_qt, stride_qh, w, stride_wt, stride_wh, block_table, stride_bt, row_req, row_len, out,
                   stride_out, num_heads, width, t, d, HP: tl.constexpr, DOT_DTYPE: tl.constexpr,
                   Q16: tl.constexpr):
        """Query row t of a paged kernel: (q^T [128, HP], head weights [HP], positions it scores, its block-table
        row, its output row). Q16: bf16 queries as scaled fp16 (_q_fp16)."""
        h = tl.arange(0, HP)
        h_ok = h < num_heads
        q_t = tl.load(q + t * stride_qt + h[None, :] * stride_qh + d[:, None], mask=h_ok[None, :], other=0.0)
        wh = tl.load(w + t * stride_wt + h * stride_wh, mask=h_ok, other=0.0)
        if Q16:
            q_t, wh = _q_fp16(q_t, wh)
        else:
            q_t = q_t.to(DOT_DTYPE)
        n_pos = tl.minimum(tl.maximum(tl.load(row_len + t), 0), width)
        table = block_table + tl.load(row_req + t).to(tl.int64) * stride_bt
        return q_t, wh, n_pos, table, out + t * stride_out

    @triton.jit
    def _fill_tail(out_row, n_pos, width, split, num_splits, BN: tl.constexpr):
        """-inf from n_pos to width, tiles of BN round-robin over the splits."""
        n_fill = tl.cdiv(width - n_pos, BN)
        for f in range(tl.cdiv(tl.maximum(n_fill - split, 0), num_splits)):
            pos = n_pos + (split + f * num_splits) * BN + tl.arange(0, BN)
            tl.store(out_row + pos, tl.full((BN,), NEG_INF, tl.float32), mask=pos < width)

    @triton.jit
    def _gathered_scales(cache, ids, p0, block_size, tile, n_tiles, n_pos, PAGES: tl.constexpr, BN: tl.constexpr):
        """fp32 key scales of tile `tile`'s BN positions, their block ids taken from `ids` (the block ids of pages p0 ..
        p0 + PAGES - 1, -1 where none); zeros where no block or tile >= n_tiles."""
        pos = tile * BN + tl.arange(0, BN)
        blk = tl.gather(ids, tl.minimum(tl.maximum(pos // block_size - p0, 0), PAGES - 1), axis=0)
        ok = (pos < n_pos) & (blk >= 0) & (tile < n_tiles)
        base = cache + tl.where(ok, blk, 0).to(tl.int64) * block_size * 132 + block_size * 128
        return tl.load((base + (pos % block_size) * 4).to(tl.pointer_type(tl.float32)), mask=ok, other=0.0)

    @triton.jit
    def _paged_kernel(q, stride_qt, stride_qh, w, stride_wt, stride_wh, cache, num_blocks, block_size,
                      block_table, stride_bt, table_width, row_req, row_len, out, stride_out, num_heads, width,
                      num_splits, HP: tl.constexpr, BN: tl.constexpr, DOT_DTYPE: tl.constexpr,
                      Q16: tl.constexpr, PAGES: tl.constexpr, UPCAST: tl.constexpr):
        """Grid (num_rows, num_splits): one query row, a contiguous share of its positions. PAGES > 0: the block ids
        of the program's first PAGES pages (at least all its tiles touch) are loaded once before its loop and each
        tile's taken from them by tl.gather, the scales one tile ahead, so no load in the loop waits on another (the
        pipeliner multi-buffers the key loads); PAGES 0: both loaded in the tile's own iteration (preload off, or a
        program over more pages than one register tensor holds)."""
        t = tl.program_id(0).to(tl.int64)
        split = tl.program_id(1)
        d = tl.arange(0, 128)
        q_t, wh, n_pos, table, out_row = _paged_row(q, stride_qt, stride_qh, w, stride_wt, stride_wh, block_table,
                                                    stride_bt, row_req, row_len, out, stride_out, num_heads, width,
                                                    t, d, HP, DOT_DTYPE, Q16)
        block_bytes = block_size.to(tl.int64) * 132

        # the positions 0 .. n_pos - 1 in tiles, shared out among the splits in contiguous runs
        n_tiles = tl.cdiv(n_pos, BN)
        per_split = tl.cdiv(n_tiles, num_splits)
        first = split * per_split
        if PAGES > 0:
            last = tl.minimum(first + per_split, n_tiles)
            p0 = (first * BN) // block_size
            pg = p0 + tl.arange(0, PAGES)
            ids = tl.load(table + pg, mask=(pg < table_width) & (pg * block_size < n_pos), other=-1)
            ids = tl.where((ids >= 0) & (ids < num_blocks), ids, -1)
            scale = _gathered_scales(cache, ids, p0, block_size, first, last, n_pos, PAGES, BN)
            for tile in range(first, last):
                # the next tile's scales are loaded here and used in the next iteration
                scale_next = _gathered_scales(cache, ids, p0, block_size, tile + 1, last, n_pos, PAGES, BN)
                pos = tile * BN + tl.arange(0, BN)
                blk = tl.gather(ids, tl.minimum(pos // block_size - p0, PAGES - 1), axis=0)
                ok = (pos < n_pos) & (blk >= 0)
                off = (pos % block_size).to(tl.int64)
                base = cache + tl.where(ok, blk, 0).to(tl.int64) * block_bytes
                k_tile = tl.load(base[:, None] + off[:, None] * 128 + d[None, :], mask=ok[:, None], other=0)
                s = _scores(k_tile.to(tl.float8e4nv, bitcast=True).to(DOT_DTYPE), q_t, wh, HP, 1, UPCAST)
                tl.store(out_row + pos, tl.where(ok, tl.reshape(s, (BN,)) * scale, NEG_INF), mask=pos < n_pos)
                scale = scale_next
        else:
            for i in range(tl.minimum(per_split, n_tiles - first)):
                pos = (first + i) * BN + tl.arange(0, BN)
                page = pos // block_size
                blk = tl.load(table + page, mask=(pos < n_pos) & (page < table_width), other=-1)
                ok = (pos < n_pos) & (blk >= 0) & (blk < num_blocks)
                base = cache + tl.where(ok, blk, 0).to(tl.int64) * block_bytes
                off = (pos % block_size).to(tl.int64)
                k_tile = tl.load(base[:, None] + off[:, None] * 128 + d[None, :], mask=ok[:, None], other=0)
                scale = tl.load((base + block_size * 128 + off * 4).to(tl.pointer_type(tl.float32)), mask=ok,
                                other=0.0)
                s = _scores(k_tile.to(tl.float8e4nv, bitcast=True).to(DOT_DTYPE), q_t, wh, HP, 1, UPCAST)
                tl.store(out_row + pos, tl.where(ok, tl.reshape(s, (BN,)) * scale, NEG_INF), mask=pos < n_pos)
        _fill_tail(out_row, n_pos, width, split, num_splits, BN)

    @triton.jit
    def _tile_scales(cache, table, table_width, num_blocks, block_size, tile, n_tiles, BN: tl.constexpr):
        """(block id, fp32 key scales) of tile `tile` (BN positions of one block): -1 and zeros for a block id outside
        [0, num_blocks), a position past the block table, or tile >= n_tiles."""
        page = (tile * BN) // block_size
        blk = tl.load(table + page, mask=(page < table_width) & (tile < n_tiles), other=-1)
        ok = (blk >= 0) & (blk < num_blocks)
        base = cache + tl.where(ok, blk, 0).to(tl.int64) * block_size * 132 + block_size * 128
        off = (tile * BN) % block_size + tl.arange(0, BN)
        scale = tl.load((base + off * 4).to(tl.pointer_type(tl.float32)), mask=ok & (off < block_size), other=0.0)
        return tl.where(ok, blk, -1), scale

    @triton.jit
    def _paged_tma_kernel(q, stride_qt, stride_qh, w, stride_wt, stride_wh, cache, values, num_blocks, block_size,
                          block_table, stride_bt, table_width, row_req, row_len, out, stride_out,
                          num_heads, width, num_splits, HP: tl.constexpr, BN: tl.constexpr,
                          DOT_DTYPE: tl.constexpr, Q16: tl.constexpr, UPCAST: tl.constexpr):
        """_paged_kernel's grid and output, its key tiles fetched by the tensor memory accelerator (pipelined by
        Triton) and their scales one tile ahead by hand. `values` describes the key values of the cache as fp8
        [num_blocks, block_size, 128] (strides block_size * 132, 128, 1: a block's values come first). A tile is BN
        positions of one block (BN a power of two dividing block_size, >= 16). Block ids outside [0, num_blocks)
        address block num_blocks, past the tensor: nothing is read."""
        t = tl.program_id(0).to(tl.int64)
        split = tl.program_id(1)
        d = tl.arange(0, 128)
        q_t, wh, n_pos, table, out_row = _paged_row(q, stride_qt, stride_qh, w, stride_wt, stride_wh, block_table,
                                                    stride_bt, row_req, row_len, out, stride_out, num_heads, width,
                                                    t, d, HP, DOT_DTYPE, Q16)
        tiles_per_block = block_size // BN
        n_tiles = tl.cdiv(n_pos, BN)
        per_split = tl.cdiv(n_tiles, num_splits)
        first = split * per_split
        last = tl.minimum(first + per_split, n_tiles)
        blk, scale = _tile_scales(cache, table, table_width, num_blocks, block_size, first, last, BN)
        for tile in range(first, last):
            # the next tile's block id and scales are loaded here and used in the next iteration
            blk_next, scale_next = _tile_scales(cache, table, table_width, num_blocks, block_size, tile + 1, last, BN)
            ok = blk >= 0
            k_tile = values.load([tl.where(ok, blk, num_blocks), (tile % tiles_per_block) * BN, 0])
            k_tile = tl.reshape(k_tile, (BN, 128))
            if UPCAST:  # the interpreter's bf16 dot is wrong (see _triton.py); fp32 is exact there
                s = _scores(k_tile.to(tl.float32), q_t, wh, HP, 1, UPCAST)
            else:
                s = _scores(k_tile.to(DOT_DTYPE), q_t, wh, HP, 1, UPCAST)
            pos = tile * BN + tl.arange(0, BN)
            tl.store(out_row + pos, tl.where(ok, tl.reshape(s, (BN,)) * scale, NEG_INF), mask=pos < n_pos)
            blk, scale = blk_next, scale_next
        _fill_tail(out_row, n_pos, width, split, num_splits, BN)


def _dot_operands(q_dtype, k_dtype, dot):
    """(DOT_DTYPE, Q16) of a launch. fp8 x fp8 products stay fp8; bf16 queries over fp8 keys take scaled fp16
    queries (_q_fp16) and fp16 keys; bf16 keys (or fp8 queries over them) take bf16. dot "bf16" forces the
    bf16 products everywhere (fp8 widens to bf16 exactly): the slower form before session 44, kept to compare."""
    if dot not in (None, "bf16"):
        raise ValueError(f"config dot must be None or 'bf16', got {dot!r}")
    if dot == "bf16":
        return tl.bfloat16, False
    if k_dtype == FP8:
        return (tl.float8e4nv, False) if q_dtype == FP8 else (tl.float16, True)
    return tl.bfloat16, False


def _heads_padded(num_heads: int, bt: int) -> int:
    hp = max(1, 1 << (num_heads - 1).bit_length())
    while bt * hp < 16:  # the smallest matrix-product tile
        hp *= 2
    return hp


def default_logits_config(num_rows: int, num_heads: int, device) -> dict:
    """Block sizes of the prefill kernel (from the H200 sweep in notes/indexer.md)."""
    # BT * heads = 256 query columns per key tile: the fastest of the sweep on the H200
    # (bench/results/indexer_sweep.json, 8192 x 131072 causal tail, 32 heads: BT 8, BN 64, 4 warps)
    bt = max(1, 256 // max(32, next_pow2(num_heads)))
    cfg = dict(BT=bt, BN=64, num_warps=4, num_stages=3, splits=None, dot=None)
    if interpreting():
        cfg.update(BN=16, num_warps=4, num_stages=1)
    return cfg


def launch_logits(q, weights, k, k_scale, ks, ke, out, config: dict | None = None):
    """config overrides default_logits_config: BT, BN, num_warps, num_stages, splits (None: enough to
    fill the GPU), dot (None: _dot_operands' choice; "bf16": widen fp8 operands to bf16, products exact at half the
    fp8 rate)."""
    t, hi, _ = q.shape
    cfg = {**default_logits_config(t, hi, q.device), **(config or {})}
    bt = cfg["BT"]
    hp = _heads_padded(hi, bt)
    row_blocks = triton.cdiv(t, bt)
    splits = cfg.get("splits")
    if splits is None:
        splits = max(1, min(64, triton.cdiv(2 * sm_count(q.device, 4), row_blocks)))
    width = out.shape[1]
    fill = 64 if interpreting() else 256
    dot_dtype, q16 = _dot_operands(q.dtype, k.dtype, cfg.get("dot"))
    _logits_kernel[(row_blocks, splits)](
        q, q.stride(0), q.stride(1), weights, weights.stride(0), weights.stride(1), k, k.stride(0),
        k_scale if k_scale is not None else weights, ks, ke, out, out.stride(0), t, hi, width, splits,
        HP=hp, BT=bt, BN=cfg["BN"], FILL=fill, HAS_SCALE=k_scale is not None,
        DOT_DTYPE=dot_dtype, Q16=q16, UPCAST=interpreting(),
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])


def paged_splits(rows: int, tiles: int, sms: int, per_sm: int) -> int:
    """Programs a row of the paged kernels (a contiguous share of its `tiles` key tiles each), chosen for the
    H200 sweep of session 42 (bench/results/paged_logits_tma_s42.json):

    - few rows (rows x tiles <= 8 x SMs): one tile a program, the latency of a single tile (1 request of 4K keys:
      3.2 us fp8, 3.6 bf16, against 4.7 / 6.7 at 16 splits; the pointer-load kernel of before, 7.1 / 10.8 at 16);
    - otherwise 16 or more splits, at most one per 8 tiles, picked by the program count's fill of the GPU:
      ``per_sm`` programs an SM run at once (their registers and shared memory), a last partial wave idles the rest,
      and fewer than 4 programs an SM leave the memory system underused. 128 rows x 65536 keys: 64 splits, 275 us
      against 315 at 16 (three waves, the last a fifth full); 32 x 131072: 16 (one wave), 145 us against 189 at 32.
    """
    tiles = max(tiles, 1)
    if rows * tiles <= 8 * sms:
        return tiles
    slots = per_sm * sms

    def fill(n):
        busy = min(1.0, n / (4 * sms))
        return busy if n <= slots else busy * n / (triton.cdiv(n, slots) * slots)

    best, best_fill = min(16, tiles), -1.0
    s = 16
    while s <= min(tiles, max(16, tiles // 8)):
        f = fill(rows * s)
        if f > best_fill * 1.02:  # a larger split count only for a clearly better fill
            best, best_fill = s, f
        s *= 2
    return best


def pipe_splits(rows: int, tiles: int, sms: int) -> int:
    """Programs a row of the pipelined-load kernel (block sizes not a multiple of 64: glm-5.3-flash's pooled cache of
    block 16): one tile a program while rows x tiles <= 4 x SMs, else about 4 x SMs programs in all, and at most 64
    tiles a program (its block ids preloaded in one register tensor). H200, session 44
    (bench/results/paged_preload_s44.json, block ids preloaded, 3 stages): the rule's count was the best or within
    0.9 us of it at 10 of 11 shapes (32 x 16896 pooled keys 40.7 us, 39.8 at 16 splits; 128 x 3056 28.0, 27.9 at 4),
    1.6 us off at 64 x 16896 (73.2, 71.6 at 8). The old rule min(16, 2048 / rows) was far off at few long rows: 4 x
    16896 took 22.1 us at its 16 splits, 9.2 at this rule's 132."""
    tiles = max(tiles, 1)
    if rows * tiles <= 4 * sms:
        return tiles
    return max(1, min(tiles, max(triton.cdiv(4 * sms, max(rows, 1)), triton.cdiv(tiles, 64))))


def default_paged_config(num_rows: int, width: int, device) -> dict:
    """Key tiles by tensor descriptor (tma None: where the block size is a multiple of 64; otherwise the pipelined
    loads), 64 positions, 4 warps, 3 stages: the fastest of session 42's H200 sweep at every shape of it
    (bench/results/paged_logits_tma_s42.json); the pipelined loads with their block ids preloaded (preload, session
    44) 3 stages too, the best of 3 / 4 / 5 at every shape of bench/results/paged_preload_s44.json (4 without preload,
    their first sweep: bench/results/indexer_decode.json). splits None: paged_splits (descriptor kernel) or
    pipe_splits (pipelined loads)."""
    cfg = dict(BN=64, num_warps=4, num_stages=None, splits=None, tma=None, dot=None, preload=True)
    if interpreting():
        cfg.update(BN=16, num_stages=1)
    return cfg


def launch_logits_paged(q, weights, indexer_cache, block_table, row_req, row_len, out, config: dict | None = None):
    """config overrides default_paged_config: BN, num_warps, num_stages, splits (None: paged_splits for the
    tensor-descriptor kernel), tma (True: the tensor-descriptor kernel wherever it runs, block sizes that are
    multiples of 16; False: the pipelined-load kernel, which runs any block size; None: the default's choice), dot
    (as launch_logits'), preload (the pipelined-load kernel's block ids loaded once before its loop, False: in each
    tile's iteration)."""
    t, hi, _ = q.shape
    width = out.shape[1]
    cfg = {**default_paged_config(t, width, q.device), **(config or {})}
    hp = _heads_padded(hi, 1)
    nb, bs, _ = indexer_cache.shape
    fp8 = q.dtype == FP8
    dot_dtype, q16 = _dot_operands(q.dtype, FP8, cfg["dot"])
    # a descriptor needs 16-byte strides (block_size * 132) and a 16-byte aligned cache; a tile >= 16 positions.
    # By default only 64-key tiles: 16-key ones (glm-5.3-flash's pooled block 16) lost to the pipelined loads from
    # 32 rows on (H200, session 42: 128 rows 36.6 vs 22.3 us fp8, 59.8 vs 46.8 bf16; paged_logits_pooled_s42.json)
    tma = cfg["tma"] if cfg["tma"] is not None else bs % 64 == 0
    tma = tma and bs % 16 == 0 and indexer_cache.data_ptr() % 16 == 0
    bn = min(max(cfg["BN"], 16), bs & -bs) if tma else cfg["BN"]  # a TMA tile: a power of two dividing block_size
    n_tiles = triton.cdiv(width, bn)
    splits = cfg["splits"]
    if splits is None and tma:
        # programs an SM at once (compile check, sm_90a): 55 registers and 29 KB of shared memory fp8, 96 / 25 KB bf16
        splits = paged_splits(t, n_tiles, sm_count(q.device, 4), 7 if fp8 else 5)
    elif splits is None:
        splits = pipe_splits(t, n_tiles, sm_count(q.device, 4))
    splits = max(1, min(splits, n_tiles))
    # the pipelined loads' block ids of a program's tiles in one register tensor: up to 512 (a 64-tile program over
    # block size >= 16); past that, or with preload off, each tile's in its own iteration (PAGES 0)
    pages = next_pow2(triton.cdiv(triton.cdiv(n_tiles, splits) * bn, bs) + 1) if cfg["preload"] and not tma else 0
    pages = pages if pages <= 512 else 0
    # 3 stages: the descriptor kernel's best in session 42; the pipelined loads' with preloaded block ids in session 44
    # (4 without them, their first sweep)
    stages = cfg["num_stages"] or (3 if tma or pages else 4)
    if tma:
        from triton.tools.tensor_descriptor import TensorDescriptor
        values = TensorDescriptor(indexer_cache.view(FP8), [nb, bs, 128], [bs * INDEX_ROW_BYTES, 128, 1], [1, bn, 128])
        _paged_tma_kernel[(t, splits)](
            q, q.stride(0), q.stride(1), weights, weights.stride(0), weights.stride(1), indexer_cache, values, nb, bs,
            block_table, block_table.stride(0), block_table.shape[1], row_req, row_len, out, out.stride(0), hi,
            width, splits, HP=hp, BN=bn, DOT_DTYPE=dot_dtype, Q16=q16, UPCAST=interpreting(),
            num_warps=cfg["num_warps"], num_stages=stages)
        return
    _paged_kernel[(t, splits)](
        q, q.stride(0), q.stride(1), weights, weights.stride(0), weights.stride(1), indexer_cache, nb, bs,
        block_table, block_table.stride(0), block_table.shape[1], row_req, row_len, out, out.stride(0), hi, width,
        splits, HP=hp, BN=bn, DOT_DTYPE=dot_dtype, Q16=q16, PAGES=pages, UPCAST=interpreting(),
        num_warps=cfg["num_warps"], num_stages=stages)
