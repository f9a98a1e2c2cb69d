"""``dsattn bench ab``: is B faster than A, and by how much? Two arms of one op on the same inputs, timed in
alternation, with a bootstrap confidence interval on the ratio.

An arm is the op's keyword arguments and/or environment variables, e.g.

    dsattn bench ab --op sparse_mla_decode --tokens 512 --heads 8 --a variant=pad64 --b variant=native
    dsattn bench ab --op topk --rows 4096 --width 65536 --a version=3 --b version=4
    dsattn bench ab --op sparse_mla_decode --a env:DSATTN_SPARSE_MLA_IMPL=triton --b env:DSATTN_SPARSE_MLA_IMPL=gluon

(an ``env:`` setting is in force only while that arm runs, so it must be read at call time.) A prefill arm's
``row_scratch=1`` passes sparse_mla_prefill a row_scratch of prefill_row_spec over the case's rows (allocated once):

    dsattn bench ab --op sparse_mla_prefill --tokens 1024 --heads 64 --a row_scratch=0 --b row_scratch=1

Method. Both arms run once, and their outputs are compared (the same function must be computed: equal sets
for top-k; for attention every output element within twice issue 3's bound of the other arm's, 2 * (2e-3 + 3/128
|out|), and lse within 2e-5 relative; under the CPU interpreter, whose bf16 dot is inexact, 2e-2 and 1e-4). Arms
that disagree are still timed, but the run prints a warning and exits 1. Then after a warm-up, ``--blocks``
blocks, each timing ``--calls`` back-to-back calls of A and of B in a random order (CUDA events around each group;
the host clock on a CPU; no L2 flush between the calls of a group, unlike ``do_bench``: rows a call gathered may
still be in L2 for the next). One block gives one paired sample (ms per call of A, of B). A top-k arm calls
``launch_topk`` with its keyword arguments (none: the public op's defaults), so both arms pay the same host cost.
The estimate is median(A) / median(B) (> 1: B is faster); its interval resamples the blocks with replacement
(``--resamples``, percentile interval, fixed seed). The verdict names the faster arm only when the interval
excludes 1; otherwise "no difference detected" (widen with more blocks). Alternation in blocks keeps clock
and thermal drift out of the ratio; the interval says how much the run-to-run spread still allows, as long as the
blocks are independent. On a machine under bursts of outside load they are not: each arm's spread ((p90 - p10) /
median of its blocks) is reported, and over 8% the run is marked noisy with a warning (see ``spread``), the
median of the blocks' own ratios a_i / b_i printed beside the estimate.
"""
from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import random
import statistics
import sys
from collections.abc import Callable

import torch

from .common import format_table, group_ms, write_results


# ---------------------------------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------------------------------

