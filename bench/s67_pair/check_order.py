# Session 67: config pair with warpgroup 1's two P V products in the other order (DSATTN_PF_PROFILE=64, bench/s67_pair's
# gluon_prefill.py copied over the tree's) against the pair as session 65 built it (P0): outputs and lse on issue 3's
# prefill case (s_q 1024, overlap indices), and against the fp32 reference on a slice of the tokens.
import os, sys, torch
from dsattn.bench.kernels_mla import prefill_case, ours
from dsattn.ops.sparse_mla.reference import sparse_mla_reference
h = int(sys.argv[1]) if len(sys.argv) > 1 else 32
case = prefill_case(1024, h, torch.device("cuda"))
res = {}
for p in ("0", "64"):
    os.environ["DSATTN_PF_PROFILE"] = p
    fn, out, lse = ours(case)
    out.fill_(float("nan")); lse.fill_(float("nan"))
    fn(); torch.cuda.synchronize()
    res[p] = (out.float().clone(), lse.clone())
os.environ["DSATTN_PF_PROFILE"] = "0"
(o0, l0), (o1, l1) = res["0"], res["64"]
print(f"{h} heads: nan {o1.isnan().any().item()} {l1.isnan().any().item()}; out max |64 - 0| "
      f"{(o1 - o0).abs().max().item():.3e}, lse max |64 - 0| {(l1 - l0).abs().max().item():.3e}")
sl = slice(0, 64)
ro, rl = sparse_mla_reference(case.q[sl].float(), case.kv, case.indices[sl], case.sm_scale)
for p, (o, l) in res.items():
    err = (o[sl] - ro.float()).abs() - (2e-3 + 3 / 128 * ro.float().abs())
    print(f"P{p} against the reference, tokens 0..63: max excess over 2e-3 + 3/128 |ref| {err.max().item():.3e}, "
          f"lse max rel {((l[sl] - rl) / rl.abs().clamp_min(1)).abs().max().item():.3e}")
