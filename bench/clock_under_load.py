"""SM clock and power while one kernel runs back to back (session 58): does a kernel hold the GPU's clock, or does
it pull it down against the power limit? For the 64-head prefill, 10-12% slower on an H100 than on the H200 while
FlashMLA's is not, and as slow in its no-gather timing build (bench/logs/s58/).

Each arm (dsattn's prefill at --heads, FlashMLA's at max(64, heads)) runs back to back for --seconds, twice, the arms
alternating, while `nvidia-smi -lms 50` logs the SM clock and power; per window: calls a millisecond, and the median
clock / power of the samples inside it (the first 0.5 s left out: the clock and the power settle).

    PYTHONPATH=src:.peer python bench/clock_under_load.py --heads 64 --out $OUT/clock_under_load.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from dsattn.bench.common import provenance
from dsattn.bench.kernels_mla import _peers, flashmla, ours, prefill_case


def _samples(path: str) -> list[tuple[float, float, float]]:
    """(epoch seconds, SM MHz, W) from nvidia-smi's csv (timestamp, clocks.sm, power.draw), local time = UTC here."""
    import datetime
    rows = []
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[1].split()[0].isdigit():
            continue
        t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
        rows.append((t.timestamp(), float(parts[1].split()[0]), float(parts[2].split()[0])))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--heads", type=int, default=64)
    p.add_argument("--tokens", type=int, default=1024)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--out", default="clock_under_load.json")
    args = p.parse_args(argv)
    dev = torch.device("cuda")
    case = prefill_case(args.tokens, args.heads, dev)
    arms = {"dsattn": ours(case)[0]}
    peer = flashmla(case, _peers(), max(64, args.heads))
    if peer is not None:
        arms["flashmla"] = peer[0]
    for fn in arms.values():
        fn()
    torch.cuda.synchronize()
    log = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader",
                            "-lms", "50", "-f", log])
    time.sleep(1.0)
    windows = []
    for _ in range(2):
        for name, fn in arms.items():
            calls, t0 = 0, time.time()
            while time.time() - t0 < args.seconds:
                for _ in range(20):
                    fn()
                calls += 20
                torch.cuda.synchronize()
            windows.append((name, t0, time.time(), calls))
    time.sleep(0.3)
    smi.terminate()
    smi.wait()
    samples = _samples(log)
    os.unlink(log)
    rows = []
    for name, t0, t1, calls in windows:
        inside = [s for s in samples if t0 + 0.5 <= s[0] <= t1]
        rows.append(dict(arm=name, heads=args.heads, tokens=args.tokens, calls=calls,
                         ms_per_call=(t1 - t0) * 1e3 / calls, samples=len(inside),
                         sm_mhz_median=statistics.median(s[1] for s in inside) if inside else None,
                         sm_mhz_min=min(s[1] for s in inside) if inside else None,
                         watts_median=statistics.median(s[2] for s in inside) if inside else None))
        r = rows[-1]
        print(f"{name:9s} {args.heads:4d} heads  {r['ms_per_call']:.3f} ms a call  clock median {r['sm_mhz_median']} "
              f"min {r['sm_mhz_min']} MHz  power median {r['watts_median']} W  ({r['samples']} samples)", flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(provenance=provenance(), meta=dict(seconds=args.seconds, note=__doc__.split("\n\n")[0]),
                       rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
