"""Host (CPU) time of one eager DSAAttention.forward (a decode layer) with every kernel launch stubbed, no GPU needed:
bench/host_overhead.py's --stub (Triton's launch path up to a stand-in for the C launcher, kernels never compiled), and
every op package's kernels_available forced True, so that each op takes its GPU path's host side (checks, launch
decisions, the fast or Triton launch path) on CPU tensors. The layer's own Python (checks, workspace views, plans) is
included; the C launcher and the driver are not. Median of --n calls after 20, one thread; --profile prints cProfile's
top functions.

    PYTHONPATH=src python bench/layer_host_cost.py [--configs glm-5:8:fp8_ds_mla:128,...] [--profile tottime]
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

import torch


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="glm-5:8:fp8_ds_mla:128,glm-5:8:fp8_ds_mla:1,glm-5:8:bf16:128,"
                                        "glm-5.3-flash:8:fp8_ds_mla_nope:128,deepseek-v3.2:1:fp8_ds_mla:128",
                   help="preset:tp:layout:requests (decodes over 256 + 8 i tokens of context)")
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--profile", default=None, help="cProfile sort key (tottime, cumulative)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import host_overhead
    host_overhead._install_stub()
    for name in ("topk", "indexer", "cache", "sparse_mla", "gather", "sparse_mla.grouping"):
        importlib.import_module(f"dsattn.ops.{name}").kernels_available = lambda device: True
    from dsattn.backend.attention import DSAAttention
    from dsattn.backend.synthetic import make_step
    from dsattn.config import preset
    from dsattn.ops import _fastlaunch
    from triton.runtime.jit import JITFunction
    for spec in args.configs.split(","):
        name, tp, layout, reqs = spec.split(":")
        geo = preset(name)
        heads = geo.heads_per_rank(int(tp))
        spans = [(256 + 8 * i, 1) for i in range(int(reqs))]
        s = make_step(geo, heads, layout, spans, block_size=64, seed=1)
        attn = DSAAttention(geo, tp=int(tp), kv_layout=layout, block_size=64, device="cpu",
                            max_num_tokens=len(spans), max_num_reqs=len(spans), max_model_len=4096)
        step = attn.prepare(s.requests)
        out = torch.empty((len(spans), heads, 512), dtype=torch.bfloat16)

        def layer():
            attn.forward(step, s.q, s.latent, s.kv_cache, s.indexer, out=out)

        for _ in range(20):
            layer()
        hits, runs = _fastlaunch.STATS["hit"], []
        orig = JITFunction.run
        JITFunction.run = lambda self, *a, **kw: (runs.append(self), orig(self, *a, **kw))[1]
        try:
            layer()  # one counted call: fast-path hits, and Triton's own path (JITFunction.run, misses included)
        finally:
            JITFunction.run = orig
        hits = _fastlaunch.STATS["hit"] - hits
        ts = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            layer()
            ts.append(time.perf_counter() - t0)
        ts.sort()
        print(f"{spec}: {ts[len(ts) // 2] * 1e6:.1f} us a layer (min {ts[0] * 1e6:.1f}); launches a layer through "
              f"the fast path {hits}, Triton's path {len(runs)}", flush=True)
        if args.profile:
            import cProfile
            import pstats
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(args.n):
                layer()
            pr.disable()
            pstats.Stats(pr).sort_stats(args.profile).print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
