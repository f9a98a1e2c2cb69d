"""Triton kernels of the indexer logits (placeholder: reference until the kernels land)."""
from __future__ import annotations

from . import reference as _ref


def launch_logits(q, weights, k, k_scale, ks, ke, out):
    out.copy_(_ref.indexer_logits_relative_reference(q, weights, k, k_scale, ks, ke, out.shape[1]))


def launch_logits_paged(q, weights, indexer_cache, block_table, row_req, row_len, out):
    from . import _paged_reference
    _paged_reference(q, weights, indexer_cache, block_table, row_req, row_len, out)
