"""Time gluon_prefill's launch schedules (DSATTN_PF_CONFIG) side by side in one process on the benchmark's prefill
cases (bench kernels' `overlap` indices over 16384 bf16 rows, topk 2048), and compare each schedule's output with the
first one's (max |out diff|, max lse diff: the schedules sum in different orders, so small differences are expected).

    PYTHONPATH=src python bench/pf_schedules.py --heads 8,64 --tokens 1024 \
        --specs 'vst=0,cvt_pipe=0,f16=0;cvt_pipe=0;producer_regs=56' [--profile 0,1,2] --out $OUT

(--specs: DSATTN_PF_CONFIG texts separated by commas, ';' between a text's fields: gluon_prefill.parse_prefill_config
with ';' for ','. Before session 30 they were positional, e.g. 32/4/4/56/0/0/1; the results of those sessions keep
their texts.)

--profile adds timing builds (DSATTN_PF_PROFILE: 1 no gathers, 2 no products; wrong outputs, not compared) of the
FIRST spec. Per-block time: ms x 132 SMs / (programs x blocks a program) is printed as us_per_64 (64-entry blocks, the
union lists' mean length for grouped programs).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--heads", default="8,64")
    p.add_argument("--tokens", default="1024")
    p.add_argument("--specs", default="vst=0")
    p.add_argument("--profile", default="0")
    p.add_argument("--rep-ms", type=float, default=10)
    p.add_argument("--out", default=None)
    p.add_argument("--name", default="pf_schedules")
    args = p.parse_args(argv)
    from dsattn.bench.common import time_ms
    from dsattn.bench.kernels_mla import ours, prefill_case
    from dsattn.ops.sparse_mla import grouping
    os.environ["DSATTN_SPARSE_MLA_IMPL"] = "gluon_prefill"
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    rows = []
    specs = [s for s in args.specs.split(",") if s]
    profiles = [int(x) for x in args.profile.split(",") if x]
    for s_q in (int(t) for t in args.tokens.split(",")):
        for h in (int(x) for x in args.heads.split(",")):
            case = prefill_case(s_q, h, dev)
            hpt, g = grouping.group_shape(h)
            if g > 1:
                c = -(-s_q // g)
                ent = torch.empty((c, g * 2048), dtype=torch.int32, device=dev)
                msk, cnt = torch.empty_like(ent), torch.empty(c, dtype=torch.int32, device=dev)
                grouping.build_groups(case.indices, None, case.kv.shape[0], g, 0, s_q, ent, msk, cnt)
                entries = float(cnt.double().mean())
                programs = c
            else:
                entries = float((case.indices >= 0).sum(1).double().mean())
                programs = s_q * -(-h // 64)
            ref = None
            runs = [(spec, 0) for spec in specs] + [(specs[0], pr) for pr in profiles if pr]
            for spec, pr in runs:
                os.environ["DSATTN_PF_CONFIG"] = spec.replace(";", ",")
                os.environ["DSATTN_PF_PROFILE"] = str(pr)
                try:
                    fn, out, lse = ours(case, "native")
                    fn()
                    torch.cuda.synchronize()
                    ms = time_ms(fn, rep_ms=args.rep_ms)
                except Exception as e:  # noqa: BLE001 - one schedule failing is reported, not fatal
                    print(f"# s_q {s_q} h {h} {spec} profile {pr}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                    continue
                row = {"tokens": s_q, "heads": h, "spec": spec, "profile": pr, "ms": ms,
                       "entries_per_program": entries, "programs": programs,
                       "us_per_64": ms * 1e3 * sms / (programs * entries / 64)}
                if pr == 0:
                    if ref is None:
                        ref = (out.float().clone(), lse.clone())
                    else:
                        row["max_out_diff"] = float((out.float() - ref[0]).abs().max())
                        fin = torch.isfinite(ref[1])
                        row["max_lse_diff"] = float((lse[fin] - ref[1][fin]).abs().max()) if fin.any() else 0.0
                        row["nan"] = bool(torch.isnan(out).any())
                rows.append(row)
                print(json.dumps(row), flush=True)
    os.environ.pop("DSATTN_PF_PROFILE", None)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, args.name + ".json"), "w") as f:
            json.dump({"rows": rows, "device": torch.cuda.get_device_name(dev)}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
