"""``dsattn demo``: one scaled-down GLM-5.3-Flash DSA attention step, end to end, on this machine.

A few requests share a paged latent cache (fp8_ds_mla_nope, the 528-byte layout of NoPE models) and a
pooled indexer key cache. Some decode one token, others run a prefill chunk over context that is
already cached. The step writes the new tokens into the caches, runs the k-pool indexer (pooled keys,
pool top-k, expansion and tail), maps the selected positions to cache slots and runs sparse MLA over
the paged cache. It prints what it did: shapes, time of each stage, memory of each cache.
"""
from __future__ import annotations

import argparse
import time

import torch

from .config import preset
from .formats import FP8, INDEX_ROW_BYTES, KVLayout, new_indexer_cache, new_kv_cache, slots_from_positions
from .ops.cache.reference import write_indexer_cache_reference, write_kv_cache_reference
from .ops.indexer.reference import (indexer_logits_paged_reference, kpool_expand, kpool_pooled_keys)
from .ops.sparse_mla.reference import sparse_mla_paged_reference
from .ops.topk.reference import topk_reference


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return str(n)


class _Stopwatch:
    def __init__(self):
        self.rows: list[tuple[str, float, str]] = []

    def run(self, name: str, shape: str, fn):
        t0 = time.perf_counter()
        out = fn()
        self.rows.append((name, (time.perf_counter() - t0) * 1e3, shape))
        return out


