"""Session 66: what FlashMLA's L2 prefetch-size hint (cp.async ... L2::256B; gluon_prefill config l2pf) is worth on
issue 3's prefill case (s_q tokens, `overlap` indices, s_kv 16384, topk 2048), in one process on the GPU.

    PYTHONPATH=src:.peer python bench/l2pf_probe.py --sq 1024 --heads 32 \
        --configs ',l2pf=256,f16=0;cvt_pipe=0;producer_regs=56;plo=0' [--rounds 15] [--calls 20] [--json F]

Each config is DSATTN_PF_CONFIG's text with ';' for ',' (empty: the default). Configs are timed in alternation
(`rounds` rounds of `calls` back-to-back calls each, CUDA events; median ms a call and the spread of the rounds), and
beside FlashMLA's best of native / 64 heads padded when .peer is on the path. Each config's output is compared with
the first config of the same numerics (outputs of configs that differ only in l2pf must be bit-equal: the hint changes
which bytes L2 fetches, not what lands) and with the first config."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

from dsattn.bench.common import provenance
from dsattn.bench.kernels_mla import _peers, flashmla, ours, prefill_case


def _numerics(spec: str) -> str:
    return ",".join(p for p in spec.split(",") if p and not p.startswith("l2pf="))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--configs", default=",l2pf=256")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    dev = torch.device("cuda")
    os.environ["DSATTN_SPARSE_MLA_IMPL"] = "gluon_prefill"
    specs = [c.replace(";", ",") for c in a.configs.split(",")]
    case = prefill_case(a.sq, a.heads, dev)
    arms = {}
    for spec in specs:
        os.environ["DSATTN_PF_CONFIG"] = spec
        fn, out, lse = ours(case)[:3]
        fn()
        torch.cuda.synchronize()
        arms[spec or "default"] = (spec, fn, out.clone(), lse.clone())
    peers = _peers()
    if peers is not None:
        for w in sorted({a.heads, 64}):
            built = flashmla(case, peers, w)
            if built is not None:
                built[0]()
                arms[f"flashmla_{w}"] = (None, built[0], None, None)
    times = {k: [] for k in arms}
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    for r in range(a.rounds + 1):
        for k, (spec, fn, _, _) in arms.items():
            if spec is not None:
                os.environ["DSATTN_PF_CONFIG"] = spec
            ev[0].record()
            for _ in range(a.calls):
                fn()
            ev[1].record()
            torch.cuda.synchronize()
            if r:  # round 0 warms up
                times[k].append(ev[0].elapsed_time(ev[1]) / a.calls)
    first = {}
    base = next(iter(arms))
    rows = []
    fm = [statistics.median(v) for k, v in times.items() if k.startswith("flashmla")]
    best_fm = min(fm) if fm else None
    for k, (spec, fn, out, lse) in arms.items():
        med = statistics.median(times[k])
        row = {"arm": k, "ms": med, "round_min": min(times[k]), "round_max": max(times[k]),
               "vs_first": statistics.median(times[base]) / med}
        if best_fm is not None:
            row["vs_flashmla_best"] = best_fm / med
        if spec is not None:
            key = _numerics(spec)
            if key in first:
                o0, l0 = first[key]
                row["bit_equal_same_numerics"] = bool(torch.equal(out, o0) and torch.equal(lse, l0))
            else:
                first[key] = (out, lse)
            o0, l0 = arms[base][2], arms[base][3]
            row["max_abs_out_diff_vs_first"] = float((out.float() - o0.float()).abs().max())
            fin = torch.isfinite(l0)
            row["max_rel_lse_diff_vs_first"] = float(((lse[fin] - l0[fin]).abs() / l0[fin].abs().clamp_min(1e-6)).max())
        rows.append(row)
        print(json.dumps(row))
    res = {"provenance": provenance(), "s_q": a.sq, "heads": a.heads, "rounds": a.rounds, "calls": a.calls,
           "rows": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
