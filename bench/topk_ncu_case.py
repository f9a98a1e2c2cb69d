"""Two launches of the default top-k (k 2048) on random rows, for Nsight Compute (`ncu -k regex:_v4_ -s 3 -c 3 ...
python bench/topk_ncu_case.py --rows R --width W`): the first call's three kernels are the warm-up, the second's are
profiled. Rows are full (lengths = W)."""
from __future__ import annotations

import argparse

import torch

from dsattn.ops.topk import topk


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--width", type=int, default=4160)
    p.add_argument("--k", type=int, default=2048)
    args = p.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(args.rows, args.width, device="cuda", generator=gen)
    lengths = torch.full((args.rows,), args.width, dtype=torch.int32, device="cuda")
    for _ in range(2):
        topk(x, lengths, args.k)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
