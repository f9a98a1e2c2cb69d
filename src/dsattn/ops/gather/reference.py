"""Reference twins of the backend's gathers: positions -> cache slots (or offsets into a gathered
buffer), and a request's first tokens gathered out of a paged cache (indexer keys, or latent rows
dequantized to bf16).

A "piece" is (request, length, offset): positions 0 .. length - 1 of the request (its block-table row)
go to rows offset .. offset + length - 1 of the flat output.
"""
from __future__ import annotations

import torch

from ...formats import KVLayout, indexer_cache_views, kv_cache_flat, slots_from_positions, unpack_latent_rows


def positions_to_slots_reference(positions: torch.Tensor, row_req: torch.Tensor, block_table: torch.Tensor,
                                 block_size: int) -> torch.Tensor:
    """positions [R, W] int (-1 unused), row_req [R] -> int32 slots [R, W], -1 kept."""
    return slots_from_positions(block_table, row_req[:, None].expand_as(positions), positions, block_size)


def positions_to_offsets_reference(positions: torch.Tensor, row_base: torch.Tensor) -> torch.Tensor:
    """positions [R, W] int, row_base [R] -> int32 row_base[r] + positions, -1 kept."""
    return torch.where(positions >= 0, positions + row_base[:, None], -1).to(torch.int32)


def _piece_slots(block_table, piece_req, piece_len, piece_offset, block_size, num_rows):
    """Source slot of each output row [num_rows] (-1 for rows no piece covers)."""
    src = torch.full((num_rows,), -1, dtype=torch.int64)
    for r, n, o in zip(piece_req.tolist(), piece_len.tolist(), piece_offset.tolist()):
        pos = torch.arange(n)
        src[o:o + n] = slots_from_positions(block_table.cpu(), torch.full_like(pos, r), pos, block_size).long()
    return src.to(block_table.device)


def gather_indexer_keys_reference(indexer_cache, block_table, piece_req, piece_len, piece_offset, out_k, out_scale):
    """Copy each piece's fp8 keys and fp32 scales into out_k [N, 128] fp8 / out_scale [N] fp32 (rows no
    piece covers are left alone)."""
    values, scales = indexer_cache_views(indexer_cache)
    bs = values.shape[1]
    src = _piece_slots(block_table, piece_req, piece_len, piece_offset, bs, out_k.shape[0])
    keep = src >= 0
    s = src[keep]
    out_k[keep] = values[s // bs, s % bs]
    out_scale[keep] = scales[s // bs, s % bs]


def gather_latent_reference(kv_cache, layout: KVLayout, block_table, piece_req, piece_len, piece_offset, out):
    """Dequantize each piece's latent rows into out [N, D_qk] bf16 (D_qk 512 or 576)."""
    flat = kv_cache_flat(kv_cache)
    src = _piece_slots(block_table, piece_req, piece_len, piece_offset, kv_cache.shape[1], out.shape[0])
    keep = src >= 0
    out[keep] = unpack_latent_rows(flat[src[keep]], layout, out.shape[1]).to(torch.bfloat16)



def gather_slots_reference(block_table, piece_req, piece_len, piece_offset, block_size, out):
    """out[piece_offset[p] + j] = the slot of position j of request piece_req[p] (rows no piece covers left alone)."""
    src = _piece_slots(block_table, piece_req, piece_len, piece_offset, block_size, out.shape[0])
    keep = src >= 0
    out[keep] = src[keep].to(out.dtype)
