"""What every benchmark shares: timing with CUDA events, the run's provenance, JSON results, tables.

Results go to ``bench/results/<name>.json`` with the device, torch and triton versions, the git commit,
and one row per measured case (BENCHMARKS.md).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence

import torch


def src_digest(root: str | None = None) -> str:
    """First 12 hex digits of a SHA-256 over the Python sources below root (default: this package; path and bytes,
    sorted by path, __pycache__ left out): names the code that ran where the git commit cannot (a copied tree with a
    stale .git reports the commit it was copied from, as the GPU machine's copy did in session 24)."""
    import hashlib
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                h.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as f:
                    h.update(f.read() + b"\0")
    return h.hexdigest()[:12]


def provenance() -> dict:
    """Device, library versions, git commit and source digest (src_digest) of this run."""
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:  # pragma: no cover
        triton_version = None
    if os.environ.get("DSATTN_GIT_COMMIT"):
        # the caller names the commit it sent: a copy of the tree (the GPU machine) may carry no .git, or a
        # stale one whose HEAD is not the tree that runs
        commit, dirty = os.environ["DSATTN_GIT_COMMIT"], None
    else:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=os.path.dirname(__file__), timeout=5).stdout.strip() or None
            dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                        capture_output=True, text=True, cwd=os.path.dirname(__file__),
                                        timeout=5).stdout.strip())
        except (OSError, subprocess.SubprocessError):  # pragma: no cover
            commit, dirty = None, None
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else platform.processor() or "cpu"
    info = {
        "device": device,
        "torch": torch.__version__,
        "triton": triton_version,
        "cuda": torch.version.cuda,
        "git_commit": commit,
        "git_dirty": dirty,
        "src_digest": src_digest(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if torch.cuda.is_available():
        info["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count
    return info


def time_ms(fn: Callable[[], object], *, warmup_ms: float = 25, rep_ms: float = 100) -> float:
    """Median milliseconds of fn() on the GPU (CUDA events through triton.testing.do_bench). Without
    CUDA (smoke runs only): the mean wall time of the calls that fit in rep_ms, after one call."""
    if not torch.cuda.is_available():
        fn()
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < rep_ms / 1e3 or n < 1:
            fn()
            n += 1
        return (time.perf_counter() - t0) * 1e3 / n
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


# The H200's ceilings, measured for BENCHMARKS.md: HBM copy (bytes read + written), bf16 GEMM (the low end of its 680 to
# 790 TFLOP/s), fp8 GEMM. The floors of every kernel table are work / these.
H200_CEILINGS = {"hbm_bytes_per_s": 4.27e12, "bf16_flops": 680e12, "fp8_flops": 1245e12}
_CEILINGS: dict | None = None


def ceilings() -> dict:
    """The ceilings the tables' floors divide by, with where they came from ('source'): on an H200, BENCHMARKS.md's
    (H200_CEILINGS); on any other GPU, or with DSATTN_CEILINGS=measure, measured once a process (measure_ceilings),
    since another GPU's ceilings would put its floors in the wrong place (session 58's H100 tables divided by the
    H200's). DSATTN_CEILINGS=h200 takes the H200's anywhere. Every table's meta records the dict."""
    global _CEILINGS
    mode = os.environ.get("DSATTN_CEILINGS", "").strip()
    if mode not in ("", "h200", "measure"):
        raise ValueError(f"DSATTN_CEILINGS must be 'h200' or 'measure' (or unset), got {mode!r}")
    if _CEILINGS is not None and _CEILINGS["mode"] == mode:
        return dict(_CEILINGS)
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    if mode == "h200" or (mode == "" and ("H200" in name or not torch.cuda.is_available())):
        found = dict(H200_CEILINGS, source="BENCHMARKS.md (H200)")
    else:
        found = dict(measure_ceilings(), source=f"measured on {name} (bench.common.measure_ceilings)")
    _CEILINGS = dict(found, mode=mode)
    return dict(_CEILINGS)


def measure_ceilings(copy_bytes: int = 1 << 29, gemm: int = 8192) -> dict:
    """This GPU's ceilings, as BENCHMARKS.md measured the H200's: a copy of copy_bytes (bytes read + written a
    second), a bf16 and an fp8 (e4m3, torch._scaled_mm, unit scales) GEMM of gemm^3 (2 gemm^3 FLOPs a second),
    each the median of time_ms. fp8_flops is None where torch._scaled_mm does not run. Its buffers (~1 GiB at the
    defaults) are freed before it returns; a table that reports its peak memory calls ceilings() first and resets
    the peak after it (kernels_mla.main)."""
    def copy_rate() -> float:
        src = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        return 2 * copy_bytes / (time_ms(lambda: dst.copy_(src)) / 1e3)

    def gemm_rates() -> tuple[float, float | None]:
        a = torch.randn(gemm, gemm, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(gemm, gemm, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * gemm ** 3
        bf16 = flops / (time_ms(lambda: a @ b) / 1e3)
        try:
            a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()
            one = torch.ones((), device="cuda")
            fp8 = flops / (time_ms(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                              out_dtype=torch.bfloat16)) / 1e3)
        except (RuntimeError, AttributeError):  # pragma: no cover - no fp8 GEMM on this GPU / build
            fp8 = None
        return bf16, fp8

    hbm = copy_rate()
    bf16, fp8 = gemm_rates()
    torch.cuda.empty_cache()
    return {"hbm_bytes_per_s": hbm, "bf16_flops": bf16, "fp8_flops": fp8}


def warm_up_gpu(seconds: float = 0.5) -> None:
    """Keep the GPU busy with bf16 matmuls for about `seconds` before the first timing of a process, so that the first
    case is not timed while the clocks ramp up from idle. (The session 10 tables' first rows were the slow ones,
    notes/sparse_mla.md; whether this warm-up removes that was not measured.) Nothing without CUDA."""
    if not torch.cuda.is_available():
        return
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            a @ a
        torch.cuda.synchronize()


def graph_replay(fn: Callable[[], object]) -> Callable[[], object]:
    """fn captured once in a CUDA graph; returns the replay (fn itself without CUDA). Timing the replay leaves
    out fn's host work (checks, dispatch, launch), as a serving engine replaying a captured step does. fn must
    not allocate or synchronize; it runs once before the capture (compiles, warms caches). The capture pattern
    is bench/topk_v3.py's, which ran on the H200."""
    if not torch.cuda.is_available():
        return fn
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()

    def replay(_keep=fn):
        # _keep: fn's closure holds what the graph reads and writes outside its own pool (a caller's scratch made
        # once beside fn); dropped, the caching allocator would hand that memory to the next allocation while the
        # graph still uses it (session 38: the split sweep's first version read freed union lists)
        graph.replay()
    return replay


def graph_ms(fn: Callable[[], object], reps: int = 20, replays: int = 20) -> float:
    """Mean ms a call of fn, as `replays` replays of one CUDA graph of `reps` calls (fn's host work left out, and the
    replay's launch spread over reps calls); fn runs 3 times on a side stream first. Without CUDA: one call, nan.
    (Session 18: eager decode calls at one wave of tokens are host-bound, ~0.1-0.15 ms a call.)"""
    if not torch.cuda.is_available():
        fn()
        return float("nan")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / (reps * replays)


def kernel_events(fn: Callable[[], object], calls: int) -> list[tuple[float, float, str]]:
    """fn run once, then `calls` times under torch.profiler (CUDA activity): every GPU activity event (kernels, and
    memsets or copies where fn issues them) as (start us, end us, name), by start time. Kernels inside a replayed
    CUDA graph are reported one by one (session 40's benches)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return sorted((ev.time_range.start, ev.time_range.end, ev.name) for ev in prof.events()
                  if ev.device_type == torch.autograd.DeviceType.CUDA)


def call_spans(events: Sequence[tuple[float, float, str]], calls: int) -> tuple[float, dict[str, float]]:
    """(mean span of a call on the GPU, from its first event's start to its last event's end; each event name's mean
    duration a call) from kernel_events of `calls` calls that each issue the same number of events, back to back.
    The span counts the gaps between a call's kernels once and overlapping kernels once; summing the durations would
    leave out the gaps and count an overlap twice (FlashMLA's decode kernels overlap: session 40). ValueError when the
    events do not split into `calls` equal groups."""
    per_call = len(events) // calls if calls > 0 else 0
    if per_call == 0 or per_call * calls != len(events):
        raise ValueError(f"{len(events)} GPU events for {calls} calls: not a whole number a call")
    spans, own = [], {}
    for i in range(calls):
        group = events[i * per_call:(i + 1) * per_call]
        spans.append(max(e for _, e, _ in group) - min(s for s, _, _ in group))
    for s, e, name in events:
        own[name] = own.get(name, 0.0) + (e - s) / calls
    return sum(spans) / calls, own


def time_pair_ms(fn_a: Callable[[], object], fn_b: Callable[[], object], *, rounds: int = 3, **kw) -> tuple[float, float]:
    """Medians of two implementations measured alternately in the same process (for ratios)."""
    a, b = [], []
    for _ in range(rounds):
        a.append(time_ms(fn_a, **kw))
        b.append(time_ms(fn_b, **kw))
    a.sort()
    b.sort()
    return a[len(a) // 2], b[len(b) // 2]


def group_ms(fn: Callable[[], object], calls: int, cuda: bool) -> float:
    """Milliseconds per call of `calls` back-to-back calls (CUDA events around them; without cuda, wall time)."""
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) * 1e3 / calls


def host_ms(fn: Callable[[], object], calls: int = 50) -> float:
    """Median milliseconds of host (wall) time of one call of fn issued onto an idle GPU: synchronized before each
    call, no synchronization inside the window (the call's checks, dispatch and launches, not its GPU work). Longer
    than the call's GPU time means an eager caller with nothing else queued waits on the host (session 71: a
    converting sparse_mla_prefill at 16 heads, notes/sparse_mla.md)."""
    cuda = torch.cuda.is_available()
    times = []
    for _ in range(calls):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    if cuda:
        torch.cuda.synchronize()
    return statistics.median(times)


def alternating_medians(arms: dict[str, Callable[[], object]], *, rounds: int = 30, reps: int = 5) -> dict[str, float]:
    """Median milliseconds a call of each arm: `rounds` rounds, each timing every arm in turn over `reps` calls back
    to back (group_ms). No L2 flush between calls and no host work left out: an eager arm whose host work outlasts
    its GPU work reads its host time (graph_replay leaves that out)."""
    times: dict[str, list[float]] = {k: [] for k in arms}
    cuda = torch.cuda.is_available()
    for _ in range(rounds):
        for k, fn in arms.items():
            times[k].append(group_ms(fn, reps, cuda))
    return {k: statistics.median(v) for k, v in times.items()}


def write_results(name: str, rows: Sequence[dict], *, meta: dict | None = None, out_dir: str | None = None) -> str:
    """Write {provenance, meta, rows} to <out_dir>/<name>.json (default $DSATTN_RESULTS_DIR, else bench/results);
    returns the path."""
    out_dir = out_dir or os.environ.get("DSATTN_RESULTS_DIR", os.path.join("bench", "results"))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")
    with open(path, "w") as f:
        json.dump({"provenance": provenance(), "meta": meta or {}, "rows": list(rows)}, f, indent=1)
    return path


def format_table(rows: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    """A plain aligned text table of dict rows (floats with 3 significant decimals)."""
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0].keys())

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 1e4 else f"{v:.0f}"
        return "" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)
