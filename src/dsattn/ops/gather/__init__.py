"""Gathers the serving backend runs between the indexer and sparse MLA (SPEC section 7).

- ``positions_to_slots``: indexer output (positions in each request's sequence, -1 unused) -> cache
  slots through the block table, -1 kept.
- ``positions_to_offsets``: positions -> rows of a gathered buffer (``row_base[r] + position``), -1 kept.
- ``gather_indexer_keys``: requests' first keys out of the paged 132-byte indexer cache into a flat fp8
  key array with fp32 scales (the prefill indexer's keys).
- ``gather_latent``: requests' first latent rows out of an fp8 cache, dequantized into a flat bf16
  buffer (the gathered-context path's prefill context).
- ``gather_slots``: the cache slots of requests' first positions into a flat int32 array (the bf16 path's
  key -> slot map: sparse_mla_prefill's ``key_slots``).

A "piece" p sends positions 0 .. piece_len[p] - 1 of request piece_req[p] (its block-table row) to
rows piece_offset[p] .. of the output. Each function is a ``torch.library`` custom op with a fake,
writes into caller buffers (allocating only an ``out`` that is not given), runs the Triton kernels on
CUDA (or under ``TRITON_INTERPRET=1``) and the reference twins otherwise. Arguments are checked first.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..._checks import check_int, check_same_device, check_tensor
from ...formats import FP8, INDEX_DIM, INDEX_ROW_BYTES, LATENT_DIM, KVLayout, infer_layout
from .._eager import op_or_body
from .._triton import kernels_available
from . import reference as _ref

__all__ = ["positions_to_slots", "positions_to_offsets", "gather_indexer_keys", "gather_latent", "gather_slots"]

_I32 = torch.int32


def _check_positions(positions, out):
    check_tensor("positions", positions, dtype=_I32, ndim=2)
    if out is None:
        out = torch.empty(positions.shape, dtype=_I32, device=positions.device)
    check_tensor("out", out, dtype=_I32, shape=tuple(positions.shape))
    return out


def positions_to_slots(positions: torch.Tensor, row_req: torch.Tensor, block_table: torch.Tensor, block_size: int,
                       out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """positions [R, W] int32 (any row stride; -1 = unused), row_req [R] int32 (block-table row of each
    row), block_table [B, M] int32, block_size -> out [R, W] int32 slots
    ``block_table[row_req[r], pos // bs] * bs + pos % bs``; -1 where pos < 0 or its block is past M.
    out may be positions itself (rewritten in place). Returns out."""
    out = _check_positions(positions, out)
    r = positions.shape[0]
    check_tensor("row_req", row_req, dtype=_I32, shape=(r,))
    check_tensor("block_table", block_table, dtype=_I32, ndim=2)
    block_size = check_int("block_size", block_size, lo=1)
    check_same_device(positions=positions, row_req=row_req, block_table=block_table, out=out)
    if positions.numel():
        op_or_body("positions_to_slots", _to_slots_impl)(positions, row_req, block_table, block_size, out)
    return out


def _to_slots_impl(positions: torch.Tensor, row_req: torch.Tensor, block_table: torch.Tensor, block_size: int,
                   out: torch.Tensor) -> None:
    if kernels_available(positions.device):
        from .kernels import launch_map_positions
        launch_map_positions(positions, row_req, block_table, block_size, None, out)
    else:
        pos = positions.clone()
        pos[pos // block_size >= block_table.shape[1]] = -1
        out.copy_(_ref.positions_to_slots_reference(pos, row_req, block_table, block_size))


_to_slots_op = torch.library.custom_op("dsattn::positions_to_slots", _to_slots_impl, mutates_args=("out",))


@_to_slots_op.register_fake
def _(positions, row_req, block_table, block_size, out) -> None:
    return None


def positions_to_offsets(positions: torch.Tensor, row_base: torch.Tensor,
                         out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """positions [R, W] int32 (-1 = unused), row_base [R] int32 -> out [R, W] int32 = row_base[r] + pos,
    -1 kept. out may be positions itself. Returns out."""
    out = _check_positions(positions, out)
    check_tensor("row_base", row_base, dtype=_I32, shape=(positions.shape[0],))
    check_same_device(positions=positions, row_base=row_base, out=out)
    if positions.numel():
        op_or_body("positions_to_offsets", _to_offsets_impl)(positions, row_base, out)
    return out


def _to_offsets_impl(positions: torch.Tensor, row_base: torch.Tensor, out: torch.Tensor) -> None:
    if kernels_available(positions.device):
        from .kernels import launch_map_positions
        launch_map_positions(positions, None, None, 1, row_base, out)
    else:
        out.copy_(_ref.positions_to_offsets_reference(positions, row_base))


_to_offsets_op = torch.library.custom_op("dsattn::positions_to_offsets", _to_offsets_impl, mutates_args=("out",))


@_to_offsets_op.register_fake
def _(positions, row_base, out) -> None:
    return None


def _check_pieces(block_table, piece_req, piece_len, piece_offset, max_len):
    check_tensor("block_table", block_table, dtype=_I32, ndim=2)
    check_tensor("piece_req", piece_req, dtype=_I32, ndim=1)
    n = piece_req.shape[0]
    check_tensor("piece_len", piece_len, dtype=_I32, shape=(n,))
    check_tensor("piece_offset", piece_offset, dtype=_I32, shape=(n,))
    return n, check_int("max_len", max_len, lo=0)


def gather_indexer_keys(indexer_cache: torch.Tensor, block_table: torch.Tensor, piece_req: torch.Tensor,
                        piece_len: torch.Tensor, piece_offset: torch.Tensor, max_len: int, out_k: torch.Tensor,
                        out_scale: torch.Tensor) -> None:
    """Copy requests' first indexer keys into a flat key array.

    indexer_cache uint8 [num_blocks, block_size, 132] contiguous (``formats.indexer_cache_views``
    layout); block_table [B, M] int32; piece_req / piece_len / piece_offset [P] int32; max_len >= every
    piece_len (a host int: it sizes the launch); out_k [N, 128] fp8 e4m3 contiguous, out_scale [N] fp32.
    Rows no piece covers are left as they are. The values are trusted, as reading them would cost a device
    sync: block ids, piece_req < B, piece_offset + piece_len <= N and piece_len <= max_len (the backend
    builds the pieces on the host from validated metadata); the kernel does not bound-check them.
    """
    if isinstance(indexer_cache, torch.Tensor) and indexer_cache.dim() == 4 and indexer_cache.shape[2] == 1:
        indexer_cache = indexer_cache.squeeze(2)
    check_tensor("indexer_cache", indexer_cache, dtype=torch.uint8, shape=(None, None, INDEX_ROW_BYTES))
    if not indexer_cache.is_contiguous():
        raise ValueError("indexer_cache must be contiguous")
    n, max_len = _check_pieces(block_table, piece_req, piece_len, piece_offset, max_len)
    check_tensor("out_k", out_k, dtype=FP8, ndim=2, shape=(None, INDEX_DIM))
    if not out_k.is_contiguous():
        raise ValueError("out_k must be contiguous")
    check_tensor("out_scale", out_scale, dtype=torch.float32, shape=(out_k.shape[0],))
    check_same_device(indexer_cache=indexer_cache, block_table=block_table, piece_req=piece_req,
                      piece_len=piece_len, piece_offset=piece_offset, out_k=out_k, out_scale=out_scale)
    if n and max_len:
        op_or_body("gather_indexer_keys", _gather_keys_impl)(indexer_cache, block_table, piece_req, piece_len,
                                                             piece_offset, max_len, out_k, out_scale)


def _gather_keys_impl(indexer_cache: torch.Tensor, block_table: torch.Tensor, piece_req: torch.Tensor,
                      piece_len: torch.Tensor, piece_offset: torch.Tensor, max_len: int, out_k: torch.Tensor,
                      out_scale: torch.Tensor) -> None:
    if kernels_available(indexer_cache.device):
        from .kernels import launch_gather_indexer_keys
        launch_gather_indexer_keys(indexer_cache, block_table, piece_req, piece_len, piece_offset, max_len, out_k,
                                   out_scale)
    else:
        _ref.gather_indexer_keys_reference(indexer_cache, block_table, piece_req, piece_len, piece_offset, out_k,
                                           out_scale)


_gather_keys_op = torch.library.custom_op("dsattn::gather_indexer_keys", _gather_keys_impl,
                                          mutates_args=("out_k", "out_scale"))


@_gather_keys_op.register_fake
def _(indexer_cache, block_table, piece_req, piece_len, piece_offset, max_len, out_k, out_scale) -> None:
    return None


def gather_latent(kv_cache: torch.Tensor, block_table: torch.Tensor, piece_req: torch.Tensor,
                  piece_len: torch.Tensor, piece_offset: torch.Tensor, max_len: int,
                  out: torch.Tensor) -> torch.Tensor:
    """Dequantize requests' first latent rows out of an fp8 cache into a flat bf16 buffer.

    kv_cache uint8 [num_blocks, block_size, 656 | 528] (fp8_ds_mla / fp8_ds_mla_nope; FlashMLA's
    [.., 1, row] accepted), contiguous; pieces as in gather_indexer_keys; out [N, D_qk] bf16 (any row
    stride, contiguous last dim), D_qk 576 (fp8_ds_mla only: latent then RoPE) or 512. Rows no piece
    covers are left as they are. Returns out.
    """
    check_tensor("kv_cache", kv_cache, dtype=torch.uint8, ndim=(3, 4))
    if kv_cache.dim() == 4 and kv_cache.shape[2] != 1:
        raise ValueError(f"kv_cache must have shape [blocks, block_size, row] or [.., 1, row], got "
                         f"{list(kv_cache.shape)}")
    if not kv_cache.is_contiguous():
        raise ValueError("kv_cache must be contiguous")
    layout = infer_layout(kv_cache)
    n, max_len = _check_pieces(block_table, piece_req, piece_len, piece_offset, max_len)
    check_tensor("out", out, dtype=torch.bfloat16, ndim=2)
    d = out.shape[1]
    if d != LATENT_DIM and not (d == LATENT_DIM + 64 and layout is KVLayout.FP8_DS_MLA):
        raise ValueError(f"out must have 512 columns, or 576 for an fp8_ds_mla cache, got {d}")
    check_same_device(kv_cache=kv_cache, block_table=block_table, piece_req=piece_req, piece_len=piece_len,
                      piece_offset=piece_offset, out=out)
    if n and max_len:
        op_or_body("gather_latent", _gather_latent_impl)(kv_cache, block_table, piece_req, piece_len, piece_offset,
                                                         max_len, out)
    return out


def _gather_latent_impl(kv_cache: torch.Tensor, block_table: torch.Tensor, piece_req: torch.Tensor,
                        piece_len: torch.Tensor, piece_offset: torch.Tensor, max_len: int, out: torch.Tensor) -> None:
    layout = infer_layout(kv_cache)
    if kernels_available(kv_cache.device):
        from .kernels import launch_gather_latent
        launch_gather_latent(kv_cache, layout, block_table, piece_req, piece_len, piece_offset, max_len, out)
    else:
        _ref.gather_latent_reference(kv_cache, layout, block_table, piece_req, piece_len, piece_offset, out)


_gather_latent_op = torch.library.custom_op("dsattn::gather_latent", _gather_latent_impl, mutates_args=("out",))


@_gather_latent_op.register_fake
def _(kv_cache, block_table, piece_req, piece_len, piece_offset, max_len, out) -> None:
    return None


def gather_slots(block_table: torch.Tensor, piece_req: torch.Tensor, piece_len: torch.Tensor,
                 piece_offset: torch.Tensor, max_len: int, block_size: int, out: torch.Tensor) -> torch.Tensor:
    """The cache slot of each piece position: out[piece_offset[p] + j] = block_table[piece_req[p], j // bs] * bs +
    j % bs for j < piece_len[p] (what gather_latent reads for that row). Pieces as in gather_indexer_keys (trusted in
    the same way); out [N] int32 contiguous; entries no piece covers are left as they are. Returns out."""
    n, max_len = _check_pieces(block_table, piece_req, piece_len, piece_offset, max_len)
    block_size = check_int("block_size", block_size, lo=1)
    check_tensor("out", out, dtype=_I32, ndim=1)  # (and a contiguous last dimension: contiguous)
    check_same_device(block_table=block_table, piece_req=piece_req, piece_len=piece_len, piece_offset=piece_offset,
                      out=out)
    if n and max_len:
        op_or_body("gather_slots", _gather_slots_impl)(block_table, piece_req, piece_len, piece_offset, max_len,
                                                       block_size, out)
    return out


def _gather_slots_impl(block_table: torch.Tensor, piece_req: torch.Tensor, piece_len: torch.Tensor,
                       piece_offset: torch.Tensor, max_len: int, block_size: int, out: torch.Tensor) -> None:
    if kernels_available(out.device):
        from .kernels import launch_gather_slots
        launch_gather_slots(block_table, piece_req, piece_len, piece_offset, max_len, block_size, out)
    else:
        _ref.gather_slots_reference(block_table, piece_req, piece_len, piece_offset, block_size, out)


_gather_slots_op = torch.library.custom_op("dsattn::gather_slots", _gather_slots_impl, mutates_args=("out",))


@_gather_slots_op.register_fake
def _(block_table, piece_req, piece_len, piece_offset, max_len, block_size, out) -> None:
    return None
