"""Random serving steps for tests and the serve bench: paged caches holding each request's history,
this step's inputs, and the reference stack that computes the step request by request.

A request is (tokens already cached, tokens scheduled now). Blocks are drawn at random from a shared
pool so block tables are not contiguous; every value is random (never zeros).
"""
from __future__ import annotations

import dataclasses

import torch

from ..config import DSAGeometry
from ..formats import (INDEX_DIM, KVLayout, as_layout, dequantize_indexer_cache, kv_cache_flat, new_indexer_cache,
                       new_kv_cache, slots_from_positions)
from ..ops.cache import write_indexer_cache, write_kv_cache
from ..ops.gather import gather_latent, gather_slots
from ..ops.indexer import kpool_update
from ..ops.indexer.reference import indexer_topk_reference, kpool_topk_reference, pooled_slots
from ..ops.sparse_mla import prefill_row_spec, sparse_mla_decode, sparse_mla_prefill
from ..ops.sparse_mla.reference import sparse_mla_paged_reference
from . import policy
from .indexer import IndexerInputs
from .metadata import Request


@dataclasses.dataclass
class SyntheticStep:
    """Caches with history and one step's inputs (see make_step)."""

    geometry: DSAGeometry
    heads: int
    layout: KVLayout
    block_size: int
    requests: list[Request]
    kv_cache: torch.Tensor
    indexer: IndexerInputs       # its cache holds the history; k/q/weights (+ gate/ape/tail) are this step's
    q: torch.Tensor              # [T, H, D_qk] bf16
    latent: torch.Tensor         # [T, D_qk] bf16, this step's latent rows

    def clone_caches(self) -> "SyntheticStep":
        """The same step over copies of the caches (and k-pool tail state)."""
        tail = self.indexer.tail_state
        ix = dataclasses.replace(self.indexer, cache=self.indexer.cache.clone(),
                                 tail_state=None if tail is None else tail.clone())
        return dataclasses.replace(self, kv_cache=self.kv_cache.clone(), indexer=ix)


