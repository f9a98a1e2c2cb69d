"""What each side of gluon_rx's ping-pong 8-head decode program costs alone (session 25): the default kernel, and its
timing builds (run_attention_rx's profile argument, WRONG outputs): the producer alone (the consumers free each stage
as soon as it is full), the consumers alone (no gathers) and (session 60) the full kernel whose V operand skips its
fp16 multiplies by the group scales. Issue 3's decode case (uniform indices, topk 2048, 131072 slots), both fp8
layouts, triton's do_bench with the L2 flushed before each call (as the kernel table).

    PYTHONPATH=src python bench/rx_timing_builds.py [--tokens 512,2048] [--out DIR] [--name NAME]
"""
import argparse

import torch

from dsattn.bench.common import time_ms, write_results
from dsattn.bench.kernels_mla import decode_case
from dsattn.ops.sparse_mla import gluon_rx

BUILDS = ((0, "full"), (1, "producer alone"), (2, "consumers alone"), (3, "V without scale"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", default="512,2048")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--rep-ms", type=float, default=40)
    p.add_argument("--rounds", type=int, default=3, help="builds timed in turn, this many times; the median is kept")
    p.add_argument("--out", default=None)
    p.add_argument("--name", default="rx_timing_builds")
    args = p.parse_args()
    dev = torch.device("cuda")
    rows = []
    for tokens in (int(x) for x in args.tokens.split(",")):
        for layout in ("fp8_ds_mla", "fp8_ds_mla_nope"):
            case = decode_case(tokens, args.heads, layout, dev)
            flat = case.kv.flatten(0, 1)
            out = torch.empty((tokens, args.heads, 512), dtype=torch.bfloat16, device=dev)
            lse = torch.empty((tokens, args.heads), dtype=torch.float32, device=dev)
            cfg = gluon_rx.rx_config(case.layout, args.heads, case.q.shape[-1])
            fns = {}
            for prof, _ in BUILDS:
                fns[prof] = (lambda pr=prof: gluon_rx.run_attention_rx(case.q, flat, case.layout, case.indices,
                                                                        case.sm_scale, None, out, lse, config=cfg,
                                                                        profile=pr))
                fns[prof]()
            torch.cuda.synchronize()
            times = {prof: [] for prof, _ in BUILDS}
            for _ in range(args.rounds):
                for prof, _ in BUILDS:
                    times[prof].append(time_ms(fns[prof], rep_ms=args.rep_ms))
            for prof, build in BUILDS:
                ms = sorted(times[prof])[len(times[prof]) // 2]
                rows.append({"tokens": tokens, "heads": args.heads, "layout": layout, "build": build, "ms": ms,
                             "rounds_ms": times[prof], "config": gluon_rx.rx_config_spec(cfg)})
                print(f"{layout:16s} t={tokens:5d} h={args.heads} {build:16s} {ms:.4f} ms", flush=True)
    write_results(args.name, rows, meta={"what": __doc__.split("\n\n")[0]}, out_dir=args.out)


if __name__ == "__main__":
    main()
