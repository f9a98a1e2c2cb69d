"""Top-k 2048 on the GPU: the select's versions and knobs side by side with torch.topk, in one process.

    PYTHONPATH=src python bench/topk_v3.py --out results.json         # check and time every variant
    PYTHONPATH=src python bench/topk_v3.py --warm 2/6                 # compile a sixth of them (cache)

Variants: v4 (threshold, filter, select: ops/topk/select.py) as launch_topk runs it by default, the
previous default, and knobs of the threshold and the select (launch_topk_v4). The earlier variants
(v3, v4's filter knobs) and their numbers are in bench/results/topk_v3.json of trees a63691b and
fc52ab2 (git history); the split-select and threshold variants of the first run of this round are in
bench/results/topk_v3_split.json. Shapes: 4096 x 65536, 1024 x 131072,
128 x 65536, random normal fp32 rows, every row full ("full") or lengths uniform in [1, W] ("ragged");
4096 x 65536 with 64 distinct values ("ties", the exact fallback) for two variants. Each case: every
variant's output checked as a set (full: against torch.topk; ragged and ties: against the tie-aware
reference), then timed alternately with torch.topk (CUDA events, medians, `rounds` rounds). Shapes
under 256 MB rotate among several input copies so that L2 does not hold the input. The JSON is
rewritten after every case, so a run cut short keeps what it measured.

--warm i/n compiles variants i, i+n, ... on 8-row inputs (one and several filter programs per row), or with
--shapes on those shapes, so that parallel processes fill Triton's cache before the timed process starts.
--variants a,b,... (names of VARIANTS or STAGE_CUTS) and --cases RxW:dist,... (dist full, ragged or ties) restrict
a run (and a warm-up) to those variants and cases; --shapes RxW,... replaces the default shapes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from dsattn.bench.common import ceilings, provenance, time_ms
from dsattn.ops.topk import topk_scratch_spec
from dsattn.ops.topk.reference import topk_reference
from dsattn.ops.topk.select import launch_topk as _launch_topk

K = 2048
# the previous default (filter programs of 2 warps, threshold by 16 full steps, no register cap), as in
# bench/results/topk_v3.json of tree fc52ab2; "v4" is launch_topk's default now (v4_fuse_early's knobs,
# made the default after the 449bc48 run: bench/results/topk_v3_final.json), "v4_d2" the default before that
PREV = dict(version=4, filt_warps=2, tau_mode=0, tau_top=0, select_maxnreg=0, early=False, tau_early=False,
            fuse_tau=False)
# the default before v4_fuse_early's knobs (tau_mode 2, tau_top 10, select_maxnreg 80; no early stop, no
# fused threshold): the knob variants below start from it, so each name keeps the knobs it was measured
# with in bench/results/topk_v3_final.json / topk_v3_split.json although launch_topk's defaults changed
D2 = dict(version=4, early=False, tau_early=False, fuse_tau=False)
VARIANTS = {
    "v4": dict(version=4),
    "v4_prev": PREV,
    "v4_d2": D2,
    "v4_tau_top10": dict(PREV, tau_mode=2, tau_top=10),
    "v4_sel80": dict(PREV, select_maxnreg=80),
    "v4_tau_top10_split5": dict(D2, tau_split=5),
    "v4_split4_r128": dict(D2, split=4, select_maxnreg=128),
    # helper D2: two-bit steps that stop once exactly k (rank) keys are >= the prefix, and the threshold
    # fused into the filter when one filter program covers a row (4096 rows; 1024 rows keep _v4_tau)
    "v4_early": dict(D2, early=True),
    "v4_early_tau": dict(D2, early=True, tau_early=True),
    "v4_fuse": dict(D2, fuse_tau=True),
    "v4_fuse_early": dict(D2, fuse_tau=True, early=True, tau_early=True),  # = launch_topk's default now
    # session 15: launch_topk's default sorts each row's selection where several filter programs share a row
    # (a deterministic output order); this is the same launch without that sort, the order left to the atomics
    "v4_fuse_early_nosort": dict(D2, fuse_tau=True, early=True, tau_early=True, sort=False),
    # session 40: latency at few rows (a small-batch decode step, 1-32 rows), knobs of the default ("v4") one at a
    # time: the histogram select, one filter program a row (threshold fused, no order scans), select warps, no cap
    "v4_mode1": dict(version=4, mode=1),
    "v4_segs1": dict(version=4, segs=1),
    "v4_segs1_mode1": dict(version=4, segs=1, mode=1),
    "v4_sel4w": dict(version=4, select_warps=4),
    "v4_sel16w": dict(version=4, select_warps=16),
    "v4_nocap": dict(version=4, select_maxnreg=0),
    "v4_segs1_sel16w": dict(version=4, segs=1, select_warps=16),
    # session 41: a larger candidate capacity, so that a row of up to `cap` columns is selected in registers by the
    # select alone (no threshold, no filter: one launch instead of three)
    "v4_cap8k": dict(version=4, cap=8192),
    "v4_cap8k_w16": dict(version=4, cap=8192, select_warps=16),
    "v4_cap16k_w16": dict(version=4, cap=16384, select_warps=16),
    "v4_cap16k_w32": dict(version=4, cap=16384, select_warps=32),  # 1 x 16384 27.1 -> 40.6 us (topk_cap16k_s41.json)
    "v4_cap1k": dict(version=4, cap=1024),
    "v4_cap2k": dict(version=4, cap=2048),
    "v4_cap4k": dict(version=4, cap=4096),
    # session 41, the select's and the threshold's step loops at few rows (Nsight Compute: ~40% of the select's samples
    # and ~70% of the threshold's are their two-bit steps): the split select (the steps after `split` over the k-th
    # largest's bucket of <= small keys; no early stop then): slower at every few-row shape (topk_split_s41.json).
    # 8 threshold warps (a launch_topk_v4 knob for that run, removed after it: code at 8a7a850) were no faster.
    "v4_split2": dict(version=4, split=2, small=256),
    "v4_split3": dict(version=4, split=3, small=256),
    "v4_split4": dict(version=4, split=4, small=256),
    "v4_split3_s1k": dict(version=4, split=3, small=1024),
    # session 43: few long rows in one launch (_v4_fused: every tile's program finds the threshold itself, the last
    # of a row to finish selects) against the three launches (the default before it), by tile size. Since then the
    # default takes the one launch at few long rows (fused_tile_default), so the knob variants above, measured as three
    # launches, need fused=False added to run as they did there
    "v4_3l": dict(version=4, fused=False),
    "v4_fused": dict(version=4, fused=True),
    "v4_fused_t1k": dict(version=4, fused=True, fused_tile=1024),
    "v4_fused_t2k": dict(version=4, fused=True, fused_tile=2048),
    "v4_fused_t8k": dict(version=4, fused=True, fused_tile=8192),
    # session 43: a sample of 4096 (no iid row of 4096 left [k, cap] at 65536 columns, 0.10% at 2048)
    "v4_s4k": dict(version=4, sample=4096),
    "v4_s2k": dict(version=4, sample=2048),  # the default's sample before sample_size (64 to 2 x SMs rows: 4096)
    # session 48: rows that fit the capacity selected by the Gluon select (radix passes over shared-memory histograms,
    # topk/gluon_select.py; the default on sm_90 since) at 4 / 8 / 16 warps and 8 / 10 bits a pass, and by the Triton
    # select (the default before). The nocand variants ran at 95964fa, whose select gathered the first pass's bin for
    # the later passes unless gluon_cand=False (no faster: topk_gluon_b_s48.json; removed, the knob with it)
    "v4_gluon": dict(version=4, gluon=True),
    "v4_gluon_w4": dict(version=4, gluon=True, gluon_warps=4),
    "v4_gluon_w8": dict(version=4, gluon=True, gluon_warps=8),
    "v4_gluon_w16": dict(version=4, gluon=True, gluon_warps=16),
    "v4_gluon_w16_b8": dict(version=4, gluon=True, gluon_warps=16, gluon_bits=8),
    "v4_gluon_w16_b10": dict(version=4, gluon=True, gluon_warps=16, gluon_bits=10),
    "v4_triton": dict(version=4, gluon=False),
    # session 49: one row a thread-block cluster of 2 / 4 / 8 CTAs (gluon_select's CTAS), warps a CTA by default or 8
    "v4_gluon_c1": dict(version=4, gluon=True, gluon_ctas=1),
    "v4_gluon_c2": dict(version=4, gluon=True, gluon_ctas=2),
    "v4_gluon_c4": dict(version=4, gluon=True, gluon_ctas=4),
    "v4_gluon_c8": dict(version=4, gluon=True, gluon_ctas=8),
    "v4_gluon_c2_w8": dict(version=4, gluon=True, gluon_ctas=2, gluon_warps=8),
    "v4_gluon_c4_w4": dict(version=4, gluon=True, gluon_ctas=4, gluon_warps=4),
    "v4_gluon_c4_w16": dict(version=4, gluon=True, gluon_ctas=4, gluon_warps=16),
    "v4_gluon_c8_w8": dict(version=4, gluon=True, gluon_ctas=8, gluon_warps=8),
    # session 50: the same clusters past gluon_select.MAX_CLUSTER_CAP (cluster_cap: DSATTN_TOPK_CLUSTER_CAP for the
    # call; up to MAX_CTA_COLS columns a CTA), for rows of 8193-65536 columns at more rows than default_ctas' one wave
    "v4_gluon_c2x": dict(version=4, gluon=True, gluon_ctas=2, cluster_cap=65536),
    "v4_gluon_c4x": dict(version=4, gluon=True, gluon_ctas=4, cluster_cap=65536),
    "v4_gluon_c8x": dict(version=4, gluon=True, gluon_ctas=8, cluster_cap=65536),
}
STAGE_CUTS = {"v4_stop1_tau": dict(D2, stop=1),
              "v4_stop2_filter": dict(D2, stop=2),
              "v4_prev_stop1_tau": dict(PREV, stop=1),
              "v4_early_tau_stop1": dict(D2, tau_early=True, stop=1),
              "v4_fuse_early_stop2": dict(D2, fuse_tau=True, tau_early=True, stop=2),
              # session 41: the default's stages at few rows (several filter programs a row: tau has its own launch)
              "v4_stop1": dict(version=4, stop=1),
              "v4_stop2": dict(version=4, stop=2),
              # session 43: the one-launch path's cuts (after the threshold; after the arrival, before the select)
              "v4_fused_stop1": dict(version=4, fused=True, stop=1),
              "v4_fused_stop2": dict(version=4, fused=True, stop=2),
              # session 48: the Gluon select's cuts (after lo / hi; after the passes, before the emit)
              "v4_gluon_w16_stop1": dict(version=4, gluon=True, gluon_warps=16, stop=1),
              "v4_gluon_w16_stop2": dict(version=4, gluon=True, gluon_warps=16, stop=2),
              # session 49: the same cuts with one row over a cluster of 4 CTAs
              "v4_gluon_c4_stop1": dict(version=4, gluon=True, gluon_ctas=4, stop=1),
              "v4_gluon_c4_stop2": dict(version=4, gluon=True, gluon_ctas=4, stop=2)}
SHAPES = [(4096, 65536), (1024, 131072), (128, 65536)]
TIES_VARIANTS = ["v4", "v4_prev"]


def launch_topk(*args, cluster_cap=None, **kw):
    """select.launch_topk, with a variant's cluster_cap as DSATTN_TOPK_CLUSTER_CAP for the call
    (gluon_select.cluster_cap)."""
    if cluster_cap is None:
        return _launch_topk(*args, **kw)
    old = os.environ.get("DSATTN_TOPK_CLUSTER_CAP")
    os.environ["DSATTN_TOPK_CLUSTER_CAP"] = str(cluster_cap)
    try:
        return _launch_topk(*args, **kw)
    finally:
        if old is None:
            del os.environ["DSATTN_TOPK_CLUSTER_CAP"]
        else:
            os.environ["DSATTN_TOPK_CLUSTER_CAP"] = old


def _scratch(rows, width, dev):
    (shape, dtype), = topk_scratch_spec(rows, width, K)
    return torch.empty(shape, dtype=dtype, device=dev)


DEV = "cuda"


def _pick(names, only):
    return [n for n in names if n in only] if only else list(names)


def warm(part: str, only=None, shapes=None) -> None:
    """Compile every n-th variant from the i-th: on 8 x 65536 rows with one and four filter programs a row, or
    (shapes) on each of those shapes with the variant's own knobs, so that the timed run compiles nothing."""
    i, n = (int(v) for v in part.split("/"))
    dev = DEV
    names = _pick(list(VARIANTS) + list(STAGE_CUTS), only)
    for name in names[i::n]:
        kw = dict(VARIANTS.get(name) or STAGE_CUTS[name])
        t0 = time.perf_counter()
        if shapes:
            runs = [(r, w, {}) for r, w in shapes]
        else:
            runs = [(8, 65536, {} if segs is None else {"segs": segs})
                    for segs in ((1, 4) if kw["version"] == 4 and "segs" not in kw else (None,))]
        for rows, width, extra in runs:
            x = torch.randn(rows, width, device=dev)
            lengths = torch.full((rows,), width, dtype=torch.int32, device=dev)
            if not shapes:
                lengths[0] = 1000  # a row that fits the capacity
            out = torch.empty(rows, K, dtype=torch.int32, device=dev)
            scratch = _scratch(rows, width, dev)
            try:
                launch_topk(x, lengths, K, out, scratch, **kw, **extra)
            except Exception as e:  # noqa: BLE001 - the timed run reports it again
                print(f"warm {name} {rows}x{width} {extra}: {type(e).__name__}: {str(e)[:300]}", flush=True)
        torch.cuda.synchronize()
        print(f"warm {name}: {time.perf_counter() - t0:.1f} s", flush=True)


