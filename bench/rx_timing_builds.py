"""What each side of gluon_rx's ping-pong 8-head decode program costs alone (session 25): the default kernel, and its
timing builds (run_attention_rx's profile argument, WRONG outputs): the producer alone (the consumers free each stage
as soon as it is full), the consumers alone (no gathers) and (session 60) the full kernel whose V operand skips its
fp16 multiplies by the group scales. Issue 3's decode case (uniform indices, topk 2048, 131072 slots), both fp8
layouts, triton's do_bench with the L2 flushed before each call (as the kernel table).

--prefill-case (session 61, not yet run): the same builds over issue 3's PREFILL workload instead: s_q tokens (--tokens
1024) with the prefill row's `overlap` top-k over its 16384 latents (kernels_mla.prefill_case), packed as fp8 rows (one
16384-slot pool, L2-resident), each token's own list (no union), and beside them the default bf16 prefill of the same
case (the grouped gluon_prefill, the row's kernel). The question: how close does the ping-pong keys-on-M program come
to the row's target (1.3x FlashMLA's best: <= 0.39 ms at s_q 1024 on the H200, 0.508 / 1.3) when its gathers hit L2,
as a bound on what a bf16-row version of it (no K conversion; V converted once) could do (notes/sparse_mla.md,
session 61); and at 17..32 heads that bf16-row version itself (gluon_rxb) with its timing builds (run_attention_rxb's
profile: the producer alone, the consumers alone, V^T unconverted; wrong outputs by design).

    PYTHONPATH=src python bench/rx_timing_builds.py [--tokens 512,2048] [--heads 8] [--prefill-case] [--out DIR]
        [--name NAME]
"""
import argparse

import torch

from dsattn.bench.common import time_ms, write_results
from dsattn.bench.kernels_mla import Case, decode_case, ours, prefill_case
from dsattn.formats import KVLayout, pack_latent_rows
from dsattn.ops.sparse_mla import gluon_rx, gluon_rxb

BUILDS = ((0, "full"), (1, "producer alone"), (2, "consumers alone"), (3, "V without scale"))
RXB_BUILDS = ((0, "full"), (1, "producer alone"), (2, "consumers alone"), (3, "V unconverted"))


def _time_builds(fns, builds, args):
    """Each build run once (compiles), then args.rounds rounds timing each in turn: (profile, build, median ms, the
    rounds' ms) per build."""
    for prof, _ in builds:
        fns[prof]()
    torch.cuda.synchronize()
    times = {prof: [] for prof, _ in builds}
    for _ in range(args.rounds):
        for prof, _ in builds:
            times[prof].append(time_ms(fns[prof], rep_ms=args.rep_ms))
    return [(prof, build, sorted(times[prof])[len(times[prof]) // 2], times[prof]) for prof, build in builds]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", default="512,2048")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--rep-ms", type=float, default=40)
    p.add_argument("--rounds", type=int, default=3, help="builds timed in turn, this many times; the median is kept")
    p.add_argument("--out", default=None)
    p.add_argument("--name", default="rx_timing_builds")
    p.add_argument("--prefill-case", action="store_true", help="issue 3's prefill workload (module docstring)")
    args = p.parse_args()
    dev = torch.device("cuda")
    rows = []
    for tokens in (int(x) for x in args.tokens.split(",")):
        if args.prefill_case:
            pc = prefill_case(tokens, args.heads, dev)
            fn, _, _ = ours(pc)
            fn()
            torch.cuda.synchronize()
            ms = sorted(time_ms(fn, rep_ms=args.rep_ms) for _ in range(args.rounds))[args.rounds // 2]
            rows.append({"tokens": tokens, "heads": args.heads, "layout": "bf16", "build": "grouped bf16 prefill",
                         "ms": ms, "case": "prefill"})
            print(f"{'bf16':16s} t={tokens:5d} h={args.heads} {'grouped prefill':16s} {ms:.4f} ms", flush=True)
            if 16 < args.heads <= 32:  # gluon_rxb (session 61) on the same bf16 case, and its timing builds
                out = torch.empty((tokens, args.heads, 512), dtype=torch.bfloat16, device=dev)
                lse = torch.empty((tokens, args.heads), dtype=torch.float32, device=dev)
                fns = {prof: (lambda pr=prof: gluon_rxb.run_attention_rxb(pc.q, pc.kv, pc.indices, pc.sm_scale, None,
                                                                           out, lse, profile=pr))
                       for prof, _ in RXB_BUILDS}
                for prof, build, ms, times in _time_builds(fns, RXB_BUILDS, args):
                    rows.append({"tokens": tokens, "heads": args.heads, "layout": "bf16", "build": "gluon_rxb " + build,
                                 "ms": ms, "rounds_ms": times, "case": "prefill"})
                    print(f"{'bf16':16s} t={tokens:5d} h={args.heads} rxb {build:16s} {ms:.4f} ms", flush=True)
        for layout in ("fp8_ds_mla", "fp8_ds_mla_nope"):
            if args.prefill_case:
                lay = KVLayout(layout)
                d_qk = 512 if lay is KVLayout.FP8_DS_MLA_NOPE else 576
                rows8 = pack_latent_rows(pc.kv.float()[:, :d_qk], lay)
                case = Case("decode", lay, tokens, args.heads, d_qk, pc.q[..., :d_qk].contiguous(),
                            rows8.view(rows8.shape[0], 1, rows8.shape[1]), pc.indices, d_qk ** -0.5, "overlap")
            else:
                case = decode_case(tokens, args.heads, layout, dev)
            flat = case.kv.flatten(0, 1)
            out = torch.empty((tokens, args.heads, 512), dtype=torch.bfloat16, device=dev)
            lse = torch.empty((tokens, args.heads), dtype=torch.float32, device=dev)
            cfg = gluon_rx.rx_config(case.layout, args.heads, case.q.shape[-1])
            fns = {prof: (lambda pr=prof: gluon_rx.run_attention_rx(case.q, flat, case.layout, case.indices,
                                                                     case.sm_scale, None, out, lse, config=cfg,
                                                                     profile=pr))
                   for prof, _ in BUILDS}
            for prof, build, ms, times in _time_builds(fns, BUILDS, args):
                rows.append({"tokens": tokens, "heads": args.heads, "layout": layout, "build": build, "ms": ms,
                             "rounds_ms": times, "config": gluon_rx.rx_config_spec(cfg),
                             "case": "prefill" if args.prefill_case else "decode"})
                print(f"{layout:16s} t={tokens:5d} h={args.heads} {build:16s} {ms:.4f} ms", flush=True)
    write_results(args.name, rows, meta={"what": __doc__.split("\n\n")[0]}, out_dir=args.out)


if __name__ == "__main__":
    main()
