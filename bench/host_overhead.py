"""Host (CPU) time of one call of the public sparse MLA functions on the GPU, against its GPU time.

    PYTHONPATH=src python bench/host_overhead.py [--profile] [--breakdown] [--n 50]
    PYTHONPATH=src python bench/host_overhead.py --stub [--breakdown] [--profile]     (no GPU: the CPU box)
    (--only TEXT: only the cases whose name holds TEXT, e.g. --only "32h 1024")

Host time: wall time of N back-to-back calls without synchronizing, divided by N, the least of --reps rounds (the GPU
queue absorbs them, so this is the enqueue cost: checks, dispatch, launches). GPU time: do_bench's median. A call is
host-bound when the first is the larger. Each case is timed with ops/_fastlaunch.py on (the default) and off
(Triton's own launch path every launch), in the same process.

--breakdown adds, per case: 'ours' (the same call with every kernel launch a no-op: our Python alone), and per launch
of the call: Triton's path (kernel[grid](...)), the fast path (_fastlaunch.launch) and the compiled kernel's launcher
alone (the C launcher: argument parsing, cuPointerGetAttribute per pointer, cuLaunchKernelEx), each N back-to-back.
--profile prints cProfile's top functions of N calls.

--stub (CPU box, no GPU): Triton's launch path runs up to the C launcher, which is replaced by a Python stand-in that
only calls data_ptr() on the pointer arguments; kernels are never compiled (a fake compiled kernel is cached under
Triton's key); the device checks treat CPU tensors as an sm_90 GPU's. GPU time is not measured there.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import io
import pstats
import sys
import time

import torch


# ---------------------------------------------------------------------------------------------------
# --stub: Triton's launch path without a GPU
# ---------------------------------------------------------------------------------------------------

class _FakeCompiled:
    """Stands in for a CompiledKernel: launch_metadata is CompiledKernel's (a LazyDict while the launch hooks are the
    default empty HookChains); run is the launcher: CudaLauncher.__call__'s Python part with no scratch, then what
    the C launcher does in Python terms (data_ptr() of each pointer argument, the enter / exit hooks when given)."""
    function = 0
    packed_metadata = (4, 1, 0)
    name = "stub"
    src = None
    module = True

    def _init_handles(self):
        pass

    def run(self, gx, gy, gz, stream, function, packed, launch_metadata, enter, exit_, *args):
        def allocate_scratch(size, align, allocator):
            return None
        allocate_scratch(0, 1, None)
        allocate_scratch(0, 1, None)
        if enter is not None:
            enter(launch_metadata)
        for a in args:
            if hasattr(a, "data_ptr"):
                a.data_ptr()
        if exit_ is not None:
            exit_(launch_metadata)


def _install_stub() -> None:
    import os
    os.environ.pop("TRITON_INTERPRET", None)
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver
    from triton.runtime.jit import JITFunction

    class FakeDriver:
        def __init__(self):
            self.get_current_device = lambda: 0
            self.get_current_stream = lambda device: 0

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

    from triton.compiler.compiler import CompiledKernel
    _FakeCompiled.launch_metadata = CompiledKernel.launch_metadata

    def fake_compile(self, key, signature, device, constexprs, options, attrs, warmup):
        kernel = _FakeCompiled()
        self.device_caches[device][0][key] = kernel
        return kernel

    driver.set_active(FakeDriver())
    JITFunction._do_compile = fake_compile

    import dsattn.ops.sparse_mla as sm
    from dsattn.ops.sparse_mla import grouping, launch
    sm.kernels_available = lambda device: True
    grouping.kernels_available = lambda device: True
    launch.gluon_usable = lambda q, flat, layout, hp: hp <= 32
    launch.g64_usable = lambda q, flat: True

    def use_gluon_prefill(q, kv, variant, impl=None):  # launch.use_gluon_prefill on sm_90 (both variants)
        impl = impl or launch.sparse_mla_impl()
        if impl not in ("gluon_prefill", "auto"):
            return False
        return impl == "gluon_prefill" or launch.gluon_prefill_preferred(q.shape[1])
    launch.use_gluon_prefill = use_gluon_prefill


# ---------------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------------

def _sync(gpu: bool) -> None:
    if gpu:
        torch.cuda.synchronize()


def _host_us(fn, n: int, reps: int, gpu: bool) -> float:
    """The least over `reps` rounds of the wall time of n back-to-back calls / n, in us (synchronized between rounds)."""
    best = float("inf")
    for _ in range(reps):
        _sync(gpu)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) * 1e6 / n)
    _sync(gpu)
    return best


def _record_launches(fn):
    """The launches of one call of fn: (kernel, grid, args, kwargs), through _fastlaunch.launch or kernel[grid]."""
    from triton.runtime.jit import JITFunction

    from dsattn.ops import _fastlaunch
    rec = []
    inner = [False]
    orig_launch, orig_run = _fastlaunch.launch, JITFunction.run

    def rec_launch(kernel, grid, *args, **kwargs):
        rec.append((kernel, grid, args, kwargs))
        inner[0] = True
        try:
            return orig_launch(kernel, grid, *args, **kwargs)
        finally:
            inner[0] = False

    def rec_run(self, *args, grid, warmup, **kwargs):
        if not inner[0] and not warmup:
            rec.append((self, grid, args, kwargs))
        return orig_run(self, *args, grid=grid, warmup=warmup, **kwargs)

    mods = _launch_modules()
    saved = [(m, m._fast) for m in mods]
    for m in mods:
        m._fast = rec_launch
    JITFunction.run = rec_run
    try:
        fn()
    finally:
        JITFunction.run = orig_run
        for m, f in saved:
            m._fast = f
    return rec


def _launch_modules():
    from dsattn.ops.sparse_mla import gluon_pair, gluon_prefill, grouping, kernels, launch
    return [m for m in (launch, grouping, gluon_prefill, gluon_pair, kernels) if hasattr(m, "_fast")]


def _ours_only(fn, n, reps, gpu) -> float:
    """Host time of fn with every launch a no-op (Triton's run and the fast path both skipped)."""
    from triton.runtime.jit import JITFunction
    orig_run = JITFunction.run
    mods = _launch_modules()
    saved = [(m, m._fast) for m in mods]
    JITFunction.run = lambda self, *a, grid, warmup, **kw: None
    for m in mods:
        m._fast = lambda kernel, grid, *a, **kw: None
    try:
        return _host_us(fn, n, reps, False)
    finally:
        JITFunction.run = orig_run
        for m, f in saved:
            m._fast = f


def _per_launch(rec, n, reps, gpu) -> list[str]:
    from dsattn.ops import _fastlaunch
    rows = []
    for kernel, grid, args, kwargs in rec:
        name = getattr(kernel, "fn", kernel).__name__
        triton_us = _host_us(lambda: kernel[grid](*args, **kwargs), n, reps, gpu)
        fast_us = _host_us(lambda: _fastlaunch.launch(kernel, grid, *args, **kwargs), n, reps, gpu)
        site = _fastlaunch._SITES.get(id(kernel))
        if site is None:  # launched as kernel[grid] by its module: time the fast path's launcher all the same
            _fastlaunch.launch(kernel, grid, *args, **kwargs)
            site = _fastlaunch._SITES.get(id(kernel))
        c_us = float("nan")
        if site is not None and site.table:
            plan = site.plan(len(args), tuple(kwargs))
            run, function, packed = next(iter(site.table.values()))
            if plan is not None:
                from triton.runtime.driver import driver
                vals = plan[0](args, kwargs)
                g = tuple(grid) + (1, 1)
                stream = driver.active.get_current_stream(driver.active.get_current_device())
                c_us = _host_us(lambda: run(g[0], g[1], g[2], stream, function, packed, None, None, None, *vals),
                                n, reps, gpu)
        rows.append(f"    {name}: Triton's path {triton_us:.1f} us, fast path {fast_us:.1f}, launcher alone "
                    f"{c_us:.1f} ({len(args)} args)")
    return rows


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=None, help="calls a round (default 50 on a GPU, 2000 with --stub)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--breakdown", action="store_true")
    p.add_argument("--stub", action="store_true", help="no GPU: Triton's launch path up to a stubbed C launcher")
    p.add_argument("--only", default="", help="run the cases whose name contains this text (default: all)")
    args = p.parse_args()
    if args.stub:
        _install_stub()
    from dsattn.bench.common import time_ms
    from dsattn.bench.kernels_mla import decode_case, ours, prefill_case
    from dsattn.ops import _fastlaunch
    gpu = not args.stub
    n = args.n or (50 if gpu else 2000)
    dev = torch.device("cuda" if gpu else "cpu")
    cases = [("decode fp8 8h 512", decode_case(512, 8, "fp8_ds_mla", dev)),
             ("decode fp8 64h 512", decode_case(512, 64, "fp8_ds_mla", dev)),
             ("prefill 8h 1024", prefill_case(1024, 8, dev)),
             ("prefill 64h 1024", prefill_case(1024, 64, dev)),
             ("prefill 16h 1024", prefill_case(1024, 16, dev)),
             ("prefill 16h 1024 +rows", prefill_case(1024, 16, dev)),
             ("prefill 32h 1024 +rows", prefill_case(1024, 32, dev)),
             ("prefill 8h 32 (pad64, split: the plan)", prefill_case(32, 8, dev)),
             ("prefill 8h 32 (pad64, DSATTN_PREFILL_SPLITS=1)", prefill_case(32, 8, dev))]
    print(f"{'GPU' if gpu else 'stub (CPU box)'}; n {n}, least of {args.reps} rounds", flush=True)
    for name, case in cases:
        if args.only not in name:
            continue
        if "SPLITS=1" in name:  # read when the case's scratch is sized (ours) and at each call
            os.environ["DSATTN_PREFILL_SPLITS"] = "1"
        fn, _, _ = ours(case, rows=name.endswith("+rows"))  # session 71: row_scratch, converted at 16 / 32 heads
        fn()
        fn()
        _sync(gpu)
        gpu_ms = time_ms(fn, rep_ms=20) if gpu else float("nan")
        fast = _host_us(fn, n, args.reps, gpu)
        _fastlaunch.ENABLED = False
        slow = _host_us(fn, n, args.reps, gpu)
        _fastlaunch.ENABLED = True
        print(f"{name}: host {fast / 1e3:.3f} ms a call (Triton's launch path: {slow / 1e3:.3f}), GPU {gpu_ms:.3f} ms",
              flush=True)
        if args.breakdown:
            rec = _record_launches(fn)
            print(f"  ours (every launch a no-op): {_ours_only(fn, n, args.reps, gpu):.1f} us; {len(rec)} launches:")
            for row in _per_launch(rec, n, args.reps, gpu):
                print(row, flush=True)
        if args.profile:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(n):
                fn()
            pr.disable()
            _sync(gpu)
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(20)
            print(s.getvalue(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
