"""Time the register-operand Gluon kernel (gluon_rx.py) beside gluon_ws on the benchmark's decode cases (H200 target,
issue 3): fp8_ds_mla 512 tokens at 8 / 16 / 32 heads (and nope 8), topk 2048, uniform slots (dsattn.bench.kernels_mla
decode_case). Each config of gluon_rx is checked against gluon_ws's outputs on the same inputs (max abs out
difference, largest relative lse difference; NaN shows as nan), then timed (median, L2 flushed: bench.common.time_ms).

    PYTHONPATH=src python bench/mla_rx_bench.py --out DIR [--rep-ms 40] [--heads 8,16,32]
        [--configs c2,c2+hp8,c1,'stages=3;consumers=2;pingpong=1']

Writes DIR/sparse_mla_rx_bench.json. FlashMLA's time on these cases (bench/results, session 10): 0.444 ms at 8 / 16
heads (padded to 64); targets 0.222 ms (8 / 16 heads) and 0.317 ms (32).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import torch

from dsattn.bench.common import time_ms
from dsattn.bench.kernels_mla import decode_case
from dsattn.ops.sparse_mla import gluon_rx, gluon_ws

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mla_gluon_sweep import _checked_time, write_json  # noqa: E402 (poison / compare / time; the JSON record)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    p.add_argument("--rep-ms", type=float, default=40)
    p.add_argument("--heads", default="8,16,32")
    p.add_argument("--layouts", default="fp8_ds_mla")
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--configs", default="default",
                   help="RxConfig fields by name, ';' between them (e.g. 'stages=3;consumers=2;pingpong=1'; gluon_rx."
                        "parse_rx_config), 'default' (rx_config's choice) or c1 / c2 (rx_config's choice at one / two "
                        "consumer warpgroups); a +hp8 suffix sets hp8 1, +pp pingpong 1 with 56 producer registers "
                        "(combinable); comma separated")
    args = p.parse_args()
    dev = torch.device("cuda")
    rows = []
    for layout in args.layouts.split(","):
        for heads in [int(h) for h in args.heads.split(",")]:
            case = decode_case(args.tokens, heads, layout, dev)
            flat = case.kv.flatten(0, 1)
            t, h = case.tokens, case.heads
            out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=dev)
            lse = torch.empty((t, h), dtype=torch.float32, device=dev)
            ws = lambda: gluon_ws.run_attention_ws(case.q, flat, case.layout, case.indices, case.sm_scale, None, out,
                                                   lse)
            ws()
            ref_o, ref_l = out.clone(), lse.clone()
            ms = time_ms(ws, rep_ms=args.rep_ms)
            rows.append({"layout": layout, "tokens": t, "heads": h, "kernel": "gluon_ws", "config": None, "ms": ms})
            print(f"decode {layout:16s} t={t} h={h:3d} gluon_ws (default)   {ms:.4f} ms", flush=True)
            for spec in args.configs.split(","):
                # suffixes: +hp8 (8-head programs), +pp (ping-pong consumers, 56-register producer); a config of
                # named fields separates them by ';' here (',' separates configs): gluon_rx.parse_rx_config
                # (the alu / pipe suffixes went with those options in session 28)
                spec, *flags = spec.split("+")
                extra = {}
                for f in flags:
                    extra.update({"hp8": {"hp8": 1}, "pp": {"pingpong": 1, "producer_regs": 56}}[f])
                if spec in ("c1", "c2"):
                    os.environ["DSATTN_RX_CONSUMERS"] = spec[1]
                    cfg = gluon_rx.rx_config(case.layout, h, case.q.shape[-1])
                    del os.environ["DSATTN_RX_CONSUMERS"]
                elif spec in ("", "default"):
                    cfg = gluon_rx.rx_config(case.layout, h, case.q.shape[-1])
                else:
                    cfg = gluon_rx.parse_rx_config(spec.replace(";", ","))
                cfg = gluon_rx.rx_fit(dataclasses.replace(cfg, **extra), case.layout, h, case.q.shape[-1])
                label = gluon_rx.rx_config_spec(cfg)
                fn = lambda: gluon_rx.run_attention_rx(case.q, flat, case.layout, case.indices, case.sm_scale, None,
                                                       out, lse, config=cfg)
                try:
                    ms, diff, ldiff = _checked_time(fn, out, lse, ref_o, ref_l, args.rep_ms)
                except Exception as e:  # noqa: BLE001
                    print(f"  rx {label} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
                    continue
                rows.append({"layout": layout, "tokens": t, "heads": h, "kernel": "gluon_rx", "config": label,
                             "ms": ms, "max_abs_vs_ws": diff, "lse_rel_vs_ws": ldiff})
                print(f"decode {layout:16s} t={t} h={h:3d} gluon_rx {label:12s} {ms:.4f} ms  max_abs_vs_ws={diff:.3g} "
                      f"lse_rel={ldiff:.3g}", flush=True)
    write_json(args.out, "sparse_mla_rx_bench", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
