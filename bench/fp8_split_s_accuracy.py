"""A design check for a future decode kernel (not used by dsattn): S = K q^T over fp8_ds_mla keys computed with fp8
tensor-core products instead of converting K to fp16 in registers. q (bf16) is split into e4m3 terms after a
power-of-two scale per (row, 128-column group), q ~ q1 + q2 (+ q3); each term's product K_g q_t^T runs through
torch._scaled_mm (cuBLAS fp8, K = 128 per group, fp32 out), with use_fast_accum True (no promotion: the Hopper
fp8 accumulator, as an unpromoted wgmma chain would see it) and False. Reported against the exact S (fp64): largest
|S| error, and the lse error over 2048 keys (issue 3 allows 1e-5 relative), per term count.

    PYTHONPATH=src python bench/fp8_split_s_accuracy.py --out DIR      (writes DIR/fp8_split_s_accuracy.json; GPU)
"""
from __future__ import annotations

import argparse
import json
import os

import torch

from dsattn import formats

E4M3 = torch.float8_e4m3fn


def _split(q, terms):
    """q [H, 128] fp32 -> list of e4m3 terms and the per-row power-of-two scale s (q * s ~ sum of terms)."""
    amax = q.abs().amax(dim=1, keepdim=True).clamp_min(1e-30)
    s = torch.exp2(torch.floor(torch.log2(448.0 / amax)))
    r = q * s
    out = []
    for _ in range(terms):
        t = r.to(E4M3)
        out.append(t)
        r = r - t.float()
    return out, s


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--cases", type=int, default=32)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--keys", type=int, default=2048)
    args = p.parse_args()
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    sm_scale = 576 ** -0.5
    one = torch.ones((), device=dev)
    res = {}
    for case in range(args.cases):
        latent = torch.randn(args.keys, 512, device=dev, generator=g) * (0.5 + torch.rand(512, device=dev, generator=g))
        kq, ks = formats.quantize_fp8(latent.view(args.keys * 4, 128))  # per-128-group scales
        kq = kq.view(args.keys, 4, 128)
        ks = ks.view(args.keys, 4).float()
        q = torch.randn(args.heads, 512, device=dev, generator=g).bfloat16().float()
        exact = torch.zeros(args.heads, args.keys, dtype=torch.float64, device=dev)
        for gi in range(4):
            exact += (q[:, gi * 128:(gi + 1) * 128].double() @ kq[:, gi].double().T) * ks[:, gi].double()[None, :]
        for terms in (1, 2, 3):
            for fast in (True, False):
                s_approx = torch.zeros(args.heads, args.keys, device=dev)
                for gi in range(4):
                    parts, s = _split(q[:, gi * 128:(gi + 1) * 128], terms)
                    a = kq[:, gi].contiguous()  # [keys, 128] row-major
                    acc = torch.zeros(args.keys, args.heads, device=dev)
                    for t in parts:
                        b = t.contiguous().T  # [128, heads] column-major
                        acc += torch._scaled_mm(a, b, one, one, out_dtype=torch.float32, use_fast_accum=fast)
                    s_approx += (acc.T / s) * ks[:, gi][None, :]
                err = (s_approx.double() - exact).abs().max().item()
                lse_x = torch.logsumexp(exact * sm_scale, dim=1)
                lse_a = torch.logsumexp(s_approx.double() * sm_scale, dim=1)
                lse_rel = ((lse_a - lse_x).abs() / lse_x.abs()).max().item()
                key = f"terms{terms}_fast{int(fast)}"
                r = res.setdefault(key, dict(max_abs_s_err=0.0, max_lse_rel=0.0, max_abs_s=0.0))
                r["max_abs_s_err"] = max(r["max_abs_s_err"], err)
                r["max_lse_rel"] = max(r["max_lse_rel"], lse_rel)
                r["max_abs_s"] = max(r["max_abs_s"], exact.abs().max().item())
    for k, v in res.items():
        print(k, v, flush=True)
    with open(os.path.join(args.out, "fp8_split_s_accuracy.json"), "w") as f:
        json.dump(dict(cases=args.cases, heads=args.heads, keys=args.keys, results=res), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
