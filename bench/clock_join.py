"""Join a `dsattn bench kernels --op sparse_mla` result (each row's `round_windows`: wall-clock start / end of each
timing) with a clock log written beside it by

    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 20 > LOG

and print, per row and round, the timing and the mean SM clock / power / temperature inside its window. Run it on the
machine that wrote both (nvidia-smi's timestamps are local time there).

    python bench/clock_join.py RESULT.json LOG [--out JOINED.json]
"""
from __future__ import annotations

import argparse
import datetime
import json


def read_log(path):
    samples = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 4:
                continue
            try:
                t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                samples.append((t, float(parts[1]), float(parts[2]), float(parts[3])))
            except ValueError:
                continue
    return samples


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("result")
    p.add_argument("log")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    samples = read_log(args.log)
    doc = json.load(open(args.result))
    out = []
    for r in doc["rows"]:
        for i, (ms, (t0, t1)) in enumerate(zip(r["ms_rounds"], r.get("round_windows", []))):
            inside = [s for s in samples if t0 <= s[0] <= t1]
            mean = [sum(s[k] for s in inside) / len(inside) if inside else None for k in (1, 2, 3)]
            rec = dict(heads=r["heads"], tokens=r["tokens"], impl=r["impl"], round=i, ms=ms, samples=len(inside),
                       sm_mhz=mean[0], power_w=mean[1], temp_c=mean[2])
            out.append(rec)
            print(f"{r['kind']:8s} h={r['heads']:4d} {r['impl']:18s} round {i}: {ms:.4f} ms  "
                  f"{rec['sm_mhz'] or float('nan'):7.1f} MHz  {rec['power_w'] or float('nan'):6.1f} W  "
                  f"{rec['temp_c'] or float('nan'):5.1f} C  ({len(inside)} samples)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(result=args.result, samples=len(samples), rounds=out), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
