"""bf16 indexer queries over fp8 keys: the prefill and paged logits with scaled fp16 products (the default since
session 44, ops/indexer/logits._q_fp16) against the bf16 products before it (config dot="bf16"), and fp8 queries
beside them, as CUDA-graph replays; each variant's logits compared with the default's (0: bit-equal).

Prefill cases are causal tails rows x ctx (kernels_indexer's shapes); paged ones are bench/paged_logits_sweep.py's
make_case specs (kind:requests:heads:dtype[:ctx]; the dtype there is ignored, all three forms run). Writes
bench/results/<--name>.json.

    PYTHONPATH=src:.peer python bench/logits_bf16q.py [--prefill 4096:65536:32,...] [--paged layer:32:32:bf16,...]
        [--prefill-sweep]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

from dsattn import formats
from dsattn.bench.common import time_ms, warm_up_gpu, write_results
from dsattn.bench.kernels_indexer import LOGITS_CONFIGS
from dsattn.ops.indexer.logits import launch_logits, launch_logits_paged

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paged_logits_sweep import graph_of, make_case  # noqa: E402

PREFILL = "1024:16384:32,4096:65536:32,4096:65536:64"
PAGED = ("layer:1:32:bf16,layer:8:32:bf16,layer:32:32:bf16,layer:128:32:bf16,layer:128:64:bf16,"
         "uniform:1:32:bf16:65536,uniform:4:32:bf16:65536,uniform:16:32:bf16:65536,uniform:32:32:bf16:65536,"
         "pooled:1:32:bf16,pooled:32:32:bf16,pooled:128:32:bf16")
FORMS = {"bf16_fp16": ("bf16", {}), "bf16_bf16": ("bf16", {"dot": "bf16"}), "fp8": ("fp8", {})}


def rel_diff(a, b):
    fin = b.isfinite()
    if not torch.equal(fin, a.isfinite()) or a.isnan().any():
        return float("inf")
    return float(((a[fin] - b[fin]).abs() / b[fin].abs().clamp_min(1e-3)).max()) if fin.any() else 0.0


def measure(launches, calls, rounds, rep_ms):
    """launches: {form: (fn(out), out)} -> ({form: [ms per call]}, {form: diff vs bf16_fp16})."""
    outs = {}
    for name, (fn, out) in launches.items():
        out.fill_(float("nan"))
        fn(out)
        torch.cuda.synchronize()
        outs[name] = out.clone()
    base = outs["bf16_fp16"]
    diffs = {name: rel_diff(o, base) for name, o in outs.items() if name != "fp8"}
    diffs["bf16_bitequal"] = bool(torch.equal(outs["bf16_bf16"], base))
    del outs
    reps = {name: graph_of(lambda fn=fn, out=out: fn(out), calls) for name, (fn, out) in launches.items()}
    times = {name: [] for name in launches}
    for _ in range(rounds):
        for name, rep in reps.items():
            times[name].append(time_ms(rep, warmup_ms=5, rep_ms=rep_ms) / calls)
    return times, diffs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefill", default=PREFILL)
    ap.add_argument("--paged", default=PAGED)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--rep-ms", type=float, default=30)
    ap.add_argument("--prefill-sweep", action="store_true",
                    help="also time kernels_indexer's LOGITS_CONFIGS (BT scaled to the heads) for bf16 queries")
    ap.add_argument("--name", default="logits_bf16q")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("logits_bf16q: needs a CUDA GPU")
        return 2
    dev = torch.device("cuda")
    torch.manual_seed(0)
    warm_up_gpu()
    rows = []
    for spec in filter(None, args.prefill.split(",")):
        t, ctx, heads = map(int, spec.split(":"))
        qf = torch.randn(t, heads, 128, device=dev) * 2
        qs = {"bf16": qf.bfloat16(), "fp8": qf.to(formats.FP8)}
        w = torch.rand(t, heads, device=dev) * heads ** -0.5 * 128 ** -0.5
        v, s = formats.quantize_fp8(torch.randn(ctx, 128, device=dev))
        k_scale = s[:, 0].contiguous()
        ks = torch.zeros(t, dtype=torch.int32, device=dev)
        ke = torch.arange(ctx - t + 1, ctx + 1, dtype=torch.int32, device=dev)
        launches = {name: (lambda out, qd=qd, cfg=cfg: launch_logits(qs[qd], w, v, k_scale, ks, ke, out, cfg),
                           torch.empty(t, ctx, device=dev)) for name, (qd, cfg) in FORMS.items()}
        times, diffs = measure(launches, args.calls, args.rounds, args.rep_ms)
        flops = 2.0 * float((ke - ks).sum()) * heads * 128
        row = dict(op="prefill", case=spec, diffs=diffs, ms=times,
                   tflops={n: flops / min(v) / 1e9 for n, v in times.items()})
        if args.prefill_sweep:
            out = launches["bf16_fp16"][1]
            sweep = {}
            for cfg in LOGITS_CONFIGS:
                cfg = dict(cfg, BT=max(1, cfg["BT"] * 32 // heads))
                rep = graph_of(lambda cfg=cfg: launch_logits(qs["bf16"], w, v, k_scale, ks, ke, out, cfg), args.calls)
                sweep[str(cfg)] = min(time_ms(rep, warmup_ms=5, rep_ms=args.rep_ms) / args.calls
                                      for _ in range(args.rounds))
            row["bf16_fp16_sweep_ms"] = sweep
        print(row, flush=True)
        rows.append(row)
        del launches
        torch.cuda.empty_cache()
    for spec in filter(None, args.paged.split(",")):
        c = make_case(spec, dev)
        qf = c["q"].float()
        qs = {"bf16": qf.bfloat16(), "fp8": qf.to(formats.FP8)}
        launches = {name: (lambda out, qd=qd, cfg=cfg: launch_logits_paged(qs[qd], c["w"], c["cache"], c["table"],
                                                                          c["row_req"], c["row_len"], out, cfg),
                           torch.empty_like(c["out"])) for name, (qd, cfg) in FORMS.items()}
        times, diffs = measure(launches, args.calls, args.rounds, args.rep_ms)
        mb = sum(c["ctxs"]) * 132 / 1e6
        row = dict(op="paged", case=spec, block_size=c["bs"], mb=mb, diffs=diffs, ms=times,
                   tb_s={n: mb / min(v) / 1e3 for n, v in times.items()})
        print(row, flush=True)
        rows.append(row)
        torch.cuda.empty_cache()
    write_results(args.name, rows, out_dir=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
