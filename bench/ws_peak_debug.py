"""The backend's warm-step peak against its workspace prediction, for one GPU-test case, with the numbers printed
(tests/gpu/test_backend_gpu.py::test_no_allocation_after_warmup_and_predicted_peak asserts them within 1%).
    PYTHONPATH=src python bench/ws_peak_debug.py [glm-5.3-flash fp8_ds_mla_nope 64]"""
import sys

import torch

sys.path.insert(0, "tests/gpu")
sys.path.insert(0, "tests")
from test_backend_gpu import BS, SPANS, _allocations, _backend  # noqa: E402

from dsattn.backend.synthetic import make_step  # noqa: E402
from dsattn.config import preset  # noqa: E402

name, layout, heads = (sys.argv[1:4] if len(sys.argv) > 3 else ("glm-5.3-flash", "fp8_ds_mla_nope", "64"))
heads = int(heads)
shared = name == "glm-5.3-flash"
geo = preset(name).scaled(indexer_types=("full", "shared")) if shared else preset(name)
s = make_step(geo, heads, layout, SPANS, block_size=BS, device="cuda")
out = torch.empty((s.q.shape[0], heads, 512), dtype=torch.bfloat16, device="cuda")
torch.cuda.synchronize()
torch.cuda.empty_cache()
base = torch.cuda.memory_allocated()
attn = _backend(geo, layout, heads)


def run_step():
    step = attn.prepare(s.requests)
    attn.forward(step, s.q, s.latent, s.kv_cache, s.indexer, layer=0, out=out)
    if shared:
        attn.forward(step, s.q, None, s.kv_cache, None, layer=1, out=out)


predicted = attn.workspace_bytes
for _ in range(2):
    run_step()
attn.lock()
torch.cuda.synchronize()
live = torch.cuda.memory_allocated() - base
torch.cuda.reset_peak_memory_stats()
before = _allocations()
run_step()
torch.cuda.synchronize()
peak = torch.cuda.max_memory_allocated() - base
print(attn.workspace.format_report())
print(f"predicted {predicted} live at reset {live} (live - predicted {live - predicted}) peak {peak} "
      f"(peak - predicted {peak - predicted}); allocations in the step {_allocations() - before}")
