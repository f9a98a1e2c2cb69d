"""Kernel launches for sparse MLA (placeholder: the reference twin until the Triton kernels land)."""
from __future__ import annotations

from ...formats import LATENT_DIM
from .reference import sparse_mla_paged_reference, sparse_mla_reference


def launch_prefill(q, kv, indices, sm_scale, topk_length, out, lse, variant):
    o, s = sparse_mla_reference(q, kv, indices, sm_scale, LATENT_DIM, topk_length)
    out.copy_(o)
    lse.copy_(s)


def launch_decode(q, kv_flat, indices, sm_scale, layout, topk_length, out, lse, variant, scratch_o, scratch_lse):
    o, s = sparse_mla_paged_reference(q, kv_flat[:, None], indices, sm_scale, layout, LATENT_DIM, topk_length)
    out.copy_(o)
    lse.copy_(s)
