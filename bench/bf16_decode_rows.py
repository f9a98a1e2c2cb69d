"""A bf16 cache's decode rows: the prefill kernel's pad64 (what the backend runs them through since session 45) against
the decode kernels over the paged bf16 cache, at the sizes of a serving step's decode rows.

SPEC 7's bf16 path runs every token through sparse_mla_prefill over the cache's flat view; its decode rows (one
request each: they share no keys) take policy.bf16_decode_variant, 'pad64' at <= 32 heads (one token a program, 64-row
programs). 128 glm-5 TP8 decodes took 97.9 us of sparse MLA there against 55.0 for the fp8 decode kernel over
fp8_ds_mla (session 45, notes/backend.md "Left"). sparse_mla_decode takes a paged bf16 cache too ('native': Triton at
<= 16 heads a program, gluon_small at 17-32; DSATTN_SPARSE_MLA_IMPL forces one), and was never timed against pad64 on
these rows. This script times, for each (tokens, heads):

    prefill_pad64     sparse_mla_prefill(variant='pad64') over the flat view (the backend's call today)
    decode_<variant>_<impl>   sparse_mla_decode over the paged cache, each variant the policy offers and each impl
                      of --impls (auto, triton, gluon), the same q, cache and indices

Each request owns --context slots of one bf16 cache (block 64) and takes a top-2048 of them in ascending order (as
dsattn's top-k emits positions): no row is read twice in a call, as in serving. Times are the call's span on the GPU
in CUDA-graph replays (torch.profiler kernel events: first kernel's start to last kernel's end, mean over --calls),
split-K scratch made once beside the call. Every arm's out is compared with the first arm's (max abs difference) and,
for the first tokens, with the fp32 reference (sparse_mla_paged_reference). Writes <--out>/<--name>.json.

    PYTHONPATH=src python bench/bf16_decode_rows.py [--heads 8,16,32] [--tokens 1,8,32,128,256] [--context 8192]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

from dsattn.backend import policy
from dsattn.bench.common import call_spans, graph_replay, kernel_events, warm_up_gpu, write_results
from dsattn.bench.kernels_mla import decode_case
from dsattn.ops._triton import sm_count
from dsattn.ops.sparse_mla import (decode_scratch_spec, prefill_split_spec, sparse_mla_decode, sparse_mla_prefill)
from dsattn.ops.sparse_mla.dispatch import DEFAULT_SM_COUNT
from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference


def _empty(specs, device):
    return [torch.empty(s, dtype=dt, device=device) for s, dt in specs] or None


def arms(case, sm: int, impls: list[str]) -> dict:
    """name -> (env impl or None, a callable writing its own out / lse, out)."""
    t, h, k = case.tokens, case.heads, case.indices.shape[1]
    dev = case.q.device
    flat = case.kv.flatten(0, 1)
    made = {}

    def outputs():
        return (torch.empty((t, h, 512), dtype=torch.bfloat16, device=dev),
                torch.empty((t, h), dtype=torch.float32, device=dev))

    out, lse = outputs()
    split = _empty(prefill_split_spec(t, h, k, "pad64", sm), dev)
    made["prefill_pad64"] = (None, lambda o=out, s=lse, sp=split: sparse_mla_prefill(
        case.q, flat, case.indices, case.sm_scale, out=o, lse=s, variant="pad64", split_scratch=sp), out)
    for variant in policy.variants("decode", h, "bf16"):
        for impl in impls:
            out, lse = outputs()
            scratch = _empty(decode_scratch_spec(t, h, k, variant, case.layout, sm), dev)
            made[f"decode_{variant}_{impl}"] = (impl, lambda o=out, s=lse, v=variant, sc=scratch: sparse_mla_decode(
                case.q, case.kv, case.indices, case.sm_scale, out=o, lse=s, variant=v, scratch=sc), out)
    return made


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", default="8,16,32")
    ap.add_argument("--tokens", default="1,8,32,128,256")
    ap.add_argument("--context", type=int, default=8192, help="slots each request owns (a multiple of 64, >= 2048)")
    ap.add_argument("--impls", default="auto,triton,gluon", help="DSATTN_SPARSE_MLA_IMPL values of the decode arms")
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--check-rows", type=int, default=4, help="tokens checked against the fp32 reference")
    ap.add_argument("--name", default="bf16_decode_rows")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bf16_decode_rows: needs a CUDA GPU")
        return 2
    dev = torch.device("cuda")
    sm = sm_count(dev, DEFAULT_SM_COUNT)
    impls = [x.strip() for x in args.impls.split(",") if x.strip()]
    warm_up_gpu()
    rows, path = [], None
    meta = {"sm_count": sm, "topk": 2048, "context": args.context, "layout": "bf16", "dist": "uniform, own context, "
            "ascending", "calls": args.calls, "how": "torch.profiler kernel events of CUDA-graph replays: a call's "
            "span, first kernel's start to last kernel's end, mean of --calls"}
    before = os.environ.get("DSATTN_SPARSE_MLA_IMPL")
    for tokens in (int(x) for x in args.tokens.split(",")):
        for heads in (int(x) for x in args.heads.split(",")):
            case = decode_case(tokens, heads, "bf16", dev, context=args.context, ascending=True)
            n = min(tokens, args.check_rows)
            ref_o, ref_s = sparse_mla_paged_reference(case.q[:n], case.kv.flatten(0, 1)[:, None], case.indices[:n],
                                                      case.sm_scale, "bf16", 512, None)
            row = {"tokens": tokens, "heads": heads, "arms": {}}
            first = None
            for name, (impl, fn, out) in arms(case, sm, impls).items():
                if impl is not None:
                    os.environ["DSATTN_SPARSE_MLA_IMPL"] = impl
                try:
                    replay = graph_replay(fn)  # the kernel is chosen at capture, under this arm's impl
                    span, k_us = call_spans(kernel_events(replay, args.calls), args.calls)
                except Exception as e:  # noqa: BLE001 - an arm that cannot run is reported, the others go on
                    row["arms"][name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
                    print(f"# tokens {tokens} heads {heads} {name}: {row['arms'][name]['error']}", flush=True)
                    continue
                finally:
                    if before is None:
                        os.environ.pop("DSATTN_SPARSE_MLA_IMPL", None)
                    else:
                        os.environ["DSATTN_SPARSE_MLA_IMPL"] = before
                torch.cuda.synchronize()
                rec = {"us": span, "kernels_us": k_us,
                       "max_abs_vs_reference": float((out[:n].float() - ref_o).abs().max())}
                if first is None:
                    first = out
                else:
                    rec["max_abs_vs_first"] = float((out.float() - first.float()).abs().max())
                row["arms"][name] = rec
            ok = {a: r["us"] for a, r in row["arms"].items() if "us" in r}
            if ok:
                row["best"] = min(ok, key=ok.get)
                row["speedup_best_vs_prefill_pad64"] = ok.get("prefill_pad64", float("nan")) / ok[row["best"]]
            rows.append(row)
            print(f"tokens {tokens:4d} heads {heads:3d}  " + "  ".join(f"{a} {u:7.2f}" for a, u in ok.items())
                  + f"  us; best {row.get('best')}", flush=True)
            path = write_results(args.name, rows, out_dir=args.out, meta=meta)
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
