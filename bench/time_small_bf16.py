# Session 61: gluon_small's bf16-row decode (DSATTN_SPARSE_MLA_IMPL=gluon), 512 tokens, topk 2048, `uniform` indices
# over 131072 slots, block size 64: ms a call by triton.testing.do_bench (median, L2 flushed) at 8 / 16 / 32 heads.
# Run under two trees' src alternately (PYTHONPATH) to compare a kernel change that has no config knob.
import os, sys, torch, triton
os.environ["DSATTN_SPARSE_MLA_IMPL"] = "gluon"
from dsattn.ops.sparse_mla import sparse_mla_decode
from dsattn.bench.kernels_mla import uniform_indices
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
slots, t = 131072, 512
kv = torch.randn(slots, 576, generator=g, device=dev).to(torch.bfloat16).view(slots // 64, 64, 576)
idx = uniform_indices(t, slots, 2048, dev, seed=0)
res = []
for h in (8, 16, 32):
    q = (torch.randn(t, h, 576, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    out = torch.empty(t, h, 512, dtype=torch.bfloat16, device=dev)
    lse = torch.empty(t, h, dtype=torch.float32, device=dev)
    fn = lambda: sparse_mla_decode(q, kv, idx, 576 ** -0.5, out=out, lse=lse, variant="native")
    fn()
    res.append(f"h{h} {triton.testing.do_bench(fn, warmup=50, rep=300):.4f}")
print(sys.argv[1] if len(sys.argv) > 1 else "", " ".join(res), flush=True)
