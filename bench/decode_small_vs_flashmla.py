"""Small-batch decode (1-64 tokens, below one wave of programs) beside FlashMLA: each side's GPU kernel time a call.

Session 39 swept our split-K plan at these sizes but never against FlashMLA, whose sparse fp8 decode fails on
CUDA-graph replay (notes/sparse_mla.md, session 12). Both sides are timed from torch.profiler's CUDA kernel events: a
call's span on the GPU, from its first kernel's start to its last kernel's end, mean over --calls calls (each kernel's
own duration is recorded too). FlashMLA's span comes from eager calls: it launches its split kernel and its combine
back to back. Ours comes from CUDA-graph replays of the call, as an engine replays a captured step: our eager calls
are host-bound at these sizes, the gap between our split kernel and our combine being the host's launch work (~45-55
us a call in this script's second run; their spans are recorded as eager_span_us). Summing kernel durations instead
would not give a call's time: FlashMLA's two kernels overlap by up to 4.6 us (its combine's own duration, 8.6-11.6 us at
1-4 tokens, includes part of its split kernel's time), and the sum leaves out the gap between our two (0-0.7 us in
graphs); this script's first run summed them. FlashMLA runs 64 or 128 heads: q is zero-padded to 64 below 64 heads, as
in issue 3's decode rows; ours runs each variant the policy offers (native, pad64), the speedup taken from the faster.
Cases: the calibration's fp8_ds_mla decode case (`uniform` indices over one 131072-slot paged cache, topk 2048).
Writes bench/results/<--name>.json.

    PYTHONPATH=src:.peer python bench/decode_small_vs_flashmla.py [--heads 8,16,32,64,128] [--tokens 1,4,16,64]
"""
from __future__ import annotations

import argparse
import sys
from types import SimpleNamespace

import torch

from dsattn.backend import calibrate, policy
from dsattn.bench.common import call_spans, graph_replay, kernel_events, time_ms, warm_up_gpu, write_results
from dsattn.bench.kernels_mla import _peers, flashmla, ours
from dsattn.ops._triton import sm_count
from dsattn.ops.sparse_mla.dispatch import DEFAULT_SM_COUNT, decode_splits


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", default="8,16,32,64,128")
    ap.add_argument("--tokens", default="1,4,16,64")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--name", default="decode_small_vs_flashmla")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("decode_small_vs_flashmla: needs a CUDA GPU")
        return 2
    peers = _peers()
    dev = torch.device("cuda")
    sm = sm_count(dev, DEFAULT_SM_COUNT)
    cargs = SimpleNamespace(device="cuda", topk=2048, slots=131072, block_size=64)
    warm_up_gpu()
    rows, cache = [], {}
    meta = {"sm_count": sm, "topk": 2048, "slots": 131072, "layout": "fp8_ds_mla", "dist": "uniform",
            "calls": args.calls,
            "how": "torch.profiler CUDA kernel events: a call's span from its first kernel's start to its last one's "
                   "end, mean of --calls calls; ours as CUDA-graph replays, FlashMLA eager (padded to 64 heads "
                   "below 64)"}
    path = None
    for tokens in (int(x) for x in args.tokens.split(",")):
        for heads in (int(x) for x in args.heads.split(",")):
            case = calibrate._case("decode/fp8_ds_mla", tokens, heads, cargs, cache)
            arms = {}
            for variant in policy.variants("decode", heads, "fp8_ds_mla"):
                fn, out, _ = ours(case, variant)
                eager_span, _ = call_spans(kernel_events(fn, args.calls), args.calls)
                replay = graph_replay(fn)
                bench_us = time_ms(replay, warmup_ms=5, rep_ms=20) * 1e3
                try:
                    span, k_us = call_spans(kernel_events(replay, args.calls), args.calls)
                    src = "profiled graph replays"
                except ValueError as e:  # the profiler did not see the graph's kernels one by one
                    print(f"# tokens {tokens} heads {heads} {variant}: {e}; do_bench replay time instead", flush=True)
                    span, k_us, src = bench_us, {}, "do_bench graph replays (cold L2, graph launch included)"
                arms[variant] = {"splits": decode_splits(tokens, heads, 2048, variant, sm), "kernels_us": k_us,
                                 "us": span, "us_from": src, "eager_span_us": eager_span,
                                 "do_bench_replay_us": bench_us, "out": out}
            best = min(arms, key=lambda v: arms[v]["us"])
            out = arms[best].pop("out")
            for a in arms.values():
                a.pop("out", None)
            row = {"tokens": tokens, "heads": heads, "ours": arms, "ours_best": best, "ours_us": arms[best]["us"]}
            try:
                built = flashmla(case, peers, 64 if heads <= 64 else 128)
                if built is not None:
                    ffn, get = built
                    fl_span, fl_k = call_spans(kernel_events(ffn, args.calls), args.calls)
                    torch.cuda.synchronize()
                    diff = float((get().float() - out.float()).abs().max())
                    row.update({"flashmla_heads": 64 if heads <= 64 else 128, "flashmla_kernels_us": fl_k,
                                "flashmla_us": fl_span, "speedup": fl_span / arms[best]["us"],
                                "max_abs_out_diff_vs_flashmla": diff})
            except Exception as e:  # noqa: BLE001 - a peer failure is reported, ours is kept
                print(f"# FlashMLA tokens {tokens} heads {heads}: {type(e).__name__}: {str(e)[:160]}", flush=True)
            rows.append(row)
            fl = f"flashmla {row['flashmla_us']:7.2f} us  {row['speedup']:5.2f}x" if "flashmla_us" in row else "no peer"
            line = "  ".join(f"{v} {a['us']:7.2f} us (split {a['splits']:2d}, eager {a['eager_span_us']:6.2f})"
                             for v, a in arms.items())
            print(f"tokens {tokens:3d} heads {heads:3d}  {line}  {fl}", flush=True)
            path = write_results(args.name, rows, out_dir=args.out, meta=meta)
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
