"""One warm-up and one more launch of a benchmark case through the public functions, for Nsight Compute
(`ncu -k regex:<kernel> -s 1 -c 1 ... python bench/ncu_cases.py --case NAME`): decode-fp8-H / decode-nope-H
(fp8_ds_mla / nope, H heads, 512 tokens: gluon_rx at <= 16 heads, gluon_ws at 32) or prefill-H (bf16, H heads,
s_q 1024: gluon_prefill, G 1 at 64 heads, G 4 at 16; grouped head counts also launch the union-list kernels first),
the kernel table's inputs (dsattn.bench.kernels_mla). --peer runs FlashMLA's sparse prefill on the prefill case instead
(q padded to 64 heads below 64; needs the packed peers on PYTHONPATH; its sm90 kernel is sparse_attn_fwd_kernel in
the packed build, ncu session 18)."""
from __future__ import annotations

import argparse
import re
import sys

import torch

from dsattn.bench.kernels_mla import _peers, decode_case, flashmla, ours, prefill_case


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--case", required=True, help="decode-fp8-H, decode-nope-H or prefill-H (H heads)")
    p.add_argument("--peer", action="store_true", help="FlashMLA instead of dsattn (prefill cases only)")
    args = p.parse_args()
    m = re.fullmatch(r"(decode-fp8|decode-nope|prefill)-(\d+)", args.case)
    if not m:
        p.error(f"--case must be decode-fp8-H, decode-nope-H or prefill-H, got {args.case!r}")
    heads = int(m.group(2))
    dev = torch.device("cuda")
    if args.case.startswith("prefill-"):
        case = prefill_case(1024, heads, dev)
    else:
        case = decode_case(512, heads, "fp8_ds_mla" if m.group(1) == "decode-fp8" else "fp8_ds_mla_nope", dev)
    if args.peer:
        if case.kind != "prefill":
            p.error("--peer runs prefill cases only")
        fn = flashmla(case, _peers(), max(64, heads))[0]
    else:
        fn, _, _ = ours(case)
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
