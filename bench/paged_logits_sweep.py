"""The decode indexer's paged logits (ops/indexer/logits.launch_logits_paged) at a decode layer's shapes: kernel x
split count, as CUDA-graph replays, beside DeepGEMM's paged MQA logits where its inputs fit (fp8 queries, 32 or 64
heads, block 64).

Session 41's layer profile (bench/results/decode_layer_kernels_s41_new.json) has the paged logits at ~12 us for 1-8
requests of 4K + 64 i tokens and 152 us at 128 requests (0.9 TB/s of its 138 MB). Cases (make_case): requests of
4096 + 64 i tokens (as bench/decode_layer_kernels.py; the chunk as wide as its longest row), a quarter of those over
a block-16 cache (glm-5.3-flash's pooled keys), bench kernels_indexer's uniform 65536 / 131072-token decodes, and
uniform rows over a block-16 cache (`upooled`).

Kernels (KERNELS): the default, the pipelined loads (`pipe`), `old` (the default before session 42: pipelined loads,
4 stages, min(16, 2048 / rows) splits), key tiles by tensor descriptor (`tma_s<num_stages>`), the pipelined loads
with block ids and scales loaded in each tile's own iteration (`noahead`, `pipe_noahead`: before session 44) or the
program's block ids preloaded (`pipe_preload[_s<stages>]`), the default with bf16 products (`bf16dot`: bf16 queries'
form before session 44). Each at launch_logits_paged's own split rule (`rule`), at `fill` (fill_splits, a rule tried
in session 42) and at fixed split counts (`all`: one tile a program). Each variant's logits are compared with the
default's (same inputs). Rounds alternate the variants; a timing is one replay of a graph of --calls launches divided
by --calls. Writes bench/results/<--name>.json.

    PYTHONPATH=src:.peer python bench/paged_logits_sweep.py [--cases ...] [--kernels default,old] [--splits rule,8,all]
"""
from __future__ import annotations

import argparse
import sys

import torch

from dsattn import formats
from dsattn.bench.common import time_ms, warm_up_gpu, write_results
from dsattn.bench.kernels_indexer import _peers
from dsattn.ops._triton import sm_count
from dsattn.ops.indexer.logits import launch_logits_paged

CASES = ("layer:1:32:bf16,layer:8:32:bf16,layer:32:32:bf16,layer:128:32:bf16,layer:1:32:fp8,layer:8:32:fp8,"
         "layer:32:32:fp8,layer:128:32:fp8,layer:1:64:bf16,layer:32:64:bf16,layer:128:64:bf16,"
         "uniform:128:32:fp8:65536,uniform:32:32:fp8:131072")
# session 42's first sweep also ran a hand-issued register ring (ahead 1 / 2 tiles; code at ae97e09), since removed
KERNELS = {"default": {}, "pipe": {"tma": False, "num_stages": 4}, "old": {"tma": False, "num_stages": 4},
           "tma_s3": {"tma": True, "num_stages": 3}, "tma_s4": {"tma": True, "num_stages": 4},
           "tma_s6": {"tma": True, "num_stages": 6}, "tma_s4_w8": {"tma": True, "num_stages": 4, "num_warps": 8},
           "bf16dot": {"dot": "bf16"},  # bf16 queries' products in bf16, the default before session 44
           # the pipelined loads with each tile's block ids and scales loaded in its own iteration (before session 44;
           # session 44's calls b-e also ran them a tile ahead by hand, code at ce061ed), and with the program's block
           # ids preloaded (the default since session 44) at 3 / 4 / 5 stages
           "noahead": {"preload": False}, "pipe_noahead": {"tma": False, "num_stages": 4, "preload": False},
           "pipe_preload_s3": {"tma": False, "num_stages": 3}, "pipe_preload": {"tma": False, "num_stages": 4},
           "pipe_preload_s5": {"tma": False, "num_stages": 5}}


