"""fp8 rows with one small 128-value group: every fp8 decode kernel forms fp16(group scale x 2^-8) before it scales
the tile (kernels.py's docstring), and fp16's smallest subnormal is 2^-24, so a group scale of 2^-17 or less (amax
<= 448 x 2^-17 ~ 3.4e-3) should read as zeros. This measures it per kernel: group 0 of every row scaled to an amax,
the other latent groups zero (out is then group 0 alone), against the reference.

    PYTHONPATH=src python bench/fp8_tiny_groups.py [--out DIR]

(a GPU; on a CPU with TRITON_INTERPRET=1 only the Triton kernel, interpreted)
"""
from __future__ import annotations

import argparse
import os

import torch

from dsattn.bench.common import write_results
from dsattn.formats import KVLayout, pack_latent_rows
from dsattn.ops._triton import interpreting
from dsattn.ops.sparse_mla import sparse_mla_decode
from dsattn.ops.sparse_mla.launch import kernel_name
from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference

AMAX = [1.0, 6.9e-3, 3.5e-3, 3.4e-3, 1e-3]  # group scales 2^-8, 2^-15, 2^-16, 2^-17, 2^-18 (448 x 2^-17 = 3.418e-3)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    cases = [(h, layout, impl) for layout in ("fp8_ds_mla", "fp8_ds_mla_nope") for h, impl in
             ((8, "auto"), (16, "auto"), (32, "auto"), (64, "auto"), (128, "auto"), (8, "triton"), (8, "gluon"))]
    if dev == "cpu" or interpreting():
        cases = [c for c in cases if c[2] == "triton" or c[0] == 64]
    rows = []
    t, n, bs, k = 64, 4096, 64, 256
    for h, layout, impl in cases:
        os.environ["DSATTN_SPARSE_MLA_IMPL"] = impl
        d = 512 if layout == "fp8_ds_mla_nope" else 576
        for amax in AMAX:
            g = torch.Generator(device="cpu").manual_seed(0)
            lat = torch.randn(n, d, generator=g)
            lat[:, :128] *= amax / lat[:, :128].abs().amax(1, keepdim=True)
            lat[:, 128:512] = 0.0
            cache = pack_latent_rows(lat, layout).view(n // bs, bs, -1).to(dev)
            q = torch.randn(t, h, d, generator=g).bfloat16().to(dev)
            idx = torch.randint(0, n, (t, k), generator=g, dtype=torch.int32).to(dev)
            out, lse = sparse_mla_decode(q, cache, idx, d ** -0.5)
            ro, rl = sparse_mla_paged_reference(q, cache, idx, d ** -0.5, layout)
            err = (out.float() - ro.to(dev)).abs().max().item()
            lse_rel = ((lse - rl.to(dev)).abs() / rl.to(dev).abs().clamp_min(1)).max().item()
            flat = cache.view(-1, cache.shape[-1])
            row = dict(heads=h, layout=layout, impl=impl, kernel=kernel_name(q, flat, KVLayout(layout), "native"),
                group_amax=amax, group_scale=float(pack_latent_rows(lat[:1], layout)[0, 512:516].view(torch.float32)),
                ref_out_max=ro.abs().max().item(), out_max=out.float().abs().max().item(), max_abs_err=err,
                lse_rel_err=lse_rel, group_read_as_zero=bool((out.float() == 0).all().item()))
            rows.append(row)
            print(f"{h:3d} heads {layout:15s} {row['kernel']:8s} amax {amax:8.3g}: |ref| {row['ref_out_max']:.3g} "
                  f"|out| {row['out_max']:.3g} err {err:.3g} lse rel {lse_rel:.3g} zeros {row['group_read_as_zero']}",
                  flush=True)
    os.environ.pop("DSATTN_SPARSE_MLA_IMPL", None)
    write_results("fp8_tiny_groups_s35", rows, meta=dict(tokens=t, slots=n, topk=k), out_dir=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
