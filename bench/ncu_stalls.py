"""Where the warps of one kernel wait, instruction by instruction, from Nsight Compute's source page: reads the CSV
of `ncu --import REP.ncu-rep --page source --csv --print-source sass` and prints the instructions with the most
warp-state samples, each with its address, the partition it belongs to (the stretch of SASS after the last
USETMAXREG marker above it, labelled by the register count set there: gluon's warp_specialize partitions), and its
samples' share; then the samples summed per partition and per opcode. The CSV's column names differ between ncu
versions, so they are matched loosely (an address / source / stall-sampling column); unknown formats print the header.

    python bench/ncu_stalls.py pf64_source.csv [--top 40] [--column excessive]

--column WORDS (session 21): instead of the samples, rank the instructions by the first column whose name holds all of
WORDS (e.g. "l2 theoretical sectors global excessive"), and print that column's total; with no such column it prints
the header.
"""
from __future__ import annotations

import argparse
import collections
import csv
import re
import sys


def _col(header, *words, avoid=()):
    for name in header:
        low = name.lower()
        if all(w in low for w in words) and not any(a in low for a in avoid):
            return name
    return None


def _num(x: str) -> float:
    try:
        return float(x.replace(",", "")) if x else 0.0
    except ValueError:
        return 0.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--column", default=None)
    args = p.parse_args(argv)
    lines = open(args.csv, newline="").read().splitlines()
    # ncu prints a few lines before the table; the table starts at the first line naming an address column
    start = next((i for i, line in enumerate(lines) if "Address" in line or "address" in line), None)
    if start is None:
        print("no address column; first lines:", *lines[:5], sep="\n")
        return 1
    rows = list(csv.DictReader(lines[start:]))
    header = list(rows[0].keys()) if rows else []
    addr = _col(header, "address")
    src = _col(header, "source") or _col(header, "sass")
    samp = (_col(header, "warp stall sampling", "all", avoid=("not",)) or _col(header, "warp stall sampling")
            or _col(header, "sampling"))
    if args.column:
        samp = _col(header, *args.column.lower().split())
        if samp is None:
            print(f"no column with {args.column!r}; header:", header, sep="\n")
            return 1
    if not (addr and src and samp):
        print("columns not found; header:", header, sep="\n")
        return 1
    part, parts = "before any setmaxnreg", []
    for r in rows:
        m = re.search(r"USETMAXREG\S*\s+(?:\S+,\s*)?(0x[0-9a-f]+)", r[src])
        if m:
            part = f"after setmaxnreg {int(m.group(1), 16)}"
        parts.append(part)
    total = sum(_num(r[samp]) for r in rows) or 1.0
    order = sorted(range(len(rows)), key=lambda i: -_num(rows[i][samp]))
    print(f"{len(rows)} instructions, {total:.0f} samples ({samp})")
    for i in order[: args.top]:
        r = rows[i]
        print(f"{100 * _num(r[samp]) / total:6.2f}%  {r[addr]:>8}  {parts[i]:<22}  {r[src].strip()[:90]}")
    def opcode(text: str) -> str:
        words = [w for w in text.split() if not w.startswith("@")]  # a predicate guard is not the opcode
        return words[0] if words else "?"

    for title, key in (("partition", lambda i: parts[i]), ("opcode", lambda i: opcode(rows[i][src]))):
        acc = collections.Counter()
        for i in range(len(rows)):
            acc[key(i)] += _num(rows[i][samp])
        print(f"-- by {title}")
        for k, v in acc.most_common(15):
            print(f"{100 * v / total:6.2f}%  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