def fill_splits(rows, tiles, sms):
    """A split rule to try: about 4 programs an SM, at least 16 splits a row, at most 32 tiles a program."""
    return min(tiles, max(16, -(-4 * sms // rows), -(-tiles // 32)))


def make_case(spec: str, dev):
    """kind:requests:heads:dtype[:ctx] -> dict of inputs. layer: contexts 4096 + 64 i, block 64; pooled: a quarter of
    those, block 16 (glm-5.3-flash's k-pool of 4); uniform: every request ctx, block 64; upooled: every request ctx,
    block 16."""
    parts = spec.split(":")
    kind, reqs, heads, qd = parts[0], int(parts[1]), int(parts[2]), parts[3]
    bs = 16 if kind in ("pooled", "upooled") else 64
    if kind in ("uniform", "upooled"):
        ctxs = [int(parts[4])] * reqs
    else:
        ctxs = [(4096 + 64 * i) // (4 if kind == "pooled" else 1) for i in range(reqs)]
    per = [-(-c // bs) for c in ctxs]
    nb = sum(per) + 3
    cache = formats.new_indexer_cache(nb, bs, device=dev)
    values, scales = formats.indexer_cache_views(cache)
    v, s = formats.quantize_fp8(torch.randn(nb * bs, 128, device=dev))
    values.copy_(v.view(nb, bs, 128))
    scales.copy_(s.view(nb, bs))
    perm = torch.randperm(nb, device=dev).to(torch.int32)
    table = torch.full((reqs, max(per)), -1, dtype=torch.int32, device=dev)
    at = 0
    for r, p in enumerate(per):
        table[r, :p] = perm[at:at + p]
        at += p
    qf = torch.randn(reqs, heads, 128, device=dev) * 2
    q = qf.to(formats.FP8) if qd == "fp8" else qf.bfloat16()
    w = torch.rand(reqs, heads, device=dev) * heads ** -0.5 * 128 ** -0.5
    row_len = torch.tensor(ctxs, dtype=torch.int32, device=dev)
    row_req = torch.arange(reqs, dtype=torch.int32, device=dev)
    out = torch.empty(reqs, max(ctxs), device=dev)
    return dict(spec=spec, q=q, w=w, cache=cache, table=table, row_req=row_req, row_len=row_len, out=out,
                ctxs=ctxs, heads=heads, qd=qd, bs=bs)


def graph_of(fn, calls):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return g.replay


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--kernels", default="default,old,pipe,tma_s3,tma_s4")
    ap.add_argument("--splits", default="rule,fill,8,32,64,all")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--rep-ms", type=float, default=20)
    ap.add_argument("--name", default="paged_logits_sweep")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("paged_logits_sweep: needs a CUDA GPU")
        return 2
    dev = torch.device("cuda")
    torch.manual_seed(0)
    warm_up_gpu()
    pe = _peers()
    rows = []
    for spec in args.cases.split(","):
        c = make_case(spec, dev)
        t, width = c["out"].shape
        keys = sum(c["ctxs"])
        mb = keys * 132 / 1e6
        launch = lambda cfg, out=c["out"]: launch_logits_paged(c["q"], c["w"], c["cache"], c["table"], c["row_req"],  # noqa: E731
                                                                c["row_len"], out, cfg)
        ref = torch.full_like(c["out"], float("nan"))
        launch({}, ref)
        torch.cuda.synchronize()
        variants = []
        for kn in args.kernels.split(","):
            kc = KERNELS[kn]
            bn = kc.get("BN", 64)
            tiles = -(-width // bn)
            for sp in args.splits.split(","):
                if sp == "rule" and kn == "old":
                    cfg = dict(kc, splits=max(1, min(16, -(-2048 // t))))
                elif sp == "rule":
                    cfg = dict(kc)
                elif sp == "fill":
                    cfg = dict(kc, splits=fill_splits(t, tiles, sm_count(dev, 132)))
                else:
                    n = tiles if sp == "all" else int(sp)
                    cfg = dict(kc, splits=n)
                variants.append((f"{kn}/{sp}", cfg))
        res = {name: [] for name, _ in variants}
        check = {}
        for name, cfg in variants:
            c["out"].fill_(float("nan"))
            launch(cfg)
            torch.cuda.synchronize()
            o = c["out"]
            same_inf = bool(torch.equal(o.isinf(), ref.isinf())) and not bool(o.isnan().any())
            fin = ref.isfinite()
            diff = float(((o[fin] - ref[fin]).abs() / ref[fin].abs().clamp_min(1e-3)).max()) if fin.any() else 0.0
            check[name] = dict(same_inf=same_inf, max_rel_diff=diff)
        replays = {name: graph_of(lambda cfg=cfg: launch(cfg), args.calls) for name, cfg in variants}
        if pe is not None and c["qd"] == "fp8" and c["heads"] in (32, 64) and c["bs"] == 64:
            try:
                q4 = c["q"].view(t, 1, c["heads"], 128)
                lens = c["row_len"].view(t, 1)
                cache4 = c["cache"].unsqueeze(2)
                peer = lambda: pe.deepgemm_paged_mqa_logits(q4, cache4, c["w"], lens, c["table"].clamp_min(0), width)  # noqa: E731
                got = peer()
                fin = ref.isfinite()
                check["deepgemm"] = dict(max_rel_diff=float(((got[fin] - ref[fin]).abs()
                                                             / ref[fin].abs().clamp_min(1e-3)).max()))
                replays["deepgemm"] = graph_of(peer, args.calls)
                res["deepgemm"] = []
            except Exception as e:  # noqa: BLE001 - the peer is optional
                check["deepgemm"] = dict(error=f"{type(e).__name__}: {str(e)[:200]}")
        for _ in range(args.rounds):
            for name, rep in replays.items():
                res[name].append(time_ms(rep, warmup_ms=5, rep_ms=args.rep_ms) / args.calls)
        best = {name: min(v) for name, v in res.items()}
        base = best.get("old/rule")
        for name, v in res.items():
            row = dict(case=spec, rows=t, width=width, keys=keys, cache_mb=mb, variant=name, us=[x * 1e3 for x in v],
                       best_us=best[name] * 1e3, tbs=mb / 1e6 / (best[name] / 1e3), block_size=c["bs"],
                       **check.get(name, {}))
            if base:
                row["vs_old"] = base / best[name]
            rows.append(row)
        top = sorted(best.items(), key=lambda kv: kv[1])[:6]
        bad = [n for n, ch in check.items() if n != "deepgemm"
               and (not ch.get("same_inf", True) or ch.get("max_rel_diff", 0) > 1e-3)]
        print(f"{spec} ({t} rows, width {width}, {mb:.1f} MB, SMs {sm_count(dev, 0)}): old/rule "
              f"{(base or 0) * 1e3:.1f} us; default/rule {best.get('default/rule', 0) * 1e3:.1f} us; best " + ", ".join(f"{n} {m * 1e3:.1f}" for n, m in top)
              + (f"; deepgemm {best['deepgemm'] * 1e3:.1f}" if "deepgemm" in best else "")
              + (f"; BAD {bad}" if bad else ""), flush=True)
        path = write_results(args.name, rows, out_dir=args.out,
                             meta=dict(calls=args.calls, rounds=args.rounds, rep_ms=args.rep_ms,
                                       how="CUDA-graph replays of --calls launches / --calls, do_bench median, "
                                           "best of --rounds alternating rounds"))
        c = replays = ref = None
        torch.cuda.empty_cache()
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