def make_step(geometry: DSAGeometry, heads: int, layout: KVLayout | str, spans: list[tuple[int, int]], *,
              block_size: int = 16, device="cpu", spare_blocks: int = 3, index_q_dtype=torch.bfloat16,
              seed: int | None = None) -> SyntheticStep:
    """A step of requests spans = [(cached, scheduled), ...] (decodes first), history written with the ops.

    seed: None draws one from torch's global generator (so a test's seed decides it).
    """
    layout = as_layout(layout)
    if seed is None:
        seed = int(torch.randint(0, 2**31 - 1, (1,)))
    g = torch.Generator(device="cpu").manual_seed(seed)
    gd = torch.Generator(device=device).manual_seed(seed)   # bulk data is drawn where it lives
    p, d, hi = geometry.kpool, geometry.d_qk, geometry.index_n_heads

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=gd, device=device) * scale

    def random_bytes(t):
        t.view(torch.uint8).copy_(torch.randint(0, 256, t.view(torch.uint8).shape, generator=gd, device=device,
                                                dtype=torch.uint8))

    seq = [c + s for c, s in spans]
    nblocks = [-(-n // block_size) for n in seq]
    num_blocks = sum(nblocks) + spare_blocks
    perm = torch.randperm(num_blocks, generator=g).tolist()
    tables, at = [], 0
    for n in nblocks:  # int32 tensors, as an engine passes them (Python lists: prepare() of 128 decodes 0.99 against
        # 0.63 ms on a 2-core CPU, bench/logs/s50/prepare_ab.log)
        tables.append(torch.tensor(perm[at:at + n], dtype=torch.int32))
        at += n
    requests = [Request(c, s, tables[i], state_slot=len(spans) - 1 - i) for i, (c, s) in enumerate(spans)]

    kv_cache = new_kv_cache(num_blocks, block_size, layout, d, device)
    icache = new_indexer_cache(num_blocks, block_size // p, device)
    # random contents everywhere first: a slot nobody wrote must never be read
    if layout is KVLayout.BF16:
        kv_cache.copy_(randn(*kv_cache.shape))
    else:
        random_bytes(kv_cache)
    random_bytes(icache)
    tail = randn(len(spans), p - 1, 2 * INDEX_DIM) if p > 1 else None
    ape = randn(p, INDEX_DIM, scale=0.1) if p > 1 else None

    # history: every cached token, as earlier steps wrote it
    table = torch.zeros((len(spans), max(nblocks)), dtype=torch.int32)
    for i, t in enumerate(tables):
        table[i, :len(t)] = t  # already int32 tensors (torch.tensor(t) warned and copied)
    hist_req = torch.cat([torch.full((c,), i, dtype=torch.int32) for i, (c, _) in enumerate(spans)])
    hist_pos = torch.cat([torch.arange(c, dtype=torch.int32) for c, _ in spans])
    n_hist = hist_pos.numel()
    if n_hist:
        slots = slots_from_positions(table, hist_req, hist_pos, block_size).to(device)
        write_kv_cache(randn(n_hist, d, scale=0.5).bfloat16(), kv_cache, slots)
        keys = randn(n_hist, INDEX_DIM).bfloat16()
        if p > 1:
            kpool_update(keys, randn(n_hist, INDEX_DIM), ape, hist_pos.to(device),
                         hist_req.to(device), table.to(device), icache, tail,
                         torch.tensor([r.state_slot for r in requests], dtype=torch.int32, device=device))
        else:
            write_indexer_cache(keys, icache, slots)

    t = sum(s for _, s in spans)
    iq = randn(t, hi, INDEX_DIM)
    ix = IndexerInputs(q=iq.to(index_q_dtype), weights=randn(t, hi, scale=(hi * INDEX_DIM) ** -0.5),
                       k=randn(t, INDEX_DIM).bfloat16(), cache=icache,
                       gate=randn(t, INDEX_DIM) if p > 1 else None, ape=ape, tail_state=tail)
    return SyntheticStep(geometry, heads, layout, block_size, requests, kv_cache, ix,
                         q=randn(t, heads, d).bfloat16(), latent=randn(t, d, scale=0.5).bfloat16())


@dataclasses.dataclass
class ReferenceResult:
    out: torch.Tensor        # fp32 [T, H, 512]
    slots: torch.Tensor      # int32 [T, width]: the selected tokens' cache slots, -1 unused
    step: SyntheticStep      # the caches as the reference left them (this step's rows written)


def reference_step(s: SyntheticStep) -> ReferenceResult:
    """The step by the reference stack, request by request, over copies of the caches.

    Writes this step's rows (reference cache writes), then per request: the fp32 indexer over its
    dequantized keys, top-k positions (k-pool: pools, expanded with the tail), slots through the block
    table, sparse MLA over the paged cache.
    """
    from ..ops.cache.reference import write_indexer_cache_reference, write_kv_cache_reference
    from ..ops.indexer.reference import kpool_update_reference
    s = s.clone_caches()
    g, bs, p = s.geometry, s.block_size, s.geometry.kpool
    dev = s.q.device
    qs = [0]
    for r in s.requests:
        qs.append(qs[-1] + r.num_scheduled)
    width = max(len(r.block_table) for r in s.requests)
    table = torch.zeros((len(s.requests), width), dtype=torch.int32)
    for i, r in enumerate(s.requests):
        table[i, :len(r.block_table)] = torch.as_tensor(r.block_table, dtype=torch.int32)
    table = table.to(dev)
    req = torch.cat([torch.full((r.num_scheduled,), i, dtype=torch.int32) for i, r in enumerate(s.requests)]).to(dev)
    pos = torch.cat([torch.arange(r.num_cached, r.seq_len, dtype=torch.int32) for r in s.requests]).to(dev)
    write_kv_cache_reference(s.latent, s.kv_cache, slots_from_positions(table, req, pos, bs), s.layout)
    ix = s.indexer
    if p > 1:
        kpool_update_reference(ix.k, ix.gate, ix.ape, pos, req, table, ix.cache, ix.tail_state,
                               torch.tensor([r.state_slot for r in s.requests], dtype=torch.int32, device=dev))
    else:
        write_indexer_cache_reference(ix.k, ix.cache, slots_from_positions(table, req, pos, bs))
    keys = dequantize_indexer_cache(ix.cache)
    outs, slots = [], []
    for i, r in enumerate(s.requests):
        a, b = qs[i], qs[i + 1]
        rows = torch.full((b - a,), i, dtype=torch.int32, device=dev)
        if p > 1:
            pools = torch.arange(r.seq_len // p, device=dev)
            pooled = keys[pooled_slots(table, torch.full_like(pools, i), pools, bs // p)]
            sel = kpool_topk_reference(ix.q[a:b].float(), ix.weights[a:b], pooled, torch.zeros_like(rows), pos[a:b],
                                       g.index_topk, p)
        else:
            allpos = torch.arange(r.seq_len, device=dev)
            k_r = keys[slots_from_positions(table, torch.full_like(allpos, i), allpos, bs).long()]
            sel = indexer_topk_reference(ix.q[a:b].float(), ix.weights[a:b], k_r, torch.zeros_like(rows),
                                         pos[a:b] + 1, g.index_topk)
        sl = slots_from_positions(table, rows[:, None].expand_as(sel), sel, bs)
        o, _ = sparse_mla_paged_reference(s.q[a:b], s.kv_cache, sl, g.softmax_scale, s.layout)
        outs.append(o)
        slots.append(sl)
    return ReferenceResult(torch.cat(outs), torch.cat(slots), s)


def indices_as_slots(attn, step, indices: torch.Tensor) -> torch.Tensor:
    """A backend's indices [T, width] as cache slots, comparable with ``ReferenceResult.slots``: on the
    gathered path its prefill rows hold rows of the gathered context, and on the bf16 path the rows of a keyed
    gather chunk (DSAAttention.keyed_prefill_keys) keys, the same offsets: mapped back here through the host
    metadata (-1 kept); other rows already hold slots (returned as they are)."""
    host, d, dev = step.host, step.host.num_decode_tokens, indices.device
    if attn.path is policy.Path.FP8_GATHERED:
        spans = [(d, host.num_tokens)]
    elif attn.path is policy.Path.BF16_PREFILL:
        spans = [(c.row_start, c.row_end) for c, k in zip(host.gather_chunks, attn.keyed_prefill_keys(step)) if k]
    else:
        spans = []
    out = indices.clone()
    for a, b in spans:
        pos = torch.where(indices[a:b] >= 0, indices[a:b] - host.gather_base[a:b, None].to(dev), -1)
        req = host.token_req[a:b, None].to(dev).expand_as(pos)
        out[a:b] = slots_from_positions(host.block_table.to(dev), req, pos, attn.limits.block_size)
    return out


def allocating_attention(attn, step, s: SyntheticStep, indices: torch.Tensor) -> torch.Tensor:
    """The kernels a backend's path runs, on its indices [T, width], every output allocated by the ops
    themselves (no out=, lse=, scratch=): what the backend's workspace-staged outputs must equal bit for bit. A call
    the backend gives a row_scratch (bf16_row_scratch, gathered_row_scratch) gets one allocated here: row_scratch
    picks the kernel (converted rows, gluon_pair), so the mirror must pass it too."""
    t, d = step.host.num_tokens, step.host.num_decode_tokens
    scale = attn.sm_scale

    def rows(n, on):  # a fresh row_scratch where the backend passes one (DSAAttention._row_scratch)
        if not (n and on):
            return None
        spec = prefill_row_spec(n, attn.geometry.d_qk)
        return [torch.empty(shape, dtype=dt, device=s.q.device) for shape, dt in spec]

    def variant(kernel, n, num_slots=None):
        v = policy.choose_variant(kernel, attn.heads, n, attn.table, attn.sm_count,
                                  attn.kv_layout if kernel == "decode" else None)
        if num_slots is None:
            return v
        return policy.prefill_variant_for_slots(v, attn.heads, num_slots, attn.width, attn.device)

    if attn.path is policy.Path.BF16_PREFILL:
        # the decode rows apart (policy.bf16_decode_variant) when the backend runs them so
        d = d if attn.bf16_decodes_apart else 0
        flat = kv_cache_flat(s.kv_cache)
        keyed = attn.keyed_prefill_keys(step)
        calls = [(0, d, policy.bf16_decode_variant(attn.heads), None)]
        parts = []
        if d and attn._bf16_decode_kernel_runs():  # over the paged cache (DSAAttention.bf16_decode_kernel)
            v = attn._bf16_decode[1] or variant("decode", d)
            parts.append(sparse_mla_decode(s.q[:d], s.kv_cache, indices[:d], scale, variant=v)[0])
            calls = []
        if not keyed:
            calls.append((d, t, variant("prefill", t - d, flat.shape[0]), None))
        gp = step.gather_pieces
        for c, p0, k in zip(step.host.gather_chunks, step.gather_piece_start, keyed):
            key_slots = None
            if k:  # the chunk's rows hold keys: the slot of each, from its pieces
                p1 = p0 + len(c.pieces)
                key_slots = gather_slots(step.block_table, gp[0, p0:p1], gp[1, p0:p1], gp[2, p0:p1],
                                         max(p.num_keys for p in c.pieces), attn.limits.block_size,
                                         torch.empty(k, dtype=torch.int32, device=s.q.device))
            a, b = c.row_start, c.row_end
            calls.append((a, b, variant("prefill", b - a, k or flat.shape[0]), key_slots))
        return torch.cat(parts + [sparse_mla_prefill(s.q[a:b], flat, indices[a:b], scale, variant=v, key_slots=ks,
                                                     row_scratch=rows(ks.shape[0] if ks is not None else 0,
                                                                      attn._rows_on))[0]
                                  for a, b, v, ks in calls if a < b])
    if attn.path is policy.Path.FP8_MIXED:
        return sparse_mla_decode(s.q, s.kv_cache, indices, scale, variant=variant("decode", t))[0]
    parts = [sparse_mla_decode(s.q[:d], s.kv_cache, indices[:d], scale, variant=variant("decode", d))[0]]
    gp = step.gather_pieces
    for c, p0 in zip(step.host.gather_chunks, step.gather_piece_start):
        p1 = p0 + len(c.pieces)
        context = torch.empty(c.num_keys, attn.geometry.d_qk, dtype=torch.bfloat16, device=s.q.device)
        gather_latent(s.kv_cache, step.block_table, gp[0, p0:p1], gp[1, p0:p1], gp[2, p0:p1],
                      max(p.num_keys for p in c.pieces), context)
        a, b = c.row_start, c.row_end
        parts.append(sparse_mla_prefill(s.q[a:b], context, indices[a:b], scale,
                                        variant=variant("prefill", b - a, c.num_keys),
                                        row_scratch=rows(c.num_keys, attn._gathered_rows_on))[0])
    return torch.cat(parts)
