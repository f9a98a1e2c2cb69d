# Session 67 (for the next device session): config pair over fp16 stages (DSATTN_PF_PROFILE=448 = 256 fp16 stages and P
# + 128 cl + 64 R(0) first; bench/s67_pair's gluon_prefill.py copied over the tree's, producer_regs 64) against the
# default (fp16 P on the split consumer) and the fp32 reference, on issue 3's prefill case (s_q 1024, overlap
# indices) with q as is and x 6 (peaked softmaxes, where bf16 P alone misses the tolerance).
#   DSATTN_PF_CONFIG is set here per arm; run with PYTHONPATH=src, argv[1] = heads (default 32), argv[2] = the fp16
#   pair's DSATTN_PF_PROFILE (default 448; session 68: 960, 1472)
import os, sys, torch
from dsattn.bench.kernels_mla import prefill_case
from dsattn.ops.sparse_mla import sparse_mla_prefill
from dsattn.ops.sparse_mla.reference import sparse_mla_reference
h = int(sys.argv[1]) if len(sys.argv) > 1 else 32
prof = sys.argv[2] if len(sys.argv) > 2 else "448"  # session 68: 960 / 1472 (the pipelined conversions)
case = prefill_case(1024, h, torch.device("cuda"))
ARMS = {"default": ("", "0"), "pair_f16": ("f16=0,cvt_pipe=0,producer_regs=64,plo=0,pair=1", prof),
        "pair_bf16": ("f16=0,cvt_pipe=0,producer_regs=56,plo=0,pair=1", "192")}
sl = slice(0, 64)
for scale in (1.0, 6.0):
    q = (case.q.float() * scale).to(torch.bfloat16)
    ro, rl = sparse_mla_reference(q[sl].float(), case.kv, case.indices[sl], case.sm_scale)
    ro = ro.float()
    res = {}
    for name, (cfg, prof) in ARMS.items():
        os.environ["DSATTN_PF_CONFIG"], os.environ["DSATTN_PF_PROFILE"] = cfg, prof
        out = torch.full((q.shape[0], h, 512), float("nan"), dtype=torch.bfloat16, device=q.device)
        lse = torch.full((q.shape[0], h), float("nan"), dtype=torch.float32, device=q.device)
        sparse_mla_prefill(q, case.kv, case.indices, case.sm_scale, out=out, lse=lse)
        torch.cuda.synchronize()
        res[name] = (out.float(), lse)
        excess = ((out[sl].float() - ro).abs() - (2e-3 + 3 / 128 * ro.abs())).max().item()
        lrel = ((lse[sl] - rl) / rl.abs().clamp_min(1)).abs().max().item()
        print(f"q x {scale:g}, {h} heads, {name}: nan {out.isnan().any().item()}; against the reference (tokens 0..63) "
              f"max excess over 2e-3 + 3/128 |ref| {excess:.3e} ({'within' if excess <= 0 else 'OUTSIDE'}), "
              f"lse rel {lrel:.2e}")
    d = (res["pair_f16"][0] - res["default"][0]).abs().max().item()
    dl = ((res["pair_f16"][1] - res["default"][1]).abs() / res["default"][1].abs().clamp_min(1)).max().item()
    print(f"q x {scale:g}: pair_f16 against the default, all tokens: out max |diff| {d:.3e}, lse rel {dl:.2e}")
os.environ["DSATTN_PF_CONFIG"], os.environ["DSATTN_PF_PROFILE"] = "", "0"
