"""Recall of the fp8 indexer against the unquantized fp32 top-k, on the CPU (torch only, no kernels).

    PYTHONPATH=src python bench/indexer_recall.py [--rows 64] [--ctx 32768] [--seed 0] [--weights positive] [--rotate]

Logits as the indexer computes them (sum over heads of w * relu(q . k)), top-2048 per row, for three key
distributions: iid N(0, 1) keys, heavy-tailed keys (norms log-normal, sigma 0.5, around a shared
direction; the generator of tests/gpu/test_indexer_gpu.py's recall test), and keys with outlier channels
(4 of the 128 channels 10x the others: a synthetic stand-in for channel outliers; not in the GPU test). Each column
quantizes a different operand: q and k to fp8 per 128 values (formats.quantize_fp8, power-of-two scales: the
132-byte cache format), q to bf16, q exact, or k exact. Recall = |picked & exact top-k| / k.

`--weights positive` draws the head weights >= 0 (uniform, the recall test's draw until session 55); `signed` draws
them N(0, 1) as the model's weight projection gives them (the logits of the other indexer tests), where the
relu does not commute with the weighting and the row's logits spread around zero. For signed weights the script also
reports the k-th exact logit against the row's largest |logit| (the scale a near-tie bound can use where the k-th logit
itself sits near zero). For both it reports the k-th exact logit against the row's largest logit with |w| (min and
median over rows; the scale of tests/gpu/test_indexer_gpu.py's near-tie bound).

`--rotate` multiplies q and k by the orthonormal 128 x 128 Hadamard matrix before anything is quantized, as DeepSeek's
reference indexer does (`rotate_activation` before its fp8 quantization; transformers' DeepseekV32Indexer docstring
says so and skips both, the rotation preserving every dot product). dsattn quantizes the keys it is handed
(IndexerInputs.k), so that rotation is the caller's: the exact logits are the same, only the quantization error
changes. Writes bench/results/indexer_recall_cpu.json (`signed`: indexer_recall_signed_cpu.json;
`--rotate` adds `_rotated` to the name; or --out) with provenance.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from dsattn import formats
from dsattn.bench.common import provenance

HEADS, DIM, K = 32, 128, 2048


def _logits(q, w, k):  # q [r, h, d], w [r, h], k [n, d] -> [r, n]
    return (torch.einsum("rhd,nd->rhn", q, k).relu() * w[:, :, None]).sum(1)


def _fp8(x):
    v, s = formats.quantize_fp8(x)
    return formats.dequantize_fp8(v, s)


def hadamard(n: int = DIM) -> torch.Tensor:
    """The orthonormal n x n Hadamard matrix (Sylvester's construction, n a power of two)."""
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / n ** 0.5


def run(rows: int, ctx: int, seed: int, weights: str = "positive", rotate: bool = False) -> dict:
    torch.manual_seed(seed)
    table = {}
    for keys in ("iid", "heavy", "outlier"):
        qf = torch.randn(rows, HEADS, DIM)
        draw = torch.rand if weights == "positive" else torch.randn
        w = draw(rows, HEADS) * HEADS ** -0.5 * DIM ** -0.5
        kf = torch.randn(ctx, DIM)
        if keys == "heavy":
            kf = (kf + torch.randn(1, DIM)) * torch.exp(0.5 * torch.randn(ctx, 1))
        elif keys == "outlier":
            kf[:, torch.randperm(DIM)[:4]] *= 10.0
        exact = _logits(qf, w, kf)
        if rotate:  # the exact top-k stays the unrotated fp32 one; only the quantized operands are rotated
            h = hadamard()
            qf, kf = qf @ h, kf @ h
        top = exact.topk(K, dim=1)
        want = top.indices
        hit = torch.zeros(rows, ctx, dtype=torch.bool)
        hit.scatter_(1, want, True)

        def recall(q, k):
            got = _logits(q, w, k).topk(K, dim=1).indices
            return float(hit.gather(1, got).float().mean())

        k8 = _fp8(kf)
        table[keys] = {"fp8 q + fp8 k": recall(_fp8(qf), k8), "bf16 q + fp8 k": recall(qf.bfloat16().float(), k8),
                       "fp32 q + fp8 k": recall(qf, k8), "fp8 q + fp32 k": recall(_fp8(qf), kf)}
        # the k-th exact logit against the row's largest logit with |w| (the size of the summed terms: the scale the
        # GPU recall test measures near-ties by)
        kth_share = top.values[:, -1].abs() / _logits(qf, w.abs(), kf).amax(1)
        table[keys]["k-th / |w| scale, min"] = float(kth_share.min())
        table[keys]["k-th / |w| scale, median"] = float(kth_share.median())
        if weights == "signed":
            # the k-th exact logit as a share of the row's largest |logit|: how close to zero the cut sits
            share = top.values[:, -1].abs() / exact.abs().amax(1)
            table[keys]["min |k-th| / max |logit|"] = float(share.min())
            table[keys]["rows with k-th < 0"] = float((top.values[:, -1] < 0).float().mean())
    return table


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--ctx", type=int, default=32768)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weights", choices=("positive", "signed"), default="positive")
    p.add_argument("--rotate", action="store_true", help="Hadamard-rotate q and k before quantizing")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.out is None:
        name = "indexer_recall_cpu" if args.weights == "positive" else "indexer_recall_signed_cpu"
        name += "_rotated.json" if args.rotate else ".json"
        args.out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", name)
    t0 = time.perf_counter()
    table = run(args.rows, args.ctx, args.seed, args.weights, args.rotate)
    cols = list(next(iter(table.values())))
    print(f"{'keys':6s} " + " ".join(f"{c:>15s}" for c in cols))
    for keys, rec in table.items():
        print(f"{keys:6s} " + " ".join(f"{rec[c]:15.4f}" for c in cols))
    doc = dict(provenance=provenance(), meta=dict(rows=args.rows, ctx=args.ctx, heads=HEADS, k=K, seed=args.seed,
                                                  weights=args.weights, rotate=args.rotate,
                                                  device="cpu", seconds=round(time.perf_counter() - t0, 1),
                                                  command="python bench/indexer_recall.py " + " ".join(sys.argv[1:])),
               recall=table)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
