"""Launch-config sweep of the Gluon few-head sparse MLA kernel on the GPU, beside the Triton kernel.

    PYTHONPATH=src python bench/mla_gluon_sweep.py --out DIR [--rep-ms 40] [--ws]

Benchmark cases of dsattn.bench.kernels_mla (decode fp8_ds_mla / nope 512 tokens, prefill bf16 s_q 1024);
each Gluon config (block_n / stages / warps) is timed (median, L2 flushed: bench.common.time_ms) and its
output compared with the Triton kernel's on the same inputs (max abs difference; NaN shows as nan).
Writes DIR/sparse_mla_gluon_sweep.json. --ws: the warp-specialized kernel (gluon_ws.py) instead, over the fp8
decode cases, each config (raw half-block stages / producer registers / producer warps) beside gluon_small's default;
writes DIR/sparse_mla_gluon_ws_sweep.json. --ws --profile: also the timing builds of gluon_ws (one side of the
pipeline alone, PROFILES) at each case's default config. --g64: the 64-head kernel's producer shapes (G64_SWEEP)
beside the Triton kernel; writes DIR/sparse_mla_gluon64_sweep.json. (Until session 28 both sweeps also took L2
prefetch distances; that option, slower at every distance in session 10, is gone from the kernels.)
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

from dsattn.bench.common import time_ms
from dsattn.bench.kernels_mla import decode_case, prefill_case
from dsattn.ops.sparse_mla import gluon_ws, launch

SWEEP = [
    # (kind, layout, tokens, heads, configs as (block_n, stages, warps))
    ("decode", "fp8_ds_mla", 512, 8, [(64, 2, 4), (64, 3, 4), (64, 2, 8), (64, 3, 8)]),
    ("decode", "fp8_ds_mla", 512, 32, [(64, 2, 4), (64, 2, 8)]),
    ("decode", "fp8_ds_mla_nope", 512, 8, [(64, 3, 4), (64, 4, 4), (64, 3, 8), (64, 4, 8)]),
    ("prefill", "bf16", 1024, 16, [(64, 2, 4), (64, 2, 8)]),
    ("prefill", "bf16", 1024, 32, [(64, 2, 4), (64, 2, 8)]),
]


WS_SWEEP = [
    # (layout, tokens, heads, configs as (stages, producer_regs, producer_warps)); 96 registers with 4 producer warps
    # spill (bench/mla_gluon_check.py --kernel ws)
    ("fp8_ds_mla", 512, 8, [(3, 128, 8), (3, 96, 8), (2, 128, 8)]),
    ("fp8_ds_mla", 512, 16, [(3, 128, 8), (3, 128, 4)]),
    ("fp8_ds_mla", 512, 32, [(2, 128, 4), (2, 128, 8)]),
    ("fp8_ds_mla_nope", 512, 8, [(4, 128, 8), (4, 128, 4)]),
]

G64_SWEEP = [
    # (layout, tokens, heads, G64Config fields: producer warps, regs, unit, depth)
    ("fp8_ds_mla", 512, 64, [(4, 120, 16, 3), (4, 112, 16, 2), (4, 120, 16, 2), (4, 104, 16, 2), (4, 104, 32, 1)]),
    ("fp8_ds_mla", 512, 128, [(4, 120, 16, 3), (4, 112, 16, 2)]),
    ("fp8_ds_mla", 2048, 64, [(4, 120, 16, 3), (4, 112, 16, 2)]),
    ("fp8_ds_mla_nope", 512, 64, [(4, 120, 16, 3), (4, 112, 16, 2)]),
]


# gluon_ws timing builds (wrong outputs): what each side costs alone (run_attention_ws's profile argument)
PROFILES = {
    1: "producer alone (gather + convert)",
    2: "consumer alone (products on stale tiles)",
    3: "gathers alone (no conversion, no products)",
    4: "convert + products, no gathers",
}


def _lse_rel(lse, ref) -> float:
    """Largest relative lse difference; equal entries (both -inf: rows without a valid key) count 0, and a
    NaN left in `lse` (poison the kernel did not overwrite) stays NaN instead of reading as agreement."""
    rel = (lse - ref).abs() / ref.abs().clamp_min(1)
    return float(torch.where(lse == ref, torch.zeros_like(rel), rel).max())  # max propagates NaN


def write_json(out_dir: str, name: str, rows: list) -> str:
    """DIR/name.json with the device, the commit (DSATTN_GIT_COMMIT) and the rows; prints and returns the path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".json")
    json.dump({"device": torch.cuda.get_device_name(), "commit": os.environ.get("DSATTN_GIT_COMMIT"), "rows": rows},
              open(path, "w"), indent=1)
    print(f"# wrote {path}")
    return path


