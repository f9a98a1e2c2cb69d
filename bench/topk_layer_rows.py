"""The top-k rows a decode layer hands to ops.topk, taken out and examined: which path each row takes, and the top-k
alone on them (three launches against the one-launch path, CUDA-graph replays).

Session 43's layer profile (decode_layer_64k_s43.json) gave glm-5.3-flash TP8 at 32 requests of 64K + 64 i tokens a
54.7 us select (8.1 us at 16 requests). This runs that layer's forward once with ops.topk wrapped to keep each call's
logits and lengths, then per call: the three launches cut after the filter (stop=2) to read every row's candidate
count (rows outside [k, cap] take the select's retries: one program re-reads the whole row), the logits' spread
(distinct values, -inf, zeros), and the top-k timed both ways on the same rows. Then, on 4096 iid rows of that
width (k 512) and of 65536 (k 2048), the share of rows the sample misjudges at sample sizes 1024, 2048 and 4096; and
what one misjudged row costs a call (1 and 128 rows of 65536, k 2048, beside rows the sample judges right).

    PYTHONPATH=src python bench/topk_layer_rows.py [--config glm-5.3-flash:8:fp8_ds_mla_nope] [--batches 16,32]
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

from dsattn.backend import indexer as backend_indexer
from dsattn.backend.attention import DSAAttention
from dsattn.backend.synthetic import make_step
from dsattn.bench.common import graph_replay, provenance, time_ms, warm_up_gpu
from dsattn.config import preset
from dsattn.ops.topk import select, topk_scratch_spec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="glm-5.3-flash:8:fp8_ds_mla_nope")
    ap.add_argument("--batches", default="16,32")
    ap.add_argument("--context", type=int, default=65536)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only-iid", action="store_true", help="skip the layer's rows")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("topk_layer_rows: needs a CUDA GPU")
        return 2
    dev = torch.device("cuda")
    warm_up_gpu()
    name, tp, layout = args.config.split(":")
    geo = preset(name)
    heads = geo.heads_per_rank(int(tp))
    calls = []
    real_topk = backend_indexer.topk

    def keep(logits, lengths, k, out=None, scratch=None):
        calls.append((logits.clone(), lengths.clone(), k))
        return real_topk(logits, lengths, k, out=out, scratch=scratch)

    rows_out = []
    for b in ([] if args.only_iid else (int(v) for v in args.batches.split(","))):
        spans = [(args.context + 64 * i, 1) for i in range(b)]
        s = make_step(geo, heads, layout, spans, block_size=64, device=dev, seed=b)
        attn = DSAAttention(geo, tp=int(tp), kv_layout=layout, block_size=64, device=dev, max_num_tokens=b,
                            max_num_reqs=b, max_model_len=max(c + n for c, n in spans))
        out = torch.empty((b, heads, 512), dtype=torch.bfloat16, device=dev)
        calls.clear()
        backend_indexer.topk = keep
        try:
            attn.forward(attn.prepare(s.requests), s.q, s.latent, s.kv_cache, s.indexer, out=out)
        finally:
            backend_indexer.topk = real_topk
        for logits, lengths, k in calls:
            t, w = logits.shape
            cap = select.candidate_capacity(k)
            (shape, dtype), = topk_scratch_spec(t, w, k)
            scratch = torch.zeros(shape, dtype=dtype, device=dev)
            idx = torch.empty((t, k), dtype=torch.int32, device=dev)
            select.launch_topk(logits, lengths, k, idx, scratch, version=4, fused=False, stop=2)
            counts = scratch[:, 2 * cap + 3].tolist() if w > cap else [None] * t
            n = lengths.clamp(0, w).tolist()
            valid = torch.arange(w, device=dev)[None, :] < lengths.clamp(0, w)[:, None].long()
            x = logits.masked_fill(~valid, float("nan"))
            info = dict(requests=b, rows=t, width=w, k=k, cap=cap, lengths=n, counts=counts,
                        outside=[r for r in range(t) if counts[r] is not None and n[r] > cap
                                 and not k <= counts[r] <= cap],
                        zeros=(x == 0).sum(1).tolist(), neg_inf=(x == float("-inf")).sum(1).tolist(),
                        distinct=[int(torch.unique(x[r, :n[r]]).numel()) for r in range(min(t, 4))])
            times = {}
            for label, kw in (("three_launches", dict(fused=False)), ("one_launch", dict(fused=True)),
                              ("default", {})):
                try:
                    fn = graph_replay(lambda kw=kw: select.launch_topk(logits, lengths, k, idx, scratch, version=4,
                                                                        **kw))
                    times[label] = time_ms(fn, warmup_ms=5, rep_ms=20) * 1e3
                except ValueError as e:
                    times[label] = str(e)[:120]
            info["graph_us"] = times
            rows_out.append(info)
            cs = sorted(c for c in counts if c is not None)
            print(f"{name} {b} requests: {t} rows x {w}, k {k}, cap {cap}: rows outside [k, cap] {info['outside']} "
                  f"(counts {cs[:3]}..{cs[-3:]}), zeros/row {info['zeros'][:4]}, distinct {info['distinct']}; "
                  f"graph us {times}", flush=True)
        del s, attn, out
        torch.cuda.empty_cache()
    # the sample's misses on iid rows: the share of rows whose candidate count leaves [k, cap] by sample size
    misses = []
    for k, w in ((512, 16880), (2048, 65536)):
        t = 4096
        x = torch.randn(t, w, device=dev)
        lengths = torch.full((t,), w, dtype=torch.int32, device=dev)
        cap = select.candidate_capacity(k)
        (shape, dtype), = topk_scratch_spec(t, w, k)
        scr = torch.zeros(shape, dtype=dtype, device=dev)
        sel = torch.empty((t, k), dtype=torch.int32, device=dev)
        for sample in (1024, 2048, 4096):
            select.launch_topk(x, lengths, k, sel, scr, version=4, fused=False, stop=2, sample=sample)
            c = scr[:, 2 * cap + 3].float()
            out_of = int(((c < k) | (c > cap)).sum())
            misses.append(dict(k=k, width=w, rows=t, sample=sample, rows_outside=out_of, mean=float(c.mean()),
                               sd=float(c.std())))
            print(f"iid rows {t} x {w}, k {k}, cap {cap}, sample {sample}: {out_of} rows outside [k, cap] "
                  f"({100 * out_of / t:.2f}%), count mean {float(c.mean()):.0f} sd {float(c.std()):.1f}", flush=True)
        del x, scr, sel
    # what one retried row costs: rows the sample of 2048 misjudges, found among iid rows, timed in a batch beside
    # rows it does not (one launch at 1 row, three at 128), and the same batches with a sample of 4096
    retry = []
    k, w = 2048, 65536
    gen = torch.Generator(device=dev)
    gen.manual_seed(43)
    x = torch.randn(4096, w, device=dev, generator=gen)
    lengths = torch.full((4096,), w, dtype=torch.int32, device=dev)
    cap = select.candidate_capacity(k)
    (shape, dtype), = topk_scratch_spec(4096, w, k)
    scr = torch.zeros(shape, dtype=dtype, device=dev)
    sel = torch.empty((4096, k), dtype=torch.int32, device=dev)
    select.launch_topk(x, lengths, k, sel, scr, version=4, fused=False, stop=2)
    c = scr[:, 2 * cap + 3]
    bad = ((c < k) | (c > cap)).nonzero()[:, 0].tolist()
    good = ((c >= k) & (c <= cap)).nonzero()[:, 0].tolist()
    print(f"retry cost: rows the sample of 2048 misjudges: {bad} (counts {[int(c[r]) for r in bad]})", flush=True)
    for rows in (1, 128):
        if not bad:
            break
        for label, pick in (("with a retried row", [bad[0]] + good[:rows - 1]), ("without", good[:rows])):
            xb = x[pick].contiguous()
            lb = lengths[:rows]
            (shape, dtype), = topk_scratch_spec(rows, w, k)
            sb = torch.zeros(shape, dtype=dtype, device=dev)
            ob = torch.empty((rows, k), dtype=torch.int32, device=dev)
            res = dict(rows=rows, batch=label)
            for sample in (2048, 4096):
                fn = graph_replay(lambda sample=sample: select.launch_topk(xb, lb, k, ob, sb, version=4, sample=sample))
                res[f"sample_{sample}_us"] = time_ms(fn, warmup_ms=5, rep_ms=20) * 1e3
            retry.append(res)
            print(f"retry cost: {rows} rows {label}: {res}", flush=True)
    del x, scr, sel
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(provenance=provenance(), config=args.config, context=args.context, rows=rows_out,
                           iid_misses=misses, retry_cost=retry), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
