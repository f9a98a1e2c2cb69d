"""Device allocations (>= 4 KB) by call site while a backend is built and runs two steps (session 38 debugging of
the backend GPU test peak): PYTHONPATH=src python bench/alloc_trace_debug.py"""
import os, sys, traceback, collections
import torch
from torch.utils._python_dispatch import TorchDispatchMode
sys.path.insert(0, "tests/gpu"); sys.path.insert(0, "tests")

from dsattn.backend.attention import DSAAttention
from dsattn.backend.synthetic import make_step
from dsattn.config import preset
SPANS = [(3000 + 37 * i, 1) for i in range(5)] + [(700, 1), (0, 1), (2500, 300), (0, 700), (5000, 129)]
geo = preset("glm-5.3-flash").scaled(indexer_types=("full", "shared"))
heads = 64
s = make_step(geo, heads, "fp8_ds_mla_nope", SPANS, block_size=64, device="cuda")
out = torch.empty((s.q.shape[0], heads, 512), dtype=torch.bfloat16, device="cuda")
class Log(TorchDispatchMode):
    def __init__(self): super().__init__(); self.rows = collections.Counter()
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        r = func(*args, **(kwargs or {}))
        name = str(func)
        if any(k in name for k in ("empty", "zeros", "full", "ones", "new_", "clone", "copy", "cat", "stack")) and isinstance(r, torch.Tensor):
            n = r.numel() * r.element_size()
            if n >= 4096 and r.untyped_storage().nbytes() == n:
                st = [f for f in traceback.extract_stack() if "dsattn" in f.filename][-2:]
                self.rows[(name, n, " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}" for f in st))] += 1
        return r
with Log() as log:
    attn = DSAAttention(geo, tp=geo.num_heads // heads, kv_layout="fp8_ds_mla_nope", device="cuda", max_num_tokens=2048, max_num_reqs=16, max_model_len=8192, block_size=64)
    for _ in range(2):
        step = attn.prepare(s.requests)
        attn.forward(step, s.q, s.latent, s.kv_cache, s.indexer, layer=0, out=out)
        attn.forward(step, s.q, None, s.kv_cache, None, layer=1, out=out)
for k, v in sorted(log.rows.items(), key=lambda x: -x[0][1]):
    print(v, k)
