"""Two calls of the default top-k (k 2048) on random rows, for Nsight Compute (`ncu -k regex:_v4_select -s 1 -c 1 ...
python bench/topk_ncu_case.py --rows R --width W`, as bench/gpu_s41.sh runs it): the first call is the warm-up, the
named kernel of the second is profiled. Rows are full (lengths = W); the call launches one kernel (the select) or three
(threshold, filter, select), by select.select_capacity. --stop / --gluon-warps / --gluon-bits (session 48): the call
through launch_topk_v4 with those knobs (the Gluon select's timing cuts and configurations on rows that fit)."""
from __future__ import annotations

import argparse

import torch

from dsattn.ops.topk import topk


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--width", type=int, default=4160)
    p.add_argument("--k", type=int, default=2048)
    p.add_argument("--stop", type=int, default=0)
    p.add_argument("--gluon-warps", type=int, default=None)
    p.add_argument("--gluon-bits", type=int, default=None)
    args = p.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(args.rows, args.width, device="cuda", generator=gen)
    lengths = torch.full((args.rows,), args.width, dtype=torch.int32, device="cuda")
    knobs = dict(stop=args.stop, gluon_warps=args.gluon_warps, gluon_bits=args.gluon_bits)
    for _ in range(2):
        if any(knobs.values()):
            from dsattn.ops.topk import topk_scratch_spec
            from dsattn.ops.topk.select import launch_topk_v4
            (shape, dtype), = topk_scratch_spec(args.rows, args.width, args.k)
            out = torch.empty(args.rows, args.k, dtype=torch.int32, device="cuda")
            launch_topk_v4(x, lengths, args.k, out, torch.empty(shape, dtype=dtype, device="cuda"), **knobs)
        else:
            topk(x, lengths, args.k)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
