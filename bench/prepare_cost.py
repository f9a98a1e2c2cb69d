"""Host cost of DSAAttention.prepare on this machine's CPU, no GPU needed: the serve bench's decode (128 requests)
and mixed (65 requests) batches, glm-5 TP8 fp8_ds_mla, block 64, given as a list of Request (block tables as int32
tensors, and as Python lists) and as a RequestBatch (the same as tensors); min and median of 30 calls after 5, one
thread.

    PYTHONPATH=src python bench/prepare_cost.py
"""
from __future__ import annotations

import time

import torch

from dsattn.backend.attention import DSAAttention
from dsattn.backend.metadata import Request, RequestBatch
from dsattn.bench.serve import scenarios
from dsattn.config import preset


def main() -> None:
    torch.set_num_threads(1)
    geo, bs = preset("glm-5"), 64
    for name in ("decode", "mixed"):
        spans = scenarios(False)[name]
        reqs, at = [], 0
        for i, (c, s) in enumerate(spans):
            n = -(-(c + s) // bs)
            reqs.append(Request(c, s, torch.arange(at, at + n, dtype=torch.int32), state_slot=i))
            at += n
        attn = DSAAttention(geo, tp=8, kv_layout="fp8_ds_mla", block_size=bs, device="cpu",
                            max_num_tokens=sum(s for _, s in spans), max_num_reqs=len(spans),
                            max_model_len=max(c + s for c, s in spans))
        lists = [Request(r.num_cached, r.num_scheduled, r.block_table.tolist(), r.state_slot) for r in reqs]
        for form, arg in (("list of Request", reqs), ("list of Request, list tables", lists),
                          ("RequestBatch", RequestBatch.from_requests(reqs))):
            for _ in range(5):
                attn.prepare(arg)
            ts = []
            for _ in range(30):
                t0 = time.perf_counter()
                attn.prepare(arg)
                ts.append(time.perf_counter() - t0)
            ts.sort()
            print(f"{name} ({len(spans)} requests), {form}: min {ts[0] * 1e3:.3f} ms, median {ts[15] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
