"""``dsattn demo``: one scaled-down GLM-5.3-Flash DSA attention step, end to end, on this machine.

A few requests share a paged latent cache (fp8_ds_mla_nope, the 528-byte layout of NoPE models) and a
pooled indexer key cache holding their history. Some decode one token, others run a prefill chunk over
context that is already cached. The step goes through the serving backend (``DSAAttention``): batch
metadata, cache writes, the k-pool indexer (pooled keys, pool top-k, expansion and tail), positions to
slots, sparse MLA on the path SPEC 7 picks, every intermediate in the workspace. A second layer shares
the first one's top-k. The same step is then computed request by request by the reference stack, and
the demo prints what it did: shapes, times, workspace and cache memory, and the difference.

On a CUDA machine the ops run their Triton kernels; on a CPU they run their PyTorch reference twins
(or the Triton kernels under the interpreter with ``TRITON_INTERPRET=1``, much slower).
"""
from __future__ import annotations

import argparse
import time

import torch

from .backend.attention import DSAAttention
from .backend.synthetic import make_step, reference_step
from .config import preset
from .formats import INDEX_ROW_BYTES, KVLayout
from .ops._triton import kernels_available


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_demo(*, tp: int = 8, topk: int = 256, block_size: int = 64, seed: int = 0, device: str = "cpu",
             spans: list[tuple[int, int]] | None = None, quiet: bool = False) -> dict:
    """Run the demo step; returns its outputs and statistics (the tests use them).

    spans: (tokens already cached, tokens scheduled now) per request, decodes (1 scheduled) first.
    """
    torch.manual_seed(seed)
    dev = torch.device(device)
    geo = preset("glm-5.3-flash").scaled(index_topk=topk, indexer_types=("full", "shared"))
    heads = geo.heads_per_rank(tp)
    layout = KVLayout.FP8_DS_MLA_NOPE
    spans = spans or [(1500, 1), (700, 1), (333, 1), (1024, 512), (0, 300)]
    s = make_step(geo, heads, layout, spans, block_size=block_size, device=dev, seed=seed)
    n_tok = sum(n for _, n in spans)
    max_len = max(c + n for c, n in spans)

    timings: list[tuple[str, float]] = []

    def timed(name, fn):
        _sync(dev)
        t0 = time.perf_counter()
        r = fn()
        _sync(dev)
        timings.append((name, (time.perf_counter() - t0) * 1e3))
        return r

    attn = timed("construct backend + reserve workspace", lambda: DSAAttention(
        geo, tp=tp, kv_layout=layout, block_size=block_size, device=dev, max_num_tokens=max(n_tok, 1024),
        max_num_reqs=16, max_model_len=max(max_len, 4096)))
    ref = timed("reference stack, request by request", lambda: reference_step(s))
    step = timed("prepare step metadata", lambda: attn.prepare(s.requests))
    out = torch.full((n_tok, heads, geo.d_v), float("nan"), dtype=torch.bfloat16, device=dev)
    # on a GPU the first layer includes compiling the kernels (a serving engine does that in warm-up)
    timed("layer 0 (full indexer)", lambda: attn.forward(step, s.q, s.latent, s.kv_cache, s.indexer, layer=0,
                                                          out=out))
    attn.lock()
    out1 = torch.full_like(out, float("nan"))
    timed("layer 1 (shares layer 0's top-k)", lambda: attn.forward(
        step, s.q, None, s.kv_cache, None, layer=1, out=out1))

    diff = (out.float() - ref.out).abs()
    tol = 2e-3 + (3 / 128) * ref.out.abs()
    stats = {
        "geometry": geo, "heads_per_rank": heads, "tokens": n_tok, "spans": spans, "path": attn.path.value,
        "out": out, "reference": ref.out, "max_abs_diff": float(diff.max()),
        "within_tolerance": bool((diff <= tol).all()), "shared_equal": bool(torch.equal(out1, out)),
        "workspace_bytes": attn.workspace_bytes, "kv_cache_bytes": s.kv_cache.numel() * s.kv_cache.element_size(),
        "pooled_cache_bytes": s.indexer.cache.numel() * s.indexer.cache.element_size(), "timings": timings,
    }
    if not quiet:
        ops = "Triton kernels" if kernels_available(dev) else "PyTorch reference ops (no kernels on this device)"
        print(f"dsattn demo: one DSA attention step of {geo.name} (scaled: topk {topk}), TP {tp} -> {heads} heads "
              f"per rank, D_qk {geo.d_qk}, kpool {geo.kpool}, on {dev} through {ops}")
        print(f"requests (cached+scheduled): {', '.join(f'{c}+{n}' for c, n in spans)} -> "
              f"{sum(n == 1 for _, n in spans)} decodes, {sum(n > 1 for _, n in spans)} prefill chunks, "
              f"{n_tok} tokens; path {attn.path.value}")
        nb = s.kv_cache.shape[0]
        print(f"caches: latent {layout.value} [{nb} blocks x {block_size}, {layout.row_bytes(geo.d_qk)} B] "
              f"{_mib(stats['kv_cache_bytes'])}; pooled indexer keys [{nb} x {block_size // geo.kpool}, "
              f"{INDEX_ROW_BYTES} B] {_mib(stats['pooled_cache_bytes'])}")
        print(f"workspace: {_mib(attn.workspace_bytes)} reserved at construction, locked after the first layer")
        for row in attn.workspace.report():
            print(f"  {row['consumer']:28s} {_mib(row['bytes']):>12s}")
        print(f"{'stage':40s} {'ms':>9s}")
        for name, ms in timings:
            print(f"{name:40s} {ms:9.2f}")
        print(f"out [{n_tok}, {heads}, {geo.d_v}] vs reference: max |diff| {stats['max_abs_diff']:.2e}, "
              f"{'within' if stats['within_tolerance'] else 'OUTSIDE'} 2e-3 + 3/128 rel; shared layer "
              f"{'equal' if stats['shared_equal'] else 'DIFFERENT'}")
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dsattn demo", description=__doc__.splitlines()[0])
    ap.add_argument("--tp", type=int, default=8, help="tensor-parallel size (heads per rank = 64 / tp)")
    ap.add_argument("--topk", type=int, default=256, help="indexer top-k (2048 in the real model)")
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    stats = run_demo(tp=args.tp, topk=args.topk, block_size=args.block_size, device=args.device, seed=args.seed)
    return 0 if stats["within_tolerance"] and stats["shared_equal"] else 1