def _checked_time(fn, out, lse, ref_o, ref_l, rep_ms):
    """Poison out / lse, run fn once, compare with the reference outputs, then time fn.
    -> (ms, max abs out difference, largest relative lse difference); exceptions propagate."""
    out.fill_(float("nan"))
    lse.fill_(float("nan"))
    fn()
    torch.cuda.synchronize()
    diff = float((out.float() - ref_o.float()).abs().max())
    return time_ms(fn, rep_ms=rep_ms), diff, _lse_rel(lse, ref_l)


def ws_main(args) -> int:
    dev = torch.device("cuda")
    rows = []
    for layout, tokens, heads, configs in WS_SWEEP:
        case = decode_case(tokens, heads, layout, dev)
        flat = case.kv.flatten(0, 1)
        t, h = case.tokens, case.heads
        out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=dev)
        lse = torch.empty((t, h), dtype=torch.float32, device=dev)
        small = lambda: launch.run_attention_gluon(case.q, flat, case.layout, case.indices, case.sm_scale, None, out,
                                                   lse)
        small()
        ref_o, ref_l = out.clone(), lse.clone()
        ms = time_ms(small, rep_ms=args.rep_ms)
        rows.append({"layout": layout, "tokens": tokens, "heads": heads, "kernel": "gluon", "config": None, "ms": ms})
        print(f"decode {layout:16s} t={tokens} h={heads:3d} gluon          {ms:.4f} ms", flush=True)
        for st, regs, pw in configs:
            cfg = gluon_ws.WsConfig(st, regs, pw)
            fn = lambda: gluon_ws.run_attention_ws(case.q, flat, case.layout, case.indices, case.sm_scale, None, out,
                                                   lse, config=cfg)
            try:
                ms, diff, ldiff = _checked_time(fn, out, lse, ref_o, ref_l, args.rep_ms)
            except Exception as e:  # noqa: BLE001
                print(f"  ws {st}/{regs}/{pw} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            rows.append({"layout": layout, "tokens": tokens, "heads": heads, "kernel": "gluon_ws",
                         "config": [st, regs, pw], "ms": ms, "max_abs_vs_gluon": diff, "lse_rel_vs_gluon": ldiff})
            print(f"decode {layout:16s} t={tokens} h={heads:3d} gluon_ws {st}/{regs}/{pw}  {ms:.4f} ms  "
                  f"max_abs_vs_gluon={diff:.3g} lse_rel={ldiff:.3g}", flush=True)
        for prof in (PROFILES if args.profile else ()):
            fn = lambda: gluon_ws.run_attention_ws(case.q, flat, case.layout, case.indices, case.sm_scale, None, out,
                                                   lse, profile=prof)
            try:
                fn()
                ms = time_ms(fn, rep_ms=args.rep_ms)
            except Exception as e:  # noqa: BLE001
                print(f"  ws profile {prof} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            rows.append({"layout": layout, "tokens": tokens, "heads": heads, "kernel": "gluon_ws", "config": None,
                         "profile": PROFILES[prof], "ms": ms})
            print(f"decode {layout:16s} t={tokens} h={heads:3d} gluon_ws profile {PROFILES[prof]:36s} {ms:.4f} ms",
                  flush=True)
    write_json(args.out, "sparse_mla_gluon_ws_sweep", rows)
    return 0


