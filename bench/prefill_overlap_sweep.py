"""The grouped prefill against one token a program as neighbouring rows' top-k lists overlap less.

Issue 3's prefill rows use `overlap` indices (kernels_mla.overlap_indices: row t takes the top-k of shared[n] + noise
* z[t, n], noise 0.5), where the union of 8 neighbouring rows' lists is ~2.3 x topk. How much real models' neighbouring
rows share is not known here, so this sweeps the noise (0.5 .. 8: less and less shared) and, as the limit, lists
drawn at random from each row's causal range. Per case: the mean union size of G neighbouring rows (G of the grouped
kernel, CPU arithmetic on the same indices), and as CUDA-graph replays (bench.common.graph_ms) sparse_mla_prefill
with 'native' (grouped; the dense union lists, the flat source having s_kv slots), 'native' with the hash union path
(DSATTN_GROUPING_IMPL=hash, as over a serving cache) and 'pad64' (one row a program, no union lists). Every variant's
out is compared with pad64's. Writes bench/results/<--name>.json.

    PYTHONPATH=src python bench/prefill_overlap_sweep.py [--heads 8,16,32] [--sq 1024] [--noise 0.5,1,2,4,8,random]
"""
from __future__ import annotations

import argparse
import os

import torch

from dsattn.bench.common import graph_ms, warm_up_gpu, write_results
from dsattn.bench.kernels_mla import PREFILL_KV, TOPK, overlap_indices
from dsattn.ops.sparse_mla import prefill_scratch_spec, prefill_split_spec, sparse_mla_prefill
from dsattn.ops.sparse_mla.grouping import group_shape


def random_indices(s_q: int, s_kv: int, topk: int, device, seed: int = 0) -> torch.Tensor:
    """[s_q, topk] int32: row t (position s_kv - s_q + t) takes topk distinct positions <= its own at random."""
    g = torch.Generator(device=device).manual_seed(seed)
    pos = torch.arange(s_kv - s_q, s_kv, device=device)
    score = torch.rand((s_q, s_kv), generator=g, device=device)
    score = score.masked_fill(torch.arange(s_kv, device=device)[None] > pos[:, None], -1.0)
    val, idx = score.topk(topk, dim=1)
    return torch.where(val < 0, -1, idx).to(torch.int32)


def mean_union(indices: torch.Tensor, g: int) -> float:
    """Mean number of distinct valid entries over the lists of g consecutive rows, in units of topk."""
    rows, k = indices.shape
    sizes = []
    for r in range(0, rows - g + 1, g):
        v = indices[r:r + g].reshape(-1)
        sizes.append(int(v[v >= 0].unique().numel()))
    return sum(sizes) / len(sizes) / k


def run_case(q, kv, idx, scale, variant: str, grouping: str | None):
    t, h, _ = q.shape
    out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((t, h), dtype=torch.float32, device=q.device)
    scratch = [torch.empty(s, dtype=d, device=q.device) for s, d in prefill_scratch_spec(t, h, idx.shape[1])]
    split = [torch.empty(s, dtype=d, device=q.device) for s, d in prefill_split_spec(t, h, idx.shape[1], variant)]

    def fn():
        if grouping:
            os.environ["DSATTN_GROUPING_IMPL"] = grouping
        else:
            os.environ.pop("DSATTN_GROUPING_IMPL", None)
        sparse_mla_prefill(q, kv, idx, scale, out=out, lse=lse, variant=variant, scratch=scratch or None,
                           split_scratch=split or None)
    return fn, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", default="8,16,32")
    ap.add_argument("--sq", type=int, default=1024)
    ap.add_argument("--noise", default="0.5,1,2,4,8,random")
    ap.add_argument("--name", default="prefill_overlap_sweep")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("prefill_overlap_sweep: needs a CUDA GPU")
        return 2
    dev = torch.device("cuda")
    warm_up_gpu()
    torch.manual_seed(0)
    kv = (torch.randn(PREFILL_KV, 576, device=dev) * 0.5).bfloat16()
    rows = []
    for noise in args.noise.split(","):
        idx = (random_indices(args.sq, PREFILL_KV, TOPK, dev) if noise == "random"
               else overlap_indices(args.sq, PREFILL_KV, TOPK, dev, seed=args.sq, noise=float(noise)))
        for h in (int(x) for x in args.heads.split(",")):
            q = (torch.randn(args.sq, h, 576, device=dev) * 0.5).bfloat16()
            g = group_shape(h)[1]
            row = dict(noise=noise, heads=h, s_q=args.sq, G=g, union_over_topk=round(mean_union(idx.cpu(), g), 3))
            fns = {"native": run_case(q, kv, idx, 576 ** -0.5, "native", None),
                   "native_hash": run_case(q, kv, idx, 576 ** -0.5, "native", "hash"),
                   "pad64": run_case(q, kv, idx, 576 ** -0.5, "pad64", None)}
            for name, (fn, out) in fns.items():
                row[f"{name}_ms"] = graph_ms(fn, reps=5, replays=10)
            ref = fns["pad64"][1].float()
            row["max_abs_vs_pad64"] = max(float((o.float() - ref).abs().max()) for _, o in fns.values())
            os.environ.pop("DSATTN_GROUPING_IMPL", None)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
            rows.append(row)
    path = write_results(args.name, rows, meta={"s_kv": PREFILL_KV, "topk": TOPK, "how": "CUDA-graph replays, "
                         "bench.common.graph_ms(reps=5, replays=10); the env switch runs at capture, not in the graph"},
                         out_dir=args.out)
    print("->", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
