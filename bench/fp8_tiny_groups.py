"""fp8 rows with one small 128-value group: the fp8 decode kernels form fp16(group scale x 2^-8) before they scale
the tile (kernels.py's docstring), and fp16's smallest subnormal is 2^-24, so a group scale of 2^-17 or less (amax
<= 448 x 2^-17 ~ 3.4e-3) should read as zeros wherever that tile is used. gluon_rx's config sraw builds S^T from the
unscaled fp8 values and applies the scales in fp32, so its q . k should not. This measures it per kernel: group 0
of every row scaled to an amax, the other latent groups zero (out is then group 0 alone), against the reference,
and against the reference over the same rows with group 0 zeroed ("as zeros": lse equal to that one means q . k
read the group as zeros).

    PYTHONPATH=src python bench/fp8_tiny_groups.py [--out DIR] [--tag NAME]

Each row names the variant passed and the kernel that variant ran (launch.kernel_name with that variant). Session
35's first version passed no variant, so its 64-token launches took default_variant's pad64 (gluon64 or the Triton
64-head kernel) while the rows said gluon_rx / gluon_ws / gluon_small: bench/results/fp8_tiny_groups_s35.json
measured only those two kernels (notes/sparse_mla.md, session 36).

(a GPU; on a CPU with TRITON_INTERPRET=1 only the Triton kernels, interpreted)
"""
from __future__ import annotations

import argparse
import dataclasses
import os

import torch

from dsattn.bench.common import write_results
from dsattn.formats import KVLayout, pack_latent_rows
from dsattn.ops._triton import interpreting
from dsattn.ops.sparse_mla import sparse_mla_decode
from dsattn.ops.sparse_mla.launch import kernel_name
from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference

AMAX = [1.0, 6.9e-3, 3.5e-3, 3.4e-3, 1e-3]  # group scales 2^-8, 2^-15, 2^-16, 2^-17, 2^-18 (448 x 2^-17 = 3.418e-3)

# (heads, DSATTN_SPARSE_MLA_IMPL, variant, gluon_rx sraw override or None)
CASES = [(8, "auto", "native", None), (16, "auto", "native", None), (32, "auto", "native", None),
         (64, "auto", "native", None), (128, "auto", "native", None), (8, "auto", "pad64", None),
         (8, "triton", "native", None), (8, "gluon", "native", None),
         (8, "gluon_rx", "native", 0), (8, "gluon_rx", "native", 1), (16, "gluon_rx", "native", 1)]


def _rx_spec(layout: KVLayout, h: int, d: int, sraw: int | None) -> str:
    if sraw is None:
        return ""
    from dsattn.ops.sparse_mla.gluon_rx import rx_config, rx_config_spec
    return rx_config_spec(dataclasses.replace(rx_config(layout, h, d), sraw=sraw))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--tag", default="fp8_tiny_groups_s36")
    args = ap.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    cases = CASES
    if dev == "cpu" or interpreting():
        cases = [c for c in cases if c[1] == "triton" or (c[0] == 64 and c[1] == "auto")]
    rows = []
    t, n, bs, k = 64, 4096, 64, 256
    for layout_name in ("fp8_ds_mla", "fp8_ds_mla_nope"):
        layout = KVLayout(layout_name)
        d = 512 if layout is KVLayout.FP8_DS_MLA_NOPE else 576
        for h, impl, variant, sraw in cases:
            os.environ["DSATTN_SPARSE_MLA_IMPL"] = impl
            spec = _rx_spec(layout, h, d, sraw)
            if spec:
                os.environ["DSATTN_RX_CONFIG"] = spec
            else:
                os.environ.pop("DSATTN_RX_CONFIG", None)
            for amax in AMAX:
                g = torch.Generator(device="cpu").manual_seed(0)
                lat = torch.randn(n, d, generator=g)
                lat[:, :128] *= amax / lat[:, :128].abs().amax(1, keepdim=True)
                lat[:, 128:512] = 0.0
                cache = pack_latent_rows(lat, layout).view(n // bs, bs, -1).to(dev)
                zeroed = lat.clone()
                zeroed[:, :128] = 0.0
                cache0 = pack_latent_rows(zeroed, layout).view(n // bs, bs, -1).to(dev)
                q = torch.randn(t, h, d, generator=g).bfloat16().to(dev)
                idx = torch.randint(0, n, (t, k), generator=g, dtype=torch.int32).to(dev)
                out, lse = sparse_mla_decode(q, cache, idx, d ** -0.5, variant=variant)
                ro, rl = (x.to(dev) for x in sparse_mla_paged_reference(q, cache, idx, d ** -0.5, layout))
                _, rl0 = (x.to(dev) for x in sparse_mla_paged_reference(q, cache0, idx, d ** -0.5, layout))
                err = (out.float() - ro).abs().max().item()
                lse_rel = ((lse - rl).abs() / rl.abs().clamp_min(1)).max().item()
                lse_rel0 = ((lse - rl0).abs() / rl0.abs().clamp_min(1)).max().item()
                flat = cache.view(-1, cache.shape[-1])
                row = dict(heads=h, layout=layout_name, impl=impl, variant=variant,
                           kernel=kernel_name(q, flat, layout, variant), rx_config=spec or None,
                           group_amax=amax, group_scale=float(cache.view(-1, cache.shape[-1])[0, 512:516]
                                                              .cpu().view(torch.float32)),
                           ref_out_max=ro.abs().max().item(), out_max=out.float().abs().max().item(),
                           max_abs_err=err, lse_rel_err=lse_rel, lse_rel_err_vs_group_zeroed=lse_rel0,
                           out_all_zero=bool((out.float() == 0).all().item()))
                rows.append(row)
                label = row["kernel"] + ("" if sraw is None else f" sraw={sraw}")
                print(f"{h:3d} heads {layout_name:15s} {variant:6s} {label:16s} amax {amax:8.3g}: "
                      f"|ref| {row['ref_out_max']:.3g} |out| {row['out_max']:.3g} err {err:.3g} lse rel {lse_rel:.3g}"
                      f" (vs zeroed {lse_rel0:.3g}) out zero {row['out_all_zero']}", flush=True)
    os.environ.pop("DSATTN_SPARSE_MLA_IMPL", None)
    os.environ.pop("DSATTN_RX_CONFIG", None)
    write_results(args.tag, rows, meta=dict(tokens=t, slots=n, topk=k), out_dir=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