def _inputs(rows, width, dist, dev, gen):
    if dist == "ties":
        x = torch.randint(0, 64, (rows, width), device=dev, generator=gen).float()
    else:
        x = torch.randn(rows, width, device=dev, generator=gen)
    if dist == "ragged":
        lengths = torch.randint(1, width + 1, (rows,), device=dev, dtype=torch.int32, generator=gen)
    else:
        lengths = torch.full((rows,), width, dtype=torch.int32, device=dev)
    return x, lengths


def _sets_equal(a, b):
    return (a.sort(dim=1).values == b.sort(dim=1).values).all(dim=1)


def bench(args) -> int:
    dev = DEV
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)
    ceil = ceilings()  # floor_ms: the logits read once at this GPU's HBM ceiling (the H200's on an H200)
    hbm_tbs = ceil["hbm_bytes_per_s"] / 1e12
    doc = dict(provenance=provenance(), meta=dict(k=K, rounds=args.rounds, hbm_tbs=hbm_tbs, ceilings=ceil,
                                                   variants={k: str(v) for k, v in VARIANTS.items()},
                                                   stage_cuts={k: str(v) for k, v in STAGE_CUTS.items()},
                                                   timing="triton do_bench medians, alternated with torch.topk"),
               rows=[])

    def save():
        if args.out:
            with open(args.out, "w") as f:
                json.dump(doc, f, indent=1)

    cases = [(r, w, d) for r, w in SHAPES for d in ("full", "ragged")] + [(*SHAPES[0], "ties")]
    if args.quick:
        cases = cases[:1]
    if args.cases:
        cases = [c for c in cases if f"{c[0]}x{c[1]}:{c[2]}" in args.cases.split(",")]
    only = args.variants.split(",") if args.variants else None
    for rows, width, dist in cases:
        n_copies = max(1, min(8, (256 << 20) // (rows * width * 4)))
        xs, ls = zip(*[_inputs(rows, width, dist, dev, gen) for _ in range(n_copies)])
        x, lengths = xs[0], ls[0]
        out = torch.empty(rows, K, dtype=torch.int32, device=dev)
        scratch = _scratch(rows, width, dev)
        masked = [xi.masked_fill(~(torch.arange(width, device=dev)[None, :] < li[:, None].long()), float("-inf"))
                  for xi, li in zip(xs, ls)] if dist == "ragged" else list(xs)
        if dist == "full":
            want = torch.topk(x, K, dim=1).indices.int()
        else:
            want = topk_reference(x, torch.zeros_like(lengths), lengths, K)
        gb = float(lengths.sum()) * 4 / 1e9
        it = {"i": 0}

        def rotate():
            it["i"] = (it["i"] + 1) % n_copies
            return it["i"]

        def peer():
            j = rotate()
            return torch.topk(masked[j], K, dim=1)

        names = TIES_VARIANTS if dist == "ties" else list(VARIANTS) + (list(STAGE_CUTS) if rows == SHAPES[0][0] else [])
        names = _pick(names, only)
        results = {}
        for name in names:
            kw = VARIANTS.get(name) or STAGE_CUTS[name]
            row = dict(rows=rows, width=width, dist=dist, variant=name, config=str(kw), input_copies=n_copies)
            try:
                out.fill_(-7)
                launch_topk(x, lengths, K, out, scratch, **kw)
                if dev == "cuda":
                    torch.cuda.synchronize()
                if not kw.get("stop"):
                    bad = ~_sets_equal(out, want)
                    row["rows_with_other_set"] = int(bad.sum())
                    if row["rows_with_other_set"]:
                        row["first_bad_rows"] = bad.nonzero()[:5, 0].tolist()
                    first = out.clone()  # the same call again: the same columns in the same order?
                    launch_topk(x, lengths, K, out, scratch, **kw)
                    row["same_order_twice"] = bool(torch.equal(out, first))

                def ours(kw=kw):
                    j = rotate()
                    launch_topk(xs[j], ls[j], K, out, scratch, **kw)

                results[name] = (row, ours)
            except Exception as e:  # noqa: BLE001 - keep going past a variant that fails
                row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
                doc["rows"].append(row)
                print(f"{rows}x{width} {dist} {name}: {row['error']}", flush=True)
        # timing: every variant and torch.topk alternately, `rounds` rounds, medians
        times = {name: [] for name in results}
        peer_times = []
        for _ in range(args.rounds):
            peer_times.append(time_ms(peer, warmup_ms=10, rep_ms=args.rep_ms))
            for name, (row, fn) in results.items():
                times[name].append(time_ms(fn, warmup_ms=10, rep_ms=args.rep_ms))
        t_peer = sorted(peer_times)[len(peer_times) // 2]
        # few rows: launch gaps matter (v4 is three launches), so also time CUDA-graph replays, as a
        # serving engine's decode step would run them
        graph_ms = {}
        if dev == "cuda" and rows <= 1024 and dist != "ties":
            fns = [("torch.topk", lambda: torch.topk(masked[0], K, dim=1))]
            fns += [(n, lambda n=n: launch_topk(x, lengths, K, out, scratch, **(VARIANTS.get(n) or STAGE_CUTS[n])))
                    for n in results]
            for name, fn in fns:
                try:
                    fn()
                    torch.cuda.synchronize()
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        fn()
                    graph_ms[name] = time_ms(g.replay, warmup_ms=10, rep_ms=args.rep_ms)
                except Exception as e:  # noqa: BLE001
                    graph_ms[name] = f"{type(e).__name__}: {str(e)[:200]}"
        for name, (row, fn) in results.items():
            ts = sorted(times[name])
            ms = ts[len(ts) // 2]
            row.update(ms=ms, ms_all=ts, torch_topk_ms=t_peer, torch_topk_all=sorted(peer_times),
                       speedup_vs_torch=t_peer / ms, read_tbs=gb / ms, floor_ms=gb / hbm_tbs)
            if graph_ms:
                row.update(graph_ms=graph_ms.get(name), torch_topk_graph_ms=graph_ms.get("torch.topk"))
            doc["rows"].append(row)
            g = row.get("graph_ms")
            gtxt = f"  graph {g:7.4f} vs {row['torch_topk_graph_ms']:7.4f}" if isinstance(g, float) and \
                isinstance(row.get("torch_topk_graph_ms"), float) else ""
            print(f"{rows:5d}x{width:<6d} {dist:6s} {name:16s} {ms:8.4f} ms  torch {t_peer:7.4f}  "
                  f"x{t_peer / ms:5.2f}  bad={row.get('rows_with_other_set')} same order twice "
                  f"{row.get('same_order_twice')}{gtxt}", flush=True)
        save()
        # dropped (not del: the timing closures above name them) before the next case allocates
        xs = ls = masked = x = lengths = out = scratch = want = None
        torch.cuda.empty_cache()
    save()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warm", default=None, help="i/n: compile every n-th variant from the i-th, then exit")
    p.add_argument("--out", default=None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rep-ms", type=float, default=40.0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--variants", default=None, help="comma list: run only these variants / stage cuts")
    p.add_argument("--cases", default=None, help="comma list of RxW:dist (e.g. 4096x65536:full)")
    p.add_argument("--shapes", default=None,
                   help="comma list of RxW replacing the default shapes (e.g. 1x4097,32x65536)")
    p.add_argument("--k", type=int, default=None, help="k (default 2048)")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the CPU interpreter (checks the script)")
    args = p.parse_args(argv)
    global SHAPES, DEV, K
    if args.k:
        K = args.k
    if args.shapes:
        SHAPES = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    if args.cpu_smoke:
        from dsattn.ops._triton import allow_runtime_loop_bounds
        allow_runtime_loop_bounds()
        DEV, K, SHAPES = "cpu", 16, [(6, 700), (3, 1100), (2, 500)]
        args.rounds, args.rep_ms = 1, 1.0
        return bench(args)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    if args.warm:
        warm(args.warm, args.variants.split(",") if args.variants else None, SHAPES if args.shapes else None)
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(args.out)) if args.out else ".", exist_ok=True)
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