def ratio_ci(a_ms: list[float], b_ms: list[float], confidence: float = 0.95, resamples: int = 2000,
             seed: int = 0) -> tuple[float, float, float]:
    """(median(a) / median(b), low, high): a percentile bootstrap over the paired samples (a[i], b[i])."""
    if len(a_ms) != len(b_ms) or not a_ms:
        raise ValueError(f"a_ms and b_ms must be non-empty and paired, got {len(a_ms)} and {len(b_ms)} samples")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive int, got {resamples!r}")
    est = statistics.median(a_ms) / statistics.median(b_ms)
    rng = random.Random(seed)
    n = len(a_ms)
    ratios = []
    for _ in range(resamples):
        pick = [rng.randrange(n) for _ in range(n)]
        ratios.append(statistics.median(a_ms[i] for i in pick) / statistics.median(b_ms[i] for i in pick))
    ratios.sort()
    cut = min(int((1 - confidence) / 2 * resamples + 1e-9), (resamples - 1) // 2)  # as many dropped at each end
    return est, ratios[cut], ratios[resamples - 1 - cut]


NOISY_SPREAD = 0.08  # an arm whose blocks spread more than this (p90 - p10 over the median) marks the run noisy


def spread(samples: list[float]) -> float:
    """(p90 - p10) / median of one arm's block samples (nearest-rank percentiles): how much the machine moved during
    the run. Committed H100 runs (bench/results/s72..s75/ab_*.json) spread 0.014-0.07 on a quiet machine (s75's
    ab_s75_pe1_1024_h8_h100.json: 0.024, blocks of 0.240-0.252 ms), the 8192-token ones the most; session 74's busy
    machine gave 0.12-2.1 (ab_s74_lazy_1024_h8_h100.json: 0.20, blocks of 0.358-0.470 ms for the same kernel), and
    there A/Bs of a kernel against itself came out 1.042x (95% CI 1.010-1.071) and 0.978x (0.964-0.998): blocks taken
    in bursts of load are not independent, and the interval is then too narrow."""
    if not samples:
        raise ValueError("samples must be non-empty")
    xs = sorted(samples)
    n = len(xs)
    pick = lambda q: xs[min(n - 1, max(0, int(q * n + 0.5) - 1))]  # noqa: E731
    return (pick(0.9) - pick(0.1)) / statistics.median(xs)


def verdict(lo: float, hi: float) -> str:
    if lo > 1:
        return "B faster"
    if hi < 1:
        return "A faster"
    return "no difference detected"


# ---------------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _environ(env: dict[str, str]):
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def ab_test(fn_a: Callable[[], object], fn_b: Callable[[], object], *, env_a: dict | None = None,
            env_b: dict | None = None, blocks: int = 30, calls: int = 5, warmup: int = 3,
            confidence: float = 0.95, resamples: int = 2000, seed: int = 0, cuda: bool | None = None) -> dict:
    """Time two callables in alternating blocks; see the module docstring. Returns medians, the ratio
    median(A) / median(B) with its interval, the verdict and the paired samples."""
    for name, v in (("blocks", blocks), ("calls", calls)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    cuda = torch.cuda.is_available() if cuda is None else cuda
    arms = {"A": (fn_a, env_a or {}), "B": (fn_b, env_b or {})}
    for fn, env in arms.values():
        with _environ(env):
            for _ in range(warmup):
                fn()
    if cuda:
        torch.cuda.synchronize()
    rng = random.Random(seed + 1)
    samples: dict[str, list[float]] = {"A": [], "B": []}
    for _ in range(blocks):
        order = ["A", "B"]
        rng.shuffle(order)
        for arm in order:
            fn, env = arms[arm]
            with _environ(env):
                samples[arm].append(group_ms(fn, calls, cuda))
    est, lo, hi = ratio_ci(samples["A"], samples["B"], confidence, resamples, seed)
    sa, sb = spread(samples["A"]), spread(samples["B"])
    return dict(a_ms=statistics.median(samples["A"]), b_ms=statistics.median(samples["B"]), ratio_a_over_b=est,
                ci_low=lo, ci_high=hi, confidence=confidence, verdict=verdict(lo, hi), blocks=blocks, calls=calls,
                paired_ratio=statistics.median(a / b for a, b in zip(samples["A"], samples["B"])),
                a_spread=sa, b_spread=sb, noisy=max(sa, sb) > NOISY_SPREAD,
                a_samples_ms=samples["A"], b_samples_ms=samples["B"])


# ---------------------------------------------------------------------------------------------------
# arms and ops
# ---------------------------------------------------------------------------------------------------

def parse_arm(text: str, what: str) -> tuple[dict, dict]:
    """'k=v,env:NAME=v,...' -> (kwargs, env). Values: int, float, True/False/None, else str. In an env value ';'
    stands for ',' (the settings are comma-separated), so that a named-field config such as
    env:DSATTN_PF_CONFIG=f16=0;cvt_pipe=0 reaches the variable as 'f16=0,cvt_pipe=0'."""
    kwargs, env = {}, {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} must be comma-separated key=value settings, got {item!r} in {text!r}")
        if key.startswith("env:"):
            env[key[4:]] = val.replace(";", ",")
            continue
        for conv in (int, float):
            try:
                kwargs[key] = conv(val)
                break
            except ValueError:
                pass
        else:
            kwargs[key] = {"True": True, "False": False, "None": None}.get(val, val)
    return kwargs, env


def _randn(shape, gen, device, scale=1.0):
    return torch.randn(shape, generator=gen, device=device) * scale


def build_sparse_mla(args, device) -> tuple[Callable[[dict], tuple[Callable, Callable]], dict]:
    """-> (make(kwargs) -> (run, result), shape). Decode over a paged cache with `uniform` indices; prefill over
    a flat bf16 cache with `overlap` indices (the benchmark distributions of BENCHMARKS.md)."""
    from ..formats import KVLayout, pack_latent_rows
    from ..ops.sparse_mla import decode_scratch_spec, prefill_row_spec, sparse_mla_decode, sparse_mla_prefill
    from ..ops._triton import sm_count
    from ..ops.sparse_mla.dispatch import DEFAULT_SM_COUNT, default_variant
    from .kernels_mla import overlap_indices, uniform_indices
    gen = torch.Generator(device=device).manual_seed(args.seed)
    decode = args.op == "sparse_mla_decode"
    layout = KVLayout(args.layout if decode else "bf16")
    d_qk = 512 if layout is KVLayout.FP8_DS_MLA_NOPE else 576
    t, h = args.tokens, args.heads
    lat = _randn((args.slots, d_qk), gen, device)
    q = _randn((t, h, d_qk), gen, device, 0.5).to(torch.bfloat16)
    scale = d_qk ** -0.5
    if decode:
        rows = pack_latent_rows(lat, layout) if layout.is_fp8 else lat.to(torch.bfloat16)
        kv = rows.view(args.slots // args.block_size, args.block_size, rows.shape[1])
        indices = uniform_indices(t, args.slots, args.topk, device, seed=args.seed)
    else:
        kv = lat.to(torch.bfloat16)
        indices = overlap_indices(t, args.slots, args.topk, device, seed=args.seed)
    shape = dict(tokens=t, heads=h, layout=layout.value, topk=args.topk, slots=args.slots,
                 dist="uniform" if decode else "overlap")
    sm = sm_count(device, DEFAULT_SM_COUNT)

    def make(kwargs):
        out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=device)
        lse = torch.empty((t, h), dtype=torch.float32, device=device)
        if not decode:
            kwargs = dict(kwargs)
            if str(kwargs.pop("row_scratch", 0)) not in ("0", "None", "False"):  # row_scratch=1: prefill_row_spec's
                kwargs["row_scratch"] = [torch.empty(s, dtype=dt, device=device)
                                         for s, dt in prefill_row_spec(kv.shape[0], d_qk)]
            return (lambda: sparse_mla_prefill(q, kv, indices, scale, out=out, lse=lse, **kwargs)), (lambda: (out, lse))
        variant = kwargs.get("variant") or default_variant("decode", h, t, sm)
        scratch = [torch.empty(s, dtype=dt, device=device)
                   for s, dt in decode_scratch_spec(t, h, args.topk, variant, layout, sm)]
        return (lambda: sparse_mla_decode(q, kv, indices, scale, out=out, lse=lse, scratch=scratch or None,
                                          **kwargs)), (lambda: (out, lse))
    return make, shape


def build_topk(args, device):
    from ..ops.topk import topk_scratch_spec
    from ..ops.topk.select import launch_topk
    from ..ops._triton import allow_runtime_loop_bounds, interpreting
    if interpreting():
        allow_runtime_loop_bounds()  # the select loops to row lengths, runtime scalars
    gen = torch.Generator(device=device).manual_seed(args.seed)
    x = _randn((args.rows, args.width), gen, device)
    lengths = torch.full((args.rows,), args.width, dtype=torch.int32, device=device)
    (sshape, sdtype), = topk_scratch_spec(args.rows, args.width, args.topk)
    shape = dict(rows=args.rows, width=args.width, topk=args.topk)

    def make(kwargs):
        out = torch.empty((args.rows, args.topk), dtype=torch.int32, device=device)
        scratch = torch.empty(sshape, dtype=sdtype, device=device)
        return (lambda: launch_topk(x, lengths, args.topk, out, scratch, **kwargs)), (lambda: (out,))
    return make, shape


OPS = {"sparse_mla_decode": build_sparse_mla, "sparse_mla_prefill": build_sparse_mla, "topk": build_topk}


def check_arm_kwargs(op: str, kwargs: dict, what: str) -> None:
    """ValueError naming the arm when a sparse MLA arm passes a keyword its public function does not take, before
    anything is built or run. The usual cause is a comma inside an env value: 'env:DSATTN_PF_CONFIG=vst=1,cl=1' makes
    'cl=1' a keyword of its own (session 67); ';' stands for ',' there."""
    if op not in ("sparse_mla_decode", "sparse_mla_prefill"):
        return
    from ..ops import sparse_mla
    params = inspect.signature(getattr(sparse_mla, op)).parameters
    bad = sorted(k for k in kwargs if k not in params)
    if bad:
        raise ValueError(f"{what}: {op} takes no argument {', '.join(map(repr, bad))} (a comma inside an env: value "
                         f"ends it; write ';' for ',' there, e.g. env:DSATTN_PF_CONFIG=vst=1;cl=1)")


def _agreement(op: str, res_a, res_b) -> dict:
    """What the arms' outputs share, and whether they compute the same function (the module docstring's bounds)."""
    if op == "topk":
        a, b = (r[0].sort(dim=1).values for r in (res_a, res_b))
        other = int((a != b).any(dim=1).sum())
        return dict(rows_with_other_set=other, outputs_agree=other == 0)
    from ..ops._triton import interpreting
    from ..ops.sparse_mla.testing import LSE_RTOL, OUT_ATOL, OUT_RTOL
    (oa, la), (ob, lb) = res_a, res_b
    same = la == lb  # equal -inf (a row without valid keys) agrees
    rel = torch.where(same, 0.0, (la - lb).abs() / lb.abs().clamp_min(1e-30))
    diff = (oa.float() - ob.float()).abs()
    if interpreting():
        out_ok, lse_ok = bool((diff <= 2e-2).all()), float(rel.max()) <= 1e-4
    else:  # each arm within issue 3's bounds of the reference, so within twice them of each other
        out_ok = bool((diff <= 2 * (OUT_ATOL + OUT_RTOL * ob.float().abs())).all())
        lse_ok = bool((torch.where(same, 0.0, (la - lb).abs() / lb.abs().clamp_min(1.0)) <= 2 * LSE_RTOL).all())
    return dict(max_abs_out_diff=float(diff.max()), max_rel_lse_diff=float(rel.max()), outputs_agree=out_ok and lse_ok)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="dsattn bench ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", required=True, choices=sorted(OPS))
    ap.add_argument("--a", default="", help="arm A: key=value settings (kwargs, env:NAME=value; in an env value ';' "
                    "stands for ','), comma-separated")
    ap.add_argument("--b", default="", help="arm B, as --a")
    ap.add_argument("--tokens", type=int, default=512, help="sparse MLA: query tokens (decode) or s_q (prefill)")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--layout", default="fp8_ds_mla", help="sparse MLA decode: the cache layout")
    ap.add_argument("--slots", type=int, default=None, help="sparse MLA: cache slots (default 131072 decode, "
                    "16384 prefill)")
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--rows", type=int, default=4096, help="topk: rows")
    ap.add_argument("--width", type=int, default=65536, help="topk: row width")
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="ab")
    ap.add_argument("--out", default=None, help="results folder (default bench/results)")
    args = ap.parse_args(argv)
    if args.slots is None:
        args.slots = 131072 if args.op == "sparse_mla_decode" else 16384
    for name in ("tokens", "heads", "slots", "block_size", "topk", "rows", "width"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.op == "sparse_mla_decode" and args.slots % args.block_size:
        raise ValueError(f"--slots must be a multiple of --block-size ({args.block_size}), got {args.slots}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    kw_a, env_a = parse_arm(args.a, "--a")
    kw_b, env_b = parse_arm(args.b, "--b")
    check_arm_kwargs(args.op, kw_a, "--a")
    check_arm_kwargs(args.op, kw_b, "--b")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    make, shape = OPS[args.op](args, device)
    runs = {}
    for arm, kw, env in (("A", kw_a, env_a), ("B", kw_b, env_b)):
        run, result = make(kw)
        with _environ(env):
            run()
        runs[arm] = (run, result)
    agree = _agreement(args.op, runs["A"][1](), runs["B"][1]())
    res = ab_test(runs["A"][0], runs["B"][0], env_a=env_a, env_b=env_b, blocks=args.blocks, calls=args.calls,
                  warmup=args.warmup, confidence=args.confidence, resamples=args.resamples, seed=args.seed)
    row = dict(op=args.op, a=args.a, b=args.b, **shape, **agree, **res)
    cols = ["op", "a", "b", "a_ms", "b_ms", "ratio_a_over_b", "ci_low", "ci_high", "verdict"]
    print(format_table([row], cols))
    print(", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in agree.items()))
    path = write_results(args.name, [row], meta=dict(method="alternating blocks, bootstrap CI of median ratio",
                                                      argv=list(sys.argv[1:] if argv is None else argv)),
                         out_dir=args.out)
    print(f"wrote {path}")
    if res["noisy"]:
        print(f"WARNING: noisy machine: the blocks spread {res['a_spread']:.1%} (A) and {res['b_spread']:.1%} (B), "
              f"over {NOISY_SPREAD:.0%}; the interval can be too narrow on such a run (ab.spread), so repeat it before "
              f"reading the verdict (median of the blocks' own ratios: {res['paired_ratio']:.3f})", file=sys.stderr)
    if not agree["outputs_agree"]:
        print("WARNING: the arms' outputs differ beyond the bounds of the module docstring: they compute different "
              "functions, and the timing compares them as such", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
