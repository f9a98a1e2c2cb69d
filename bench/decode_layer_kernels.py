"""Where a decode layer's GPU time goes at small batches: each kernel of one layer's forward inside its CUDA graph.

`dsattn bench serve --graph` times one decode layer at 128 requests (glm-5 TP8 0.269 ms as a replay, session 15); a
latency-bound engine runs 1-32. Here, per preset x TP x layout and batch size (decodes over 4K + 64 i tokens of
context, as bench serve's decode step), the layer's forward (cache writes, indexer, top-k, slot mapping, sparse MLA)
is captured in a CUDA graph and replayed: the replay's time (do_bench: cold L2, the graph's launch included), its span
on the GPU from torch.profiler's kernel events (first kernel's start to last kernel's end, warm, replays back to back),
and each kernel's mean device time a replay, largest first. The sum of the kernels against the span shows the gaps
between them. Writes bench/results/<--name>.json. --usual-cap (session 41) runs the top-k with the candidate capacity
of k alone (ops.topk.select.candidate_capacity), as before select_capacity widened it for few rows a little past it.
--context N (session 43) starts the contexts at N instead of 4096; --topk-3l runs long top-k rows in three launches
(ops.topk.select.fused_tile_default 0), as before session 43; --bf16-dot runs bf16 indexer queries' products in bf16
(ops.indexer.logits._dot_operands with dot "bf16"), as before session 44's scaled fp16 products; --paged-old runs the
pipelined paged logits (block sizes not a multiple of 64) as before session 44: block ids and scales loaded in each
tile's iteration, 4 stages, min(16, 2048 / rows) splits past 4 x SMs one-tile programs; --unfused-writes writes the
latent rows and indexer keys in a launch each (DSAAttention.fused_cache_writes False) and k-pool updates in two launches
(IndexerDriver.one_launch_kpool False), as before session 45; --bf16-together runs a bf16 cache's decode rows in one
prefill call with the calibrated variant (DSAAttention.bf16_decodes_apart False), as before session 45;
--bf16-decode-kernel K runs a bf16 cache's decode rows through the kernel K names (DSAAttention.bf16_decode_kernel:
'decode', 'decode:native', 'decode:pad64' over the paged cache; session 51, an A/B against the default 'prefill');
--graph-steps N prepares the step with graph=True and graph_bucket_steps N (session 50: the indexer's width and the
block table rounded up to the step's bucket, as a graph replayed across steps needs; max_model_len 131072, so that
the bucket is not cut at the step's own longest request), so its cost shows against the default.

    PYTHONPATH=src python bench/decode_layer_kernels.py [--configs glm-5:8:fp8_ds_mla,...] [--batches 1,8,32,128]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

from dsattn.backend.attention import DSAAttention
from dsattn.backend.synthetic import make_step
from dsattn.bench.common import call_spans, graph_replay, kernel_events, time_ms, warm_up_gpu, write_results
from dsattn.config import preset

CONFIGS = "glm-5:8:fp8_ds_mla,glm-5.3-flash:8:fp8_ds_mla_nope,deepseek-v3.2:8:fp8_ds_mla,deepseek-v3.2:1:fp8_ds_mla"
CALIBRATION = os.path.join("bench", "results", "calibration_h200.json")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=CONFIGS, help="comma list of preset:tp:layout")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--calibration", default=CALIBRATION if os.path.exists(CALIBRATION) else None)
    ap.add_argument("--name", default="decode_layer_kernels")
    ap.add_argument("--out", default=None)
    ap.add_argument("--usual-cap", action="store_true", help="the top-k's capacity before session 41 (no widening)")
    ap.add_argument("--context", type=int, default=4096, help="request i's context: context + 64 i tokens")
    ap.add_argument("--topk-3l", action="store_true",
                    help="long top-k rows in three launches always (before session 43's one-launch path)")
    ap.add_argument("--bf16-dot", action="store_true",
                    help="bf16 indexer queries' products in bf16 (before session 44's scaled fp16 products)")
    ap.add_argument("--paged-old", action="store_true",
                    help="the pipelined paged logits' loop and split rule before session 44")
    ap.add_argument("--unfused-writes", action="store_true",
                    help="cache writes as before session 45: latent rows and indexer keys in a launch each, "
                         "k-pool updates in two")
    ap.add_argument("--graph-steps", type=int, default=0,
                    help="N > 0: prepare(graph=True) with graph_bucket_steps N, max_model_len 131072 (session 50)")
    ap.add_argument("--bf16-together", action="store_true",
                    help="a bf16 cache's decode rows in one call with the calibrated prefill variant "
                         "(before session 45)")
    ap.add_argument("--bf16-decode-kernel", default="prefill",
                    help="DSAAttention.bf16_decode_kernel: prefill (default), decode, decode:native, decode:pad64")
    args = ap.parse_args(argv)
    DSAAttention.bf16_decode_kernel = args.bf16_decode_kernel
    if args.bf16_together:
        DSAAttention.bf16_decodes_apart = False
    if args.unfused_writes:
        from dsattn.backend.indexer import IndexerDriver
        DSAAttention.fused_cache_writes = False
        IndexerDriver.one_launch_kpool = False
    if args.paged_old:
        from dsattn.ops.indexer import logits
        paged_config = logits.default_paged_config
        logits.default_paged_config = lambda *a: dict(paged_config(*a), preload=False)
        logits.pipe_splits = lambda rows, tiles, sms: tiles if rows * tiles <= 4 * sms else min(16, -(-2048 // rows))
    if args.bf16_dot:
        from dsattn.ops.indexer import logits
        operands = logits._dot_operands
        logits._dot_operands = lambda q_dtype, k_dtype, dot: operands(q_dtype, k_dtype, "bf16")
    if args.usual_cap:
        from dsattn.ops.topk import select
        select.select_capacity = lambda rows, width, k, sms: select.candidate_capacity(k)
    if args.topk_3l:
        from dsattn.ops.topk import select
        select.fused_tile_default = lambda *a: 0
    if not torch.cuda.is_available():
        print("decode_layer_kernels: needs a CUDA GPU")
        return 2
    dev = torch.device("cuda")
    warm_up_gpu()
    rows = []
    meta = {"calibration": args.calibration, "calls": args.calls, "block_size": 64, "usual_cap": args.usual_cap,
            "context": args.context, "topk_3l": args.topk_3l, "bf16_dot": args.bf16_dot, "paged_old": args.paged_old,
            "unfused_writes": args.unfused_writes, "bf16_together": args.bf16_together, "graph_steps": args.graph_steps,
            "bf16_decode_kernel": args.bf16_decode_kernel,
            "how": "one decode layer's forward captured in a CUDA graph: do_bench replay ms, and torch.profiler "
                   "kernel events of --calls replays (span and each kernel's mean us a replay)"}
    path = None
    for spec in args.configs.split(","):
        name, tp, layout = spec.split(":")
        tp = int(tp)
        geo = preset(name)
        heads = geo.heads_per_rank(tp)
        for b in (int(x) for x in args.batches.split(",")):
            spans = [(args.context + 64 * i, 1) for i in range(b)]
            s = make_step(geo, heads, layout, spans, block_size=64, device=dev, seed=b)
            most = max(c + n for c, n in spans)
            attn = DSAAttention(geo, tp=tp, kv_layout=layout, block_size=64, device=dev, max_num_tokens=b,
                                max_num_reqs=b, max_model_len=max(most, 131072) if args.graph_steps else most,
                                calibration=args.calibration, graph_bucket_steps=args.graph_steps or 1)
            out = torch.empty((b, heads, 512), dtype=torch.bfloat16, device=dev)
            graph = args.graph_steps > 0
            attn.forward(attn.prepare(s.requests, graph=graph), s.q, s.latent, s.kv_cache, s.indexer,
                         out=out)  # compiles
            attn.lock()
            prepared = attn.prepare(s.requests, graph=graph)

            def layer(attn=attn, prepared=prepared, s=s, out=out):
                attn.forward(prepared, s.q, s.latent, s.kv_cache, s.indexer, out=out)

            replay = graph_replay(layer)
            replay_ms = time_ms(replay, warmup_ms=5, rep_ms=25)
            span, kernels = call_spans(kernel_events(replay, args.calls), args.calls)
            kernels = dict(sorted(kernels.items(), key=lambda kv: -kv[1]))
            rows.append({"preset": name, "tp": tp, "heads": heads, "layout": layout, "path": attn.path.value,
                         "requests": b, "replay_ms": replay_ms, "span_us": span,
                         "kernels_sum_us": sum(kernels.values()), "kernel_count": len(kernels),
                         "kernels_us": kernels})
            top = ", ".join(f"{k[:48]} {v:.1f}" for k, v in list(kernels.items())[:6])
            print(f"{name} TP{tp} {layout} ({heads} heads) {b:4d} requests: replay {replay_ms * 1e3:7.1f} us, span "
                  f"{span:7.1f} us, {len(kernels)} kernels summing {sum(kernels.values()):7.1f} us: {top}", flush=True)
            path = write_results(args.name, rows, out_dir=args.out, meta=meta)
            del s, attn, out, replay
            torch.cuda.empty_cache()
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
