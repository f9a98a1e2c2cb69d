"""``dsattn bench serve``: serving steps through the backend, timed.

For each preset x TP x cache layout below, a ``DSAAttention`` sized for the step's limits runs a few
realistic batches (random caches holding each request's history, random block tables; values from
``backend.synthetic``): decodes only, decodes with a prefill chunk (the mixed step), and prefill chunks
only. One step is ``prepare`` (host metadata, one copy) plus one full layer's ``forward`` (cache writes,
indexer, top-k, slot mapping, sparse MLA). Reported per step: median ms (CUDA events), prepare-only ms
(host; prepare_batch_ms: the same requests as a RequestBatch), layer_ms (one layer's forward alone on the
prepared step: prepare runs once a step for all layers, the forward once a layer), tokens per second, the path
and the workspace bytes (total and per consumer in the JSON).
With ``--graph`` the layer's forward is also captured into a CUDA graph and replayed (graph_ms; the replay's
output and top-k sets compared with the eager call's: graph_equal, graph_same_selection, graph_max_diff, and
eager_equal for two eager calls), as an engine captures its decode steps; a capture that fails is reported
(graph_error), not raised. Run it in a process of its own: a failed capture can leave the
CUDA context unusable for what follows.

    PYTHONPATH=src python -m dsattn.cli bench serve --out bench/results
    ... --quick          # the mixed step only
    ... --scenarios long # a 4096-token chunk after 60K of context (not in the default run)
    ... --spare-blocks N # a cache N blocks larger than the step needs, the requests' blocks spread over it
    ... --tiny           # scaled-down shapes on the CPU (functional check; timings mean nothing)
    ... --graph          # also the layer as CUDA-graph replays

With ``--calibration FILE`` (default bench/results/calibration_h200.json when present) the backend's head
dispatch follows that table; otherwise SPEC 7's thresholds.
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from ..backend.attention import INDICES, DSAAttention
from ..backend.metadata import RequestBatch
from ..backend.synthetic import make_step
from ..config import preset
from .common import format_table, time_ms, write_results

CONFIGS = [  # preset, TP, cache layout
    ("glm-5", 8, "fp8_ds_mla"),
    ("glm-5", 2, "fp8_ds_mla"),
    ("glm-5", 8, "bf16"),
    ("deepseek-v3.2", 8, "fp8_ds_mla"),
    ("deepseek-v3.2", 1, "fp8_ds_mla"),
    ("glm-5.3-flash", 8, "fp8_ds_mla_nope"),
]


DEFAULT_SCENARIOS = ("decode", "mixed", "prefill")


def scenarios(tiny: bool) -> dict[str, list[tuple[int, int]]]:
    """Batches as (cached, scheduled) per request, decodes first. The default run takes DEFAULT_SCENARIOS; "long"
    (--scenarios) is a chunk of a long prompt, whose gathered context (65536 keys) was past the dense union lists'
    reach at 8 and 16 heads before session 46."""
    if tiny:
        return {"decode": [(40 + 3 * i, 1) for i in range(4)],
                "mixed": [(40 + 3 * i, 1) for i in range(3)] + [(30, 12)],
                "prefill": [(0, 16), (24, 12)],
                "long": [(112, 16)]}
    return {
        # 128 decodes over 4K..12K tokens of context
        "decode": [(4096 + 64 * i, 1) for i in range(128)],
        # 64 decodes and one 4096-token prefill chunk after 12K of context
        "mixed": [(4096 + 128 * i, 1) for i in range(64)] + [(12288, 4096)],
        # a prompt from scratch and a chunk after 24K of context
        "prefill": [(0, 4096), (24576, 4096)],
        # a 4096-token chunk after 60K of context
        "long": [(61440, 4096)],
    }


def replay_vs_eager(layer, out, rep_ms: float, indices=None) -> dict:
    """layer() (one forward writing `out`; `indices`: the top-k it leaves in the workspace, or None) captured into a
    CUDA graph after a warm-up on a side stream, then replayed. Returns graph_ms, eager_equal (two eager calls give
    the same out bit for bit; before session 15 they did not where the top-k's atomics ordered its selection),
    graph_equal (the replay's out equals the first eager call's), graph_max_diff, and with indices
    graph_same_selection (the same top-k sets, row by row); or graph_error when the capture fails. (Not
    bench.common.graph_replay, which only captures: this one warms up on a side stream and checks the replay.)"""
    try:
        layer()
        want = out.clone()
        picked = indices.sort(dim=-1).values if indices is not None else None
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            layer()
        torch.cuda.current_stream().wait_stream(side)
        eager_equal = bool(torch.equal(out, want))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            layer()
        out.fill_(float("nan"))
        if indices is not None:
            indices.fill_(-7)
        graph.replay()
        torch.cuda.synchronize()
        got = {"eager_equal": eager_equal, "graph_equal": bool(torch.equal(out, want)),
               "graph_max_diff": float((out.float() - want.float()).abs().max())}
        if indices is not None:
            got["graph_same_selection"] = bool(torch.equal(indices.sort(dim=-1).values, picked))
        return {"graph_ms": time_ms(graph.replay, warmup_ms=rep_ms / 4, rep_ms=rep_ms), **got}
    except Exception as e:  # reported in the table: whether the layer can be captured is the result
        return {"graph_error": f"{type(e).__name__}: {e}".splitlines()[0][:200]}


def _host_ms(fn) -> float:
    """Mean wall milliseconds of fn() over at least 3 calls and 50 ms."""
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < 0.05 or n < 3:
        fn()
        n += 1
    return (time.perf_counter() - t0) * 1e3 / n


def run(args) -> list[dict]:
    dev = torch.device(args.device)
    steps = {k: v for k, v in scenarios(args.tiny).items() if k in args.scenarios}
    rows = []
    for name, tp, layout in args.configs:
        geo = preset(name)
        block_size = 64
        if args.tiny:
            geo = geo.scaled(index_topk=16, index_n_heads=4)
            block_size = 16
        heads = geo.heads_per_rank(tp)
        for scenario, spans in steps.items():
            s = make_step(geo, heads, layout, spans, block_size=block_size, device=dev, seed=len(spans),
                          spare_blocks=args.spare_blocks)
            tokens = s.q.shape[0]
            attn = DSAAttention(geo, tp=tp, kv_layout=layout, block_size=block_size, device=dev,
                                max_num_tokens=tokens, max_num_reqs=len(spans),
                                max_model_len=max(c + n for c, n in spans), calibration=args.calibration)
            out = torch.empty((tokens, heads, 512), dtype=torch.bfloat16, device=dev)

            def step():
                attn.forward(attn.prepare(s.requests), s.q, s.latent, s.kv_cache, s.indexer, out=out)

            step()  # compiles, autotunes
            attn.lock()
            ms = time_ms(step, warmup_ms=args.rep_ms / 4, rep_ms=args.rep_ms)
            prepared = attn.prepare(s.requests)

            def layer():
                attn.forward(prepared, s.q, s.latent, s.kv_cache, s.indexer, out=out)

            layer_ms = time_ms(layer, warmup_ms=args.rep_ms / 4, rep_ms=args.rep_ms)
            graph = {}
            if args.graph:
                idx = attn.workspace.view(INDICES, (tokens, attn.width), torch.int32)
                graph = replay_vs_eager(layer, out, args.rep_ms, idx)
            prep_ms, prep_batch_ms = (_host_ms(lambda: attn.prepare(r))
                                      for r in (s.requests, RequestBatch.from_requests(s.requests)))
            rows.append({
                "preset": name, "tp": tp, "heads": heads, "layout": layout, "path": attn.path.value,
                "scenario": scenario, "requests": len(spans), "tokens": tokens,
                "context_tokens": sum(c + n for c, n in spans), "step_ms": ms, "prepare_ms": prep_ms,
                "prepare_batch_ms": prep_batch_ms,
                "layer_ms": layer_ms, **graph,
                "tokens_per_s": tokens / ms * 1e3, "workspace_MiB": attn.workspace_bytes / 2**20,
                "workspace": {r["consumer"]: r["bytes"] for r in attn.workspace.report()},
            })
            g = (f", graph {graph['graph_ms']:.3f} ms (replay == eager: {graph['graph_equal']}, eager == eager: "
                 f"{graph['eager_equal']}, same top-k sets: {graph['graph_same_selection']}, max diff "
                 f"{graph['graph_max_diff']:.2e})" if "graph_ms" in graph else
                 f", graph capture failed: {graph['graph_error']}" if graph else "")
            print(f"{name} TP{tp} {layout} ({attn.path.value}) {scenario}: {tokens} tokens, {ms:.3f} ms/step, "
                  f"prepare {prep_ms:.3f} ms (RequestBatch {prep_batch_ms:.3f}), layer {layer_ms:.3f} ms{g}, workspace "
                  f"{attn.workspace_bytes / 2**20:.1f} MiB", flush=True)
            del s, attn, out
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    return rows


COLUMNS = ["preset", "tp", "heads", "layout", "path", "scenario", "requests", "tokens", "step_ms", "prepare_ms",
           "prepare_batch_ms", "layer_ms", "tokens_per_s", "workspace_MiB"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dsattn bench serve", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="results folder (default bench/results)")
    ap.add_argument("--name", default="serve")
    ap.add_argument("--quick", action="store_true", help="the mixed step only")
    ap.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS),
                    help=f"comma list of {', '.join(scenarios(False))} (default {','.join(DEFAULT_SCENARIOS)})")
    ap.add_argument("--tiny", action="store_true", help="scaled-down shapes (CPU functional check)")
    ap.add_argument("--configs", nargs="+", default=None, metavar="PRESET:TP:LAYOUT",
                    help="e.g. glm-5:8:fp8_ds_mla (default: the six of CONFIGS)")
    ap.add_argument("--calibration", default=None, help="head-dispatch table (dsattn calibrate)")
    ap.add_argument("--spare-blocks", type=int, default=3,
                    help="cache blocks beyond the step's requests' (their blocks are spread over all of them at "
                         "random, as in an engine's cache; default 3)")
    ap.add_argument("--rep-ms", type=float, default=200.0)
    ap.add_argument("--graph", action="store_true", help="also the layer as CUDA-graph replays (a process of its own)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    args.scenarios = ["mixed"] if args.quick else [x for x in args.scenarios.split(",") if x]
    unknown = [x for x in args.scenarios if x not in scenarios(False)]
    if unknown or not args.scenarios:
        ap.error(f"--scenarios: unknown {unknown}; choose from {', '.join(scenarios(False))}")
    args.configs = CONFIGS if args.configs is None else [
        (c.split(":")[0], int(c.split(":")[1]), c.split(":")[2]) for c in args.configs]
    default_table = os.path.join("bench", "results", "calibration_h200.json")
    if args.calibration is None and os.path.exists(default_table) and not args.tiny:
        args.calibration = default_table
    if args.graph and torch.device(args.device).type != "cuda":
        print("dsattn bench serve: --graph needs a CUDA GPU")
        return 2
    if torch.device(args.device).type != "cuda" and not args.tiny:
        print("dsattn bench serve: needs a CUDA GPU (or --tiny for a CPU functional run)")
        return 2
    print(f"dsattn bench serve: device {args.device}, head dispatch: {args.calibration or 'SPEC 7 fallback'}")
    rows = run(args)
    path = write_results(args.name, rows, out_dir=args.out, meta={
        "calibration": args.calibration, "tiny": args.tiny, "rep_ms": args.rep_ms, "graph": args.graph,
        "spare_blocks": args.spare_blocks,
        "step": "prepare + one full layer's forward (cache writes, indexer, top-k, slots, sparse MLA)",
        "scenarios": {k: v if args.tiny else f"{len(v)} requests" for k, v in scenarios(args.tiny).items()
                      if k in args.scenarios}})
    print(format_table(rows, COLUMNS + (["graph_ms", "graph_max_diff"] if args.graph else [])))
    print(f"results -> {path}")
    return 0
