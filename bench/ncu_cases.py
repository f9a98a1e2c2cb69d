"""One warm-up and one more launch of a benchmark case through the public functions, for Nsight Compute
(`ncu -k regex:<kernel> -s 1 -c 1 ... python bench/ncu_cases.py --case NAME`): decode fp8_ds_mla / nope, 8 heads,
512 tokens (gluon_rx's ping-pong kernel) or prefill bf16 64 / 16 heads s_q 1024 (gluon_prefill, G 1 / G 4; the
16-head case also launches the union-list kernels first), the kernel table's inputs (dsattn.bench.kernels_mla)."""
from __future__ import annotations

import argparse
import sys

import torch

from dsattn.bench.kernels_mla import decode_case, ours, prefill_case


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--case", choices=("decode-fp8-8", "decode-nope-8", "prefill-64", "prefill-16"), required=True)
    args = p.parse_args()
    dev = torch.device("cuda")
    if args.case.startswith("prefill-"):
        case = prefill_case(1024, int(args.case.split("-")[1]), dev)
    else:
        case = decode_case(512, 8, "fp8_ds_mla" if args.case == "decode-fp8-8" else "fp8_ds_mla_nope", dev)
    fn, _, _ = ours(case)
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
