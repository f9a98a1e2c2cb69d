# Session 74: where a gluon_pair step waits. One sparse_mla_prefill call over converted rows at issue 3's case with
# DSATTN_PF_PROFILE=32 (each consumer warpgroup stamps %clock64 at a step's points: gluon_pair.stamp_buffer's
# docstring), then per warpgroup the mean cycles between consecutive points over the steady steps (each program's
# steps 1 .. n-2), and a few intervals across the two warpgroups (one SM's clock). Also the kernel's time with and
# without the stamps (bench.common.kernel_events, 20 calls each), so the stamps' own cost is on the same line.
#   PYTHONPATH=src python bench/s74/stamps.py [h:s_q,...] [config]     (config: DSATTN_PF_CONFIG's text, default
#   'pair=1,lazy=1', the default over converted rows at 1-32 heads)
import os
import sys

import torch

from dsattn.bench.common import call_spans, kernel_events
from dsattn.bench.kernels_mla import ours, prefill_case
from dsattn.ops.sparse_mla import gluon_pair

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
cfg = sys.argv[2] if len(sys.argv) > 2 else "pair=1,lazy=1"
os.environ["DSATTN_PF_CONFIG"] = cfg
# the points in a step's order (both warpgroups; stamp_buffer's docstring), and their names for each
ORDER = [0, 8, 9, 1, 2, 3, 4, 5, 6]
NAME = {0: {8: "L(0) landed", 9: "R(0) landed", 1: "S retired", 2: "mc read", 3: "P stored", 4: "own PV retired",
            5: "other PV issued", 6: "step end"},
        1: {8: "R(1) landed", 9: "L(1) landed", 1: "S retired", 2: "m0 read, mc sent", 3: "P stored",
            4: "other PV issued", 5: "R(0) released", 6: "step end"}}


def steady(st):
    """[P, 2, S, 10] -> boolean [P, 2, S]: steps stamped, not a program's first or last two."""
    ok = st[..., 0] != 0
    ok[:, :, -1] = False  # the program's slot (session 78: entry, q, stores), not a step
    n = ok.sum(2, keepdim=True)
    i = torch.arange(st.shape[2])[None, None, :]
    return ok & (i >= 1) & (i < n - 2)


def report(st):
    """Print the per-warpgroup and cross-warpgroup intervals of stamps st ([P, 2, S, 10], stamp_buffer)."""
    ok = steady(st)
    steps = st[..., 0]
    for wg in (0, 1):
        m = ok[:, wg]
        length = (steps[:, wg, 1:] - steps[:, wg, :-1])[m[:, :-1]].double()
        parts = []
        for a, b in zip(ORDER[:-1], ORDER[1:]):
            d = (st[:, wg, :, b] - st[:, wg, :, a])[m].double()
            parts.append(f"{NAME[wg][b]} +{d.mean():.0f}")
        print(f"  warpgroup {wg}: step {length.mean():.0f} cycles (median {length.median():.0f}, {m.sum()} steps): "
              + ", ".join(parts), flush=True)
    m = ok[:, 0] & ok[:, 1]

    def cross(a, ka, b, kb, what):
        d = (st[:, b, :, kb] - st[:, a, :, ka])[m].double()
        print(f"  {what}: {d.mean():.0f} cycles (median {d.median():.0f})", flush=True)
    cross(0, 1, 1, 2, "warpgroup 0's S retired -> warpgroup 1 read m0 and sent mc")
    cross(1, 2, 0, 2, "warpgroup 1 sent mc -> warpgroup 0 read it")
    cross(0, 3, 1, 4, "warpgroup 0's P stored -> warpgroup 1 issued the other P V")
    cross(1, 3, 0, 5, "warpgroup 1's P stored -> warpgroup 0 issued the other P V")
    cross(0, 0, 1, 0, "warpgroup 0's step start -> warpgroup 1's")
    run = st[:, 0, 0, 0] != 0
    span = (st[run][:, :, :, 6].amax((1, 2)) - st[run][:, 0, 0, 0]).double()
    print(f"  a program: {span.mean():.0f} cycles from warpgroup 0's first step to the last step's end", flush=True)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--fake":
    st = torch.zeros(4, 2, 48, 10, dtype=torch.int64)
    for i in range(20):
        for w in (0, 1):
            for j, k in enumerate(ORDER):
                st[:, w, i, k] = 1000 + 4000 * i + 400 * j + 100 * w
    st[:, :, 0, 7] = torch.arange(4)[:, None]
    report(st)
    sys.exit(0)

for c in (sys.argv[1] if len(sys.argv) > 1 else "32:1024").split(","):
    h, s_q = (int(v) for v in c.split(":"))
    case = prefill_case(s_q, h, dev)
    call = ours(case, "native", rows=True)[0]  # sparse_mla_prefill with its scratch and row_scratch, allocated once
    times = {}
    for prof in ("0", "32", "0", "32"):
        os.environ["DSATTN_PF_PROFILE"] = prof
        _, own = call_spans(kernel_events(call, 20), 20)
        times.setdefault(prof, []).append(own.get("pair_prefill_kernel", float("nan")))
    os.environ["DSATTN_PF_PROFILE"] = "32"
    gluon_pair.LAST_STAMPS = None  # (a case that runs no pair, e.g. 8 heads s_q 1024 converts no rows, stamps nothing)
    call()
    torch.cuda.synchronize()
    os.environ["DSATTN_PF_PROFILE"] = "0"
    if gluon_pair.LAST_STAMPS is None:
        print(f"{h} heads s_q {s_q} ({cfg}): no pair_prefill_kernel launch, nothing stamped", flush=True)
        continue
    st = gluon_pair.LAST_STAMPS.cpu()
    progs = int((st[:, 0, 0, 0] != 0).sum())
    print(f"{h} heads s_q {s_q} ({cfg}): pair_prefill_kernel plain {times['0']} us, stamped {times['32']} us; "
          f"{progs} programs stamped, {len(set(st[:, 0, 0, 7].tolist()))} SMs", flush=True)
    report(st)
