"""Launch configurations of gluon_prefill (DSATTN_PF_CONFIG texts) timed in alternation in one process on issue 3's
prefill case (s_q tokens, `overlap` indices, s_kv 16384, topk 2048), beside FlashMLA native and padded to 64 heads when
.peer is on the path. Written in session 66 for config l2pf (removed since; the runs: bench/results/s66/).

    PYTHONPATH=src:.peer python bench/pf_config_probe.py --sq 1024 --heads 32 \
        --configs ',vst=1,f16=0;cvt_pipe=0;producer_regs=56;plo=0' [--rounds 15] [--calls 20] [--json F]

Each config is DSATTN_PF_CONFIG's text with ';' for ',' (empty: the default). `rounds` rounds of `calls` back-to-back
calls of each arm (CUDA events, round 0 a warm-up; median ms a call and the rounds' spread). These are call times: with
DSATTN_PF_PROFILE (timing builds) a call can be bound by the host, so kernel times come from
bench/prefill_kernel_probe.py; --graph adds each arm as a CUDA-graph replay (its host work left out). Each config's
output is compared with the first config's (max |out| and relative lse differences; bit_equal_first when both are
equal)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

from dsattn.bench.common import graph_replay, provenance
from dsattn.bench.kernels_mla import _peers, flashmla, ours, prefill_case


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--configs", default=",vst=1")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--json", default=None)
    ap.add_argument("--graph", action="store_true",
                    help="also time each arm as a CUDA-graph replay (arm name + ':graph'): the call without its host "
                         "work")
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
    if a.graph:
        for k in list(arms):
            spec, fn, out, lse = arms[k]
            if spec is not None:
                os.environ["DSATTN_PF_CONFIG"] = spec
            arms[k + ":graph"] = (spec, graph_replay(fn), out, lse)
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
            o0, l0 = arms[base][2], arms[base][3]
            row["bit_equal_first"] = bool(torch.equal(out, o0) and torch.equal(lse, l0))
            row["max_abs_out_diff_vs_first"] = float((out.float() - o0.float()).abs().max())
            fin = torch.isfinite(l0)
            if fin.any():  # timing builds (DSATTN_PF_PROFILE) may leave no finite lse
                rel = (lse[fin] - l0[fin]).abs() / l0[fin].abs().clamp_min(1e-6)
                row["max_rel_lse_diff_vs_first"] = float(rel.max())
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