def g64_main(args) -> int:
    """Each G64_SWEEP config of gluon64 beside the Triton kernel (64-head programs, 'native')."""
    from dsattn.ops.sparse_mla import gluon64
    dev = torch.device("cuda")
    rows = []
    for layout, tokens, heads, configs in G64_SWEEP:
        case = decode_case(tokens, heads, layout, dev)
        flat = case.kv.flatten(0, 1)
        t, h = case.tokens, case.heads
        out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=dev)
        lse = torch.empty((t, h), dtype=torch.float32, device=dev)
        tri = lambda: launch.run_attention(case.q, flat, case.layout, case.indices, case.sm_scale, None, out, lse,
                                           "native", config=launch.CONFIGS[(64, True)])
        tri()
        ref_o, ref_l = out.clone(), lse.clone()
        ms = time_ms(tri, rep_ms=args.rep_ms)
        rows.append({"layout": layout, "tokens": tokens, "heads": heads, "kernel": "triton", "config": None, "ms": ms})
        print(f"decode {layout:16s} t={tokens} h={heads:3d} triton          {ms:.4f} ms", flush=True)
        for c in configs:
            cfg = gluon64.G64Config(*c)
            fn = lambda: gluon64.run_attention_g64(case.q, flat, case.layout, case.indices, case.sm_scale, None, out,
                                                   lse, config=cfg)
            label = "/".join(map(str, c))
            try:
                ms, diff, ldiff = _checked_time(fn, out, lse, ref_o, ref_l, args.rep_ms)
            except Exception as e:  # noqa: BLE001
                print(f"  g64 {label} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            rows.append({"layout": layout, "tokens": tokens, "heads": heads, "kernel": "gluon64", "config": list(c),
                         "ms": ms, "max_abs_vs_triton": diff, "lse_rel_vs_triton": ldiff})
            print(f"decode {layout:16s} t={tokens} h={heads:3d} gluon64 {label}  {ms:.4f} ms  "
                  f"max_abs_vs_triton={diff:.3g} lse_rel={ldiff:.3g}", flush=True)
    write_json(args.out, "sparse_mla_gluon64_sweep", rows)
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rep-ms", type=float, default=40)
    p.add_argument("--ws", action="store_true", help="sweep the warp-specialized kernel (gluon_ws.py)")
    p.add_argument("--g64", action="store_true", help="sweep the 64-head kernel (gluon64.py) beside Triton")
    p.add_argument("--profile", action="store_true", help="with --ws: also time gluon_ws's timing builds (PROFILES)")
    args = p.parse_args()
    if args.ws:
        return ws_main(args)
    if args.g64:
        return g64_main(args)
    dev = torch.device("cuda")
    rows = []
    for kind, layout, tokens, heads, configs in SWEEP:
        case = decode_case(tokens, heads, layout, dev) if kind == "decode" else prefill_case(tokens, heads, dev)
        flat = case.kv.flatten(0, 1) if kind == "decode" else case.kv
        t, h = case.tokens, case.heads
        out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=dev)
        lse = torch.empty((t, h), dtype=torch.float32, device=dev)
        os.environ["DSATTN_SPARSE_MLA_IMPL"] = "triton"
        tri = lambda: launch.run_attention(case.q, flat, case.layout, case.indices, case.sm_scale, None, out, lse,
                                           "native")
        tri()
        ref_o, ref_l = out.clone(), lse.clone()
        ms = time_ms(tri, rep_ms=args.rep_ms)
        rows.append({"kind": kind, "layout": layout, "tokens": tokens, "heads": heads, "kernel": "triton",
                     "config": None, "ms": ms})
        print(f"{kind:8s} {layout:16s} t={tokens} h={heads:3d} triton          {ms:.4f} ms", flush=True)
        for bn, st, nw in configs:
            cfg = launch.GluonConfig(bn, st, nw)
            fn = lambda: launch.run_attention_gluon(case.q, flat, case.layout, case.indices, case.sm_scale, None,
                                                    out, lse, config=cfg)
            try:
                ms, diff, ldiff = _checked_time(fn, out, lse, ref_o, ref_l, args.rep_ms)
            except Exception as e:  # noqa: BLE001
                print(f"  {bn}/{st}/{nw} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            rows.append({"kind": kind, "layout": layout, "tokens": tokens, "heads": heads, "kernel": "gluon",
                         "config": [bn, st, nw], "ms": ms, "max_abs_vs_triton": diff, "lse_rel_vs_triton": ldiff,
                         "gbps_rows": float((case.indices >= 0).sum()) * case.layout.row_bytes(case.d_qk) / ms / 1e6})
            print(f"{kind:8s} {layout:16s} t={tokens} h={heads:3d} gluon {bn}/{st}/{nw}  {ms:.4f} ms  "
                  f"max_abs_vs_triton={diff:.3g} lse_rel={ldiff:.3g}", flush=True)
    write_json(args.out, "sparse_mla_gluon_sweep", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
