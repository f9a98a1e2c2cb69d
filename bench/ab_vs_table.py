"""Why `dsattn bench ab` and `dsattn bench kernels` read the same sparse MLA prefill case differently (session 30: the
32-head default at s_q 1024 read 0.629 ms in an A/B and 0.567 in issue 3's table). One process, the two cases (the
table's: kernels_mla.prefill_case, preallocated union-list scratch; the A/B's: bench ab's build_sparse_mla, scratch
allocated in each call) under the two timings (the table's: triton's do_bench, L2 flushed before each call, median;
the A/B's: groups of 5 back-to-back calls between CUDA events, median of the groups), alternating, 3 rounds.

    PYTHONPATH=src python bench/ab_vs_table.py [--heads 32,64] [--tokens 1024] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--heads", default="32,64")
    p.add_argument("--tokens", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    from dsattn.bench import ab
    from dsattn.bench.common import group_ms, time_ms, warm_up_gpu, write_results
    from dsattn.bench.kernels_mla import ours, prefill_case
    from dsattn.ops.sparse_mla import sparse_mla_prefill
    dev = torch.device("cuda")
    warm_up_gpu()
    rows = []
    for h in (int(x) for x in args.heads.split(",")):
        case = prefill_case(args.tokens, h, dev)
        table_fn, out, lse = ours(case, "native")
        # the table's case, scratch allocated in each call (as bench ab does)
        noscratch_fn = lambda c=case, o=out, l=lse: sparse_mla_prefill(c.q, c.kv, c.indices, c.sm_scale, out=o, lse=l,
                                                                      variant="native")
        ab_args = ab.parse_args(["--op", "sparse_mla_prefill", "--tokens", str(args.tokens), "--heads", str(h)])
        make, _ = ab.build_sparse_mla(ab_args, dev)
        ab_fn, _ = make({})
        fns = {"table_case": table_fn, "table_case_no_scratch": noscratch_fn, "ab_case": ab_fn}
        for fn in fns.values():
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        res = {f"{k}/{m}": [] for k in fns for m in ("do_bench", "groups_of_5")}
        for _ in range(args.rounds):
            for k, fn in fns.items():
                res[f"{k}/do_bench"].append(time_ms(fn, rep_ms=50))
                res[f"{k}/groups_of_5"].append(statistics.median(group_ms(fn, 5, True) for _ in range(30)))
        for key, v in res.items():
            row = {"tokens": args.tokens, "heads": h, "what": key, "ms": statistics.median(v), "ms_rounds": v}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:  # with the run's provenance (device, versions, commit), as every dsattn bench result
        write_results("ab_vs_table_s30", rows, meta={"heads": args.heads, "tokens": args.tokens, "rounds": args.rounds},
                      out_dir=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
