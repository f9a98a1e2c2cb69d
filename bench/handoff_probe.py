"""What one hand-off between two consumer warpgroups costs in a Gluon warp-specialized kernel, Hopper (sm_90).

Session 26's staggered pair schedule (FlashMLA's, in gluon_prefill) lost 0.63-0.75x, and its profile put 8-13% of the
samples in mbarrier try-wait loops; FlashMLA hands off with named barriers (bar.arrive / bar.sync over the 256
consumer threads), which Gluon reaches only through inline PTX. This probe times a ping-pong between the default
partition (4 warps) and one worker partition (4 warps), `rounds` round trips a CTA, one CTA an SM:

    mbar      each side: fence_async_shared, thread_barrier, mbarrier.arrive (one arrive, count 1); then
              mbarrier.wait for the other side (gluon_prefill's p_ready / p_free hand-off as written)
    mbar_raw  the same without the fence and the partition barrier (the arrive and the wait alone)
    named     each side: bar.arrive on its id, bar.sync on the other's (inline PTX, 256 threads, ids 14 / 15)

and reports ns (and cycles at the SM clock nvidia-smi reads) per one-way hand-off: a round trip is two. Nothing else
runs, so this is the hand-off's latency on an idle SM, not its cost inside a kernel whose warps compete for issue slots.

    PYTHONPATH=src python bench/handoff_probe.py [--rounds 20000] [--out FILE.json]
    PYTHONPATH=src python bench/handoff_probe.py --compile-only     # sm_90a PTX check on a machine without a GPU
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier  # noqa: E402

MODES = {"mbar": 0, "mbar_raw": 1, "named": 2}


@gluon.jit
def _bar(tok, ID: gl.constexpr, ARRIVE: gl.constexpr):
    """bar.arrive (ARRIVE) or bar.sync on named barrier ID over 256 threads, once a thread (tok: one int32 a
    thread); returns tok so that the caller can chain the next hand-off on it."""
    if ARRIVE:
        return gl.inline_asm_elementwise(f"bar.arrive {ID}, 256; mov.b32 $0, $1;", "=r,r", [tok],
                                         dtype=gl.int32, is_pure=False, pack=1)
    return gl.inline_asm_elementwise(f"bar.sync {ID}, 256; mov.b32 $0, $1;", "=r,r", [tok], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def _side(out_ptr, rounds, a, b, FIRST: gl.constexpr, MODE: gl.constexpr):
    """One partition's half of the ping-pong. FIRST signals on `a` and waits on `b`; the other waits on `a` then
    signals on `b`."""
    L: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    tok = gl.arange(0, 128, L)
    for i in range(rounds):
        if MODE == 2:
            if FIRST:
                tok = _bar(tok, 14, True)
                tok = _bar(tok, 15, False)
            else:
                tok = _bar(tok, 14, False)
                tok = _bar(tok, 15, True)
        else:
            if FIRST:
                if MODE == 0:
                    fence_async_shared()
                    gl.thread_barrier()
                mbarrier.arrive(a, count=1)
                mbarrier.wait(b, i & 1)
            else:
                mbarrier.wait(a, i & 1)
                if MODE == 0:
                    fence_async_shared()
                    gl.thread_barrier()
                mbarrier.arrive(b, count=1)
    if FIRST:
        gl.store(out_ptr + gl.program_id(0) * 128 + gl.arange(0, 128, L), tok)


@gluon.jit
def _worker(out_ptr, rounds, a, b, MODE: gl.constexpr):
    _side(out_ptr, rounds, a, b, False, MODE)


@gluon.jit
def handoff_kernel(out_ptr, rounds, MODE: gl.constexpr, num_warps: gl.constexpr):
    a = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    b = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(a, count=1)
    mbarrier.init(b, count=1)
    gl.warp_specialize([
        (_side, (out_ptr, rounds, a, b, True, MODE)),
        (_worker, (out_ptr, rounds, a, b, MODE)),
    ], [4], [80])


def compile_only() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _sm90 import Intercept, ptxas_report  # noqa: E402
    from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
    for mode, m in MODES.items():
        sink = []
        Intercept(handoff_kernel, lambda f, c, o: sink.append(c), source=GluonASTSource)[(1,)](
            torch.empty(128, dtype=torch.int32), 16, m, num_warps=4)
        ptx = sink[0].asm["ptx"]
        bars = sorted({ln.strip().split(";")[0] for ln in ptx.splitlines() if "bar." in ln and "mbarrier" not in ln})
        print(f"{mode}: {ptxas_report(ptx)}  named-barrier lines: {bars}")


def sm_clock_mhz() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return float(out.split()[0])
    except Exception:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=None)
    ap.add_argument("--compile-only", action="store_true")
    args = ap.parse_args()
    if args.compile_only:
        compile_only()
        return
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    out = torch.empty((sms, 128), dtype=torch.int32, device=dev)
    res = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__, "rounds": args.rounds,
           "ctas": sms, "git": os.environ.get("DSATTN_GIT_COMMIT", "?"), "modes": {}}
    for mode, m in MODES.items():
        handoff_kernel[(sms,)](out, 8, m, num_warps=4)  # compile, and a check that it does not hang
        torch.cuda.synchronize()
        times = []
        for _ in range(args.reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            handoff_kernel[(sms,)](out, args.rounds, m, num_warps=4)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) * 1e6)  # ns
        times.sort()
        ns = times[len(times) // 2] / (2 * args.rounds)
        mhz = sm_clock_mhz()
        res["modes"][mode] = {"ns_per_handoff": round(ns, 2), "sm_mhz_after": mhz,
                              "cycles_per_handoff": round(ns * mhz / 1e3, 1) if mhz else None,
                              "kernel_ns_median": round(times[len(times) // 2])}
        cyc = f" (~{ns * mhz / 1e3:.0f} cycles at {mhz:.0f} MHz)" if mhz else ""
        print(f"{mode:9s} {ns:7.2f} ns a hand-off{cyc}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
