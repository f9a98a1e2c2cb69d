"""Triton kernels of the backend's gathers (see reference.py for what each computes).

All of them are memory copies with a block-table lookup; one program handles one row (positions) or a
block of one piece's rows (gathers), so no program reads past its piece.
"""
from __future__ import annotations

import torch

from ...formats import FP8, INDEX_DIM, LATENT_DIM, KVLayout, kv_cache_flat
from .._triton import tl, triton

GATHER_ROWS = 32  # rows one gather program copies
MAP_COLS = 1024   # index entries one mapping program rewrites


@triton.jit
def _map_positions_kernel(pos_ptr, stride_pos, out_ptr, stride_out, req_ptr, table_ptr, stride_table, base_ptr,
                          width, table_cols, BS: tl.constexpr, USE_TABLE: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inb = cols < width
    pos = tl.load(pos_ptr + r.to(tl.int64) * stride_pos + cols, mask=inb, other=-1)
    if USE_TABLE:
        req = tl.load(req_ptr + r).to(tl.int64)
        blk_col = pos // BS
        ok = (pos >= 0) & (blk_col < table_cols)
        blk = tl.load(table_ptr + req * stride_table + blk_col, mask=ok, other=0)
        res = tl.where(ok, blk * BS + pos % BS, -1)
    else:
        base = tl.load(base_ptr + r)
        res = tl.where(pos >= 0, pos + base, -1)
    tl.store(out_ptr + r.to(tl.int64) * stride_out + cols, res, mask=inb)


def launch_map_positions(positions, row_req, block_table, block_size, row_base, out):
    rows, width = positions.shape
    use_table = row_base is None
    dummy = positions  # never read in the other mode
    grid = (rows, triton.cdiv(width, MAP_COLS))
    _map_positions_kernel[grid](
        positions, positions.stride(0), out, out.stride(0),
        row_req if use_table else dummy, block_table if use_table else dummy,
        block_table.stride(0) if use_table else 0, dummy if use_table else row_base,
        width, block_table.shape[1] if use_table else 0,
        BS=block_size if use_table else 1, USE_TABLE=use_table, BLOCK=MAP_COLS)


@triton.jit
def _piece_rows(table_ptr, stride_table, req_ptr, len_ptr, off_ptr, BS: tl.constexpr, BLOCK: tl.constexpr):
    """This program's rows of its piece: (source slot [BLOCK] int64, destination row [BLOCK] int64, mask)."""
    p = tl.program_id(0)
    pos = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = pos < tl.load(len_ptr + p)
    req = tl.load(req_ptr + p).to(tl.int64)
    blk = tl.load(table_ptr + req * stride_table + pos // BS, mask=ok, other=0).to(tl.int64)
    dst = tl.load(off_ptr + p).to(tl.int64) + pos
    return blk * BS + pos % BS, dst, ok


@triton.jit
def _gather_index_keys_kernel(val_ptr, scale_ptr, table_ptr, stride_table, req_ptr, len_ptr, off_ptr,
                              out_k_ptr, out_scale_ptr, BS: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr):
    slot, dst, ok = _piece_rows(table_ptr, stride_table, req_ptr, len_ptr, off_ptr, BS, BLOCK)
    # 132-byte layout: inside block b, the D values of all BS tokens, then their BS fp32 scales
    blk, within = slot // BS, slot % BS
    cols = tl.arange(0, D)
    vals = tl.load(val_ptr + (blk * (BS * (D + 4)) + within * D)[:, None] + cols[None, :], mask=ok[:, None])
    tl.store(out_k_ptr + dst[:, None] * D + cols[None, :], vals, mask=ok[:, None])
    scale = tl.load(scale_ptr + blk * (BS * (D + 4) // 4) + BS * D // 4 + within, mask=ok)
    tl.store(out_scale_ptr + dst, scale, mask=ok)


def launch_gather_indexer_keys(indexer_cache, block_table, piece_req, piece_len, piece_offset, max_len, out_k,
                               out_scale):
    nb, bs, row = indexer_cache.shape
    grid = (piece_req.shape[0], triton.cdiv(max_len, GATHER_ROWS))
    flat = indexer_cache.view(-1)
    _gather_index_keys_kernel[grid](flat, flat.view(torch.float32), block_table, block_table.stride(0), piece_req,
                                    piece_len, piece_offset, out_k.view(torch.uint8), out_scale,
                                    BS=bs, D=INDEX_DIM, BLOCK=GATHER_ROWS)


@triton.jit
def _gather_latent_kernel(lat_ptr, stride_lat, scale_ptr, stride_scale, rope_ptr, stride_rope,
                          table_ptr, stride_table, req_ptr, len_ptr, off_ptr, out_ptr, stride_out,
                          BS: tl.constexpr, ROPE_OUT: tl.constexpr, BLOCK: tl.constexpr):
    slot, dst, ok = _piece_rows(table_ptr, stride_table, req_ptr, len_ptr, off_ptr, BS, BLOCK)
    cols = tl.arange(0, 128)
    # power-of-two scales: fp8 * scale is exact in bf16, so this equals the fp32 dequantization
    for g in tl.static_range(4):
        v = tl.load(lat_ptr + slot[:, None] * stride_lat + g * 128 + cols[None, :], mask=ok[:, None], other=0.0)
        s = tl.load(scale_ptr + slot * stride_scale + g, mask=ok, other=0.0)
        tl.store(out_ptr + dst[:, None] * stride_out + g * 128 + cols[None, :],
                 (v.to(tl.float32) * s[:, None]).to(tl.bfloat16), mask=ok[:, None])
    if ROPE_OUT:
        rcols = tl.arange(0, 64)
        rope = tl.load(rope_ptr + slot[:, None] * stride_rope + rcols[None, :], mask=ok[:, None], other=0.0)
        tl.store(out_ptr + dst[:, None] * stride_out + 512 + rcols[None, :], rope, mask=ok[:, None])


def launch_gather_latent(kv_cache, layout: KVLayout, block_table, piece_req, piece_len, piece_offset, max_len, out):
    flat = kv_cache_flat(kv_cache)  # [slots, row bytes]
    row = flat.shape[1]
    lat = flat.view(FP8)
    scales = flat.view(torch.float32)[:, LATENT_DIM // 4:]
    rope_out = out.shape[1] > LATENT_DIM
    rope = flat.view(torch.bfloat16)[:, (LATENT_DIM + 16) // 2:] if rope_out else scales
    grid = (piece_req.shape[0], triton.cdiv(max_len, GATHER_ROWS))
    _gather_latent_kernel[grid](lat, row, scales, row // 4, rope, rope.stride(0), block_table, block_table.stride(0),
                                piece_req, piece_len, piece_offset, out, out.stride(0),
                                BS=kv_cache.shape[1], ROPE_OUT=rope_out, BLOCK=GATHER_ROWS)


@triton.jit
def _gather_slots_kernel(table_ptr, stride_table, req_ptr, len_ptr, off_ptr, out_ptr, BS: tl.constexpr,
                         BLOCK: tl.constexpr):
    slot, dst, ok = _piece_rows(table_ptr, stride_table, req_ptr, len_ptr, off_ptr, BS, BLOCK)
    tl.store(out_ptr + dst, slot.to(tl.int32), mask=ok)


def launch_gather_slots(block_table, piece_req, piece_len, piece_offset, max_len, block_size, out):
    grid = (piece_req.shape[0], triton.cdiv(max_len, MAP_COLS))
    _gather_slots_kernel[grid](block_table, block_table.stride(0), piece_req, piece_len, piece_offset, out,
                               BS=block_size, BLOCK=MAP_COLS)
