"""Session 76: where sparse_mla_prefill's time goes at 32 heads (the grouping, the row conversion, the kernel), by
torch.profiler's CUDA kernel times, at s_q 1024 and 8192 (issue 3's case: bf16, topk 2048, overlap, s_kv 16384).
    PYTHONPATH=src python bench/s76/prof.py [heads ...]"""
import sys

import torch

from dsattn.bench.kernels_mla import overlap_indices
from dsattn.ops.sparse_mla import prefill_row_spec, sparse_mla_prefill


def make_call(h: int, t: int, dev):
    """One sparse_mla_prefill call of issue 3's case (h heads, s_q t) with row_scratch, as a closure."""
    g = torch.Generator(device=dev).manual_seed(0)
    kv = torch.randn((16384, 576), generator=g, device=dev).to(torch.bfloat16)
    q = (torch.randn((t, h, 576), generator=g, device=dev) * 0.5).to(torch.bfloat16)
    idx = overlap_indices(t, 16384, 2048, dev)
    out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=dev)
    lse = torch.empty((t, h), dtype=torch.float32, device=dev)
    rs = [torch.empty(s, dtype=d, device=dev) for s, d in prefill_row_spec(16384, 576)]
    return lambda: sparse_mla_prefill(q, kv, idx, 576 ** -0.5, out=out, lse=lse, row_scratch=rs)


def main():
    dev = torch.device("cuda")
    for h in [int(x) for x in sys.argv[1:]] or [32]:
        for t in (1024, 8192):
            run = make_call(h, t, dev)
            for _ in range(5):
                run()
            torch.cuda.synchronize()
            n = 20
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(n):
                    run()
                torch.cuda.synchronize()
            tot = {}
            for e in prof.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    tot[e.name] = tot.get(e.name, 0.0) + e.device_time / n
            print(f"{h} heads s_q {t}: {sum(tot.values()):.1f} us of kernels a call")
            for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
                print(f"  {v:9.1f} us  {k[:100]}")


if __name__ == "__main__":
    main()
