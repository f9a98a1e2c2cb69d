"""Compile the sparse MLA kernels for sm_90a on a machine without a GPU, and report what ptxas says.

    PYTHONPATH=src python bench/mla_compile_check.py [--configs 64/4/3,32/8/2] [--cases decode-fp8-8,...]

Catches compile errors before device time is spent, and prints registers, spill bytes and shared memory
per (case, config): a config that spills or exceeds 227 KB of shared memory need not be timed.
The launch goes through launch.run_attention with CPU tensors; the kernel launch is intercepted and
compiled for the target instead (Triton's own binder computes the same specialization as on the GPU).
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402

from dsattn.formats import KVLayout, pack_latent_rows  # noqa: E402
from dsattn.ops.sparse_mla import launch  # noqa: E402
from dsattn.ops.sparse_mla.launch import TileConfig  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sm90 import Intercept, ptxas_report  # noqa: E402


def _intercept(fn, sink):
    return Intercept(fn, lambda f, compiled, options: sink.append((f.__name__, compiled)))


def _case(name: str):
    kind, layout, heads = name.split("-")
    heads = int(heads)
    layout = {"fp8": "fp8_ds_mla", "nope": "fp8_ds_mla_nope", "bf16": "bf16"}[layout]
    layout = KVLayout(layout)
    d = 512 if layout is KVLayout.FP8_DS_MLA_NOPE else 576
    n = 4096
    lat = torch.randn(n, d)
    rows = pack_latent_rows(lat, layout) if layout.is_fp8 else lat.bfloat16()
    q = torch.randn(4, heads, d).bfloat16()
    idx = torch.randint(0, n, (4, 2048), dtype=torch.int32)
    return kind, layout, q, rows, idx


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cases", default="decode-fp8-8,decode-fp8-32,decode-fp8-64,decode-nope-8,prefill-bf16-8,"
                                      "prefill-bf16-32,prefill-bf16-64")
    p.add_argument("--configs", default="32/8/2",
                   help="block_n/warps/stages[/flags: p prefetch, k keys on M, h heads on M], comma separated")
    p.add_argument("--variant", default="native")
    p.add_argument("--dump", default=None, help="folder for the TTGIR and PTX of each compile")
    args = p.parse_args()
    for name in args.cases.split(","):
        kind, layout, q, rows, idx = _case(name)
        for c in args.configs.split(","):
            parts = c.split("/")
            flags = parts[3] if len(parts) > 3 else ""
            cfg = TileConfig(int(parts[0]), int(parts[1]), int(parts[2]), "p" in flags,
                             True if "k" in flags else (False if "h" in flags else None))
            sink = []
            saved = launch.sparse_mla_kernel
            launch.sparse_mla_kernel = _intercept(saved, sink)
            try:
                out = torch.empty(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16)
                lse = torch.empty(q.shape[0], q.shape[1])
                launch.run_attention(q, rows, layout, idx, 0.1, None, out, lse, args.variant, config=cfg)
                for kname, ck in sink:
                    ttgir = ck.asm["ttgir"]
                    print(f"{name:16s} {c:12s} {kname:28s} smem={ck.metadata.shared:6d} "
                          f"{ptxas_report(ck.asm['ptx'])} async_copies={ttgir.count('async_copy_global_to_local')} "
                          f"wgmma={ttgir.count('warp_group_dot ')} mma={ttgir.count('tt.dot ')}", flush=True)
                    if args.dump:
                        open(os.path.join(args.dump, f"{name}_{c.replace('/', '_')}.ttgir"), "w").write(ttgir)
                        open(os.path.join(args.dump, f"{name}_{c.replace('/', '_')}.ptx"), "w").write(ck.asm["ptx"])
            except Exception as e:  # noqa: BLE001
                print(f"{name:16s} {c:12s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
            finally:
                launch.sparse_mla_kernel = saved


if __name__ == "__main__":
    sys.exit(main())
