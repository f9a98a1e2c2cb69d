"""Triton kernels of the k-pool indexer (placeholder: reference until the kernels land)."""
from __future__ import annotations

from . import reference as _ref


def launch_kpool_update(k, gate, ape, positions, token_req, block_table, pooled_cache, tail_state, state_slot):
    _ref.kpool_update_reference(k, gate, ape, positions, token_req, block_table, pooled_cache, tail_state,
                                state_slot)


def launch_kpool_expand(pool_topk, positions, kpool, out):
    out.copy_(_ref.kpool_expand(pool_topk, positions, kpool))