def run_demo(*, tp: int = 8, topk: int = 256, block_size: int = 64, seed: int = 0, device: str = "cpu",
             requests: list[tuple[int, int]] | None = None, quiet: bool = False) -> dict:
    """Run the demo step; returns its outputs and statistics (used by the tests).

    requests: (tokens already cached, tokens scheduled now) per request; decodes (1 scheduled) first.
    """
    torch.manual_seed(seed)
    geo = preset("glm-5.3-flash").scaled(index_topk=topk)
    heads = geo.heads_per_rank(tp)
    p = geo.kpool
    d_qk, hi, di = geo.d_qk, geo.index_n_heads, geo.index_head_dim
    layout = KVLayout.FP8_DS_MLA_NOPE
    requests = requests or [(1500, 1), (700, 1), (333, 1), (1024, 512), (0, 300)]
    requests = sorted(requests, key=lambda r: r[1] > 1)  # decodes first (SPEC 7)
    seq_lens = [c + s for c, s in requests]

    # Paged caches: each request's blocks drawn at random from a shared pool, so tables are not contiguous.
    blocks_per_req = [-(-n // block_size) for n in seq_lens]
    num_blocks = sum(blocks_per_req) + 4
    perm = torch.randperm(num_blocks, device=device)
    max_blocks = max(blocks_per_req)
    block_table = torch.full((len(requests), max_blocks), 0, dtype=torch.int32, device=device)
    at = 0
    for r, nb in enumerate(blocks_per_req):
        block_table[r, :nb] = perm[at:at + nb].to(torch.int32)
        at += nb
    kv_cache = new_kv_cache(num_blocks, block_size, layout, d_qk, device)
    pooled_cache = new_indexer_cache(num_blocks, block_size // p, device)
    kv_cache.fill_(0)
    pooled_cache.fill_(0)

    # Every token of every request: latent row, indexer key and gate. The model would produce these
    # from hidden states; the demo draws them.
    total = sum(seq_lens)
    latent = torch.randn(total, d_qk, device=device) * 0.5
    idx_key = torch.randn(total, di, device=device)
    gate = torch.randn(total, di, device=device)
    ape = torch.randn(p, di, device=device) * 0.1
    starts = torch.tensor([0] + seq_lens[:-1], device=device).cumsum(0)
    req_all = torch.repeat_interleave(torch.arange(len(requests), device=device),
                                      torch.tensor(seq_lens, device=device))
    pos_all = torch.arange(total, device=device) - starts[req_all]
    slot_all = slots_from_positions(block_table, req_all, pos_all, block_size)

    # History: what earlier steps wrote (the cached part of each request).
    cached = pos_all < torch.tensor([c for c, _ in requests], device=device)[req_all]
    write_kv_cache_reference(latent[cached], kv_cache, slot_all[cached], layout)

    def pool_slots(req, pool):
        return slots_from_positions(block_table, req, pool, block_size // p)

    def write_pools(mask):
        """Pooled keys of the pools whose last token is in `mask`, into the pooled cache."""
        last = mask & (pos_all % p == p - 1)
        ends = torch.nonzero(last).squeeze(1)
        members = ends[:, None] - (p - 1) + torch.arange(p, device=device)
        pooled = kpool_pooled_keys(idx_key[members], gate[members], ape)
        write_indexer_cache_reference(pooled, pooled_cache, pool_slots(req_all[ends], pos_all[ends] // p))
        return len(ends)

    write_pools(cached)

    # The step: scheduled tokens.
    sched = ~cached
    t_req, t_pos, t_slot = req_all[sched], pos_all[sched], slot_all[sched]
    n_tok = int(sched.sum())
    q_latent = torch.randn(n_tok, heads, d_qk, device=device).to(torch.bfloat16)
    q_index = torch.randn(n_tok, hi, di, device=device)
    weights = torch.randn(n_tok, hi, device=device) * (hi ** -0.5) * (di ** -0.5)
    sw = _Stopwatch()
    sw.run("write latent rows", f"[{n_tok}, {d_qk}] -> {layout.value}",
           lambda: write_kv_cache_reference(latent[sched], kv_cache, t_slot, layout))
    new_pools = sw.run("k-pool: pool + write keys", f"{p} tokens/pool -> 132 B rows",
                       lambda: write_pools(sched))
    n_vis_pools = ((t_pos + 1) // p).to(torch.int32)
    w_pools = int(n_vis_pools.max())
    logits = sw.run("indexer logits (paged)", f"[{n_tok}, {hi}x{di}] x {w_pools} pools",
                    lambda: indexer_logits_paged_reference(q_index, weights, pooled_cache, block_table, t_req,
                                                           n_vis_pools, max_len=w_pools))
    pool_topk = sw.run("top-k pools", f"k={topk // p} of {w_pools}",
                       lambda: topk_reference(logits, torch.zeros_like(n_vis_pools), n_vis_pools, topk // p))
    positions = sw.run("expand + tail", f"width {geo.topk_width}", lambda: kpool_expand(pool_topk, t_pos, p))
    slots = sw.run("positions -> slots", f"[{n_tok}, {geo.topk_width}]",
                   lambda: slots_from_positions(block_table, t_req[:, None].expand_as(positions), positions,
                                                block_size))
    out, lse = sw.run("sparse MLA (paged)", f"q [{n_tok}, {heads}, {d_qk}], {heads} heads/rank",
                      lambda: sparse_mla_paged_reference(q_latent, kv_cache, slots, geo.softmax_scale, layout))

    valid = (positions >= 0).sum(1)
    kv_bytes = kv_cache.numel() * kv_cache.element_size()
    pool_bytes = pooled_cache.numel() * pooled_cache.element_size()
    stats = {
        "geometry": geo, "heads_per_rank": heads, "tokens": n_tok, "requests": requests,
        "new_pools": new_pools, "kv_cache_bytes": kv_bytes, "pooled_cache_bytes": pool_bytes,
        "stages": sw.rows, "out": out, "lse": lse, "positions": positions, "slots": slots,
    }
    if not quiet:
        print(f"dsattn demo: one DSA attention step of {geo.name} (scaled: topk {topk}), TP {tp} -> "
              f"{heads} heads per rank, D_qk {d_qk}, kpool {p}, device {device}")
        print(f"requests (cached + scheduled): "
              + ", ".join(f"{c}+{s}" for c, s in requests)
              + f"  ->  {sum(1 for _, s in requests if s == 1)} decodes, "
              f"{sum(1 for _, s in requests if s > 1)} prefill chunks, {n_tok} tokens")
        print(f"caches: latent {layout.value} [{num_blocks} blocks x {block_size}, {layout.row_bytes(d_qk)} B]"
              f" = {_fmt_bytes(kv_bytes)}; pooled indexer keys [{num_blocks} x {block_size // p},"
              f" {INDEX_ROW_BYTES} B] = {_fmt_bytes(pool_bytes)}")
        print(f"{'stage':28s} {'ms':>9s}  shape")
        for name, ms, shape in sw.rows:
            print(f"{name:28s} {ms:9.2f}  {shape}")
        print(f"selected per token: min {int(valid.min())}, max {int(valid.max())} of width {geo.topk_width}; "
              f"pools completed this step: {new_pools}")
        print(f"output: out {list(out.shape)} (finite: {bool(torch.isfinite(out).all())}), "
              f"lse {list(lse.shape)}, total {sum(r[1] for r in sw.rows):.1f} ms")
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dsattn demo", description=__doc__.splitlines()[0])
    ap.add_argument("--tp", type=int, default=8, help="tensor-parallel size (heads per rank = 64 / tp)")
    ap.add_argument("--topk", type=int, default=256, help="indexer top-k (2048 in the real model)")
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    run_demo(tp=args.tp, topk=args.topk, block_size=args.block_size, device=args.device, seed=args.seed)
    return 0
