"""``dsattn bench kernels --op sparse_mla``: sparse MLA decode and prefill against the floor and FlashMLA.

Cases (BENCHMARKS.md):

    decode   paged cache of 131072 slots (block 64), fp8_ds_mla (D_qk 576) and fp8_ds_mla_nope (512),
             topk 2048, `uniform` indices (each token's top-k of random scores over all slots), one query
             token per request, tokens 512 and 2048. FlashMLA runs 64 or 128 heads only: fewer heads are
             padded to 64 (the padding copy is not timed). --decode-context C gives each request its own C
             slots instead (no row gathered twice a call; decode_case says why both exist).
    prefill  bf16 flat KV of s_kv 16384, D_qk 576, topk 2048, `overlap` indices (queries are the last s_q
             positions; row t takes the top-k of shared[n] + 0.5 * noise[t, n] over its causal prefix),
             s_q 1024 and 8192. FlashMLA native and padded to 64 heads.

Every row gives the median time (CUDA events, L2 flushed between calls), TFLOP/s of useful work
(2 * tokens * heads * valid_topk * (D_qk + 512)), GB/s of gathered rows, the floor (decode: KV rows + q
+ out at the HBM ceiling; prefill: useful FLOPs at the bf16 GEMM ceiling or its distinct KV bytes at the HBM
ceiling, whichever is longer; ceilings: common.ceilings, the H200's 4.27 TB/s and 680 TFLOP/s on an H200, measured
in the run on any other GPU, recorded in the file's meta) and, where FlashMLA ran, its time and the speedup
(FlashMLA ms / dsattn ms). One output of each case is checked against FlashMLA's (max abs difference reported).

    PYTHONPATH=src:.peer python -m dsattn.cli bench kernels --op sparse_mla --out $OUT
    ... --op sparse_mla --quick            # 512 tokens / s_q 1024 only
    ... --op sparse_mla --impl triton,gluon   # both few-head kernels side by side (column `kernel`)

Tile configs are tuned with bench/mla_sweep.py (kernel development), not here.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time

import torch

from ..formats import KVLayout, pack_latent_rows
from .common import ceilings, format_table, graph_replay, time_ms, warm_up_gpu, write_results

DECODE_SLOTS = 131072
DECODE_BLOCK = 64
PREFILL_KV = 16384
TOPK = 2048


# ---------------------------------------------------------------------------------------------------
# index distributions
# ---------------------------------------------------------------------------------------------------

def uniform_indices(t: int, num_slots: int, topk: int, device, seed: int = 0) -> torch.Tensor:
    """[t, topk] int32: each row the top-k of fresh random scores over all slots (distinct, random order)."""
    g = torch.Generator(device=device).manual_seed(seed)
    out = torch.empty((t, topk), dtype=torch.int32, device=device)
    chunk = max(1, (1 << 27) // num_slots)
    for s in range(0, t, chunk):
        e = min(t, s + chunk)
        out[s:e] = torch.rand((e - s, num_slots), generator=g, device=device).topk(topk, dim=1).indices
    return out


def overlap_indices(s_q: int, s_kv: int, topk: int, device, seed: int = 0, noise: float = 0.5) -> torch.Tensor:
    """[s_q, topk] int32 for the last s_q positions of an s_kv sequence: row t takes the top-k of
    shared[n] + noise * z[t, n] over n <= its position (-1 past a short prefix)."""
    g = torch.Generator(device=device).manual_seed(seed)
    shared = torch.randn(s_kv, generator=g, device=device)
    out = torch.empty((s_q, topk), dtype=torch.int32, device=device)
    n = torch.arange(s_kv, device=device)
    chunk = max(1, (1 << 27) // s_kv)
    for s in range(0, s_q, chunk):
        e = min(s_q, s + chunk)
        pos = torch.arange(s_kv - s_q + s, s_kv - s_q + e, device=device)
        score = shared[None] + noise * torch.randn((e - s, s_kv), generator=g, device=device)
        score = score.masked_fill(n[None] > pos[:, None], float("-inf"))
        val, idx = score.topk(topk, dim=1)
        out[s:e] = torch.where(torch.isinf(val), -1, idx).to(torch.int32)
    return out


# ---------------------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Case:
    kind: str  # "decode" | "prefill"
    layout: KVLayout
    tokens: int
    heads: int
    d_qk: int
    q: torch.Tensor
    kv: torch.Tensor  # decode: [blocks, block, row]; prefill: [s_kv, D_qk]
    indices: torch.Tensor
    sm_scale: float
    dist: str

    @property
    def valid(self) -> int:
        return int((self.indices >= 0).sum())

    def flops(self) -> float:
        return 2.0 * self.heads * self.valid * (self.d_qk + 512)

    def gathered_bytes(self) -> float:
        return float(self.valid) * self.layout.row_bytes(self.d_qk)

    def floor_ms(self) -> float:
        """The case's floor at this GPU's ceilings (common.ceilings)."""
        ceil = ceilings()
        if self.kind == "decode":
            io = self.q.numel() * 2 + self.tokens * self.heads * 512 * 2
            return (self.gathered_bytes() + io) / ceil["hbm_bytes_per_s"] * 1e3
        distinct = float(torch.unique(self.indices[self.indices >= 0]).numel()) * self.layout.row_bytes(self.d_qk)
        return max(self.flops() / ceil["bf16_flops"], distinct / ceil["hbm_bytes_per_s"]) * 1e3


def _latents(n: int, d_qk: int, device, seed: int) -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn((n, d_qk), generator=g, device=device) * (0.5 + torch.rand(d_qk, generator=g, device=device))


def _q(t: int, h: int, d_qk: int, device, seed: int) -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed(seed + 1)
    return (torch.randn((t, h, d_qk), generator=g, device=device) * 0.5).to(torch.bfloat16)


_CACHE: dict = {}


def _bad_context(context: int) -> bool:
    """A per-request context decode_case cannot draw a top-k from: not 0, and under topk or not whole blocks."""
    return bool(context) and (context < TOPK or context % DECODE_BLOCK != 0)


def decode_case(tokens: int, heads: int, layout: str, device, d_qk: int | None = None, context: int = 0,
                ascending: bool = False) -> Case:
    """context 0: every token's top-k over one shared pool of DECODE_SLOTS slots (as BENCHMARKS.md's peer table was
    measured; at 512 tokens each slot is gathered ~8 times a call, at 2048 ~32, and the 86 / 69 MB pool is not much
    larger than the H200's 50 MB L2). context C > 0: request t owns slots [t * C, (t + 1) * C) and takes its top-k
    over those alone, so no row is gathered twice in a call (BENCHMARKS.md's `uniform`: "no reuse between tokens";
    decode: "each request its own context"). The big cache repeats the pool's rows (the same values at other
    addresses: only the addresses matter for speed, and every implementation reads the same cache). ascending: each
    token's entries sorted by slot (the order dsattn's top-k emits positions in; the default is the random order of a
    top-k by score)."""
    layout = KVLayout(layout)
    d_qk = d_qk or (512 if layout is KVLayout.FP8_DS_MLA_NOPE else 576)
    if _bad_context(context):
        raise ValueError(f"context: {context} slots a request; needs >= topk {TOPK} and a multiple of {DECODE_BLOCK}")
    key = ("decode-kv", layout, d_qk)
    if key not in _CACHE:
        lat = _latents(DECODE_SLOTS, d_qk, device, seed=1)
        rows = pack_latent_rows(lat, layout) if layout.is_fp8 else lat.to(torch.bfloat16)
        _CACHE[key] = rows.view(DECODE_SLOTS // DECODE_BLOCK, DECODE_BLOCK, rows.shape[1])
    kv = _CACHE[key]
    if context:
        big = ("decode-kv-own", layout, d_qk, tokens, context)
        if big not in _CACHE:
            # one own-context cache at a time: each is tokens x context rows (22 GB at 2048 x 16384 fp8_ds_mla); the
            # decode table at C 16384 peaked at 50.19 GB allocated keeping every case's, 22.54 GB now (H200,
            # bench/gpu_s33_cache.sh). A Case built earlier keeps its own rows alive while its caller holds it.
            for k in [k for k in _CACHE if k[0] == "decode-kv-own"]:
                del _CACHE[k]
            blocks = tokens * context // DECODE_BLOCK  # exactly these (a repeat then a slice would keep the rest alive)
            _CACHE[big] = kv[torch.arange(blocks, device=kv.device) % kv.shape[0]]
        kv = _CACHE[big]
    ikey = ("uniform", tokens, context, ascending)
    if ikey not in _CACHE:
        if context:
            own = uniform_indices(tokens, context, TOPK, device, seed=tokens)
            base = torch.arange(tokens, device=device, dtype=torch.int32)[:, None] * context
            idx = own + base
        else:
            idx = uniform_indices(tokens, DECODE_SLOTS, TOPK, device, seed=tokens)
        _CACHE[ikey] = idx.sort(dim=1).values if ascending else idx
    return Case("decode", layout, tokens, heads, d_qk, _q(tokens, heads, d_qk, device, heads), kv,
                _CACHE[ikey], 576 ** -0.5 if d_qk == 576 else 512 ** -0.5,
                (f"uniform, own {context} slots a request" if context else "uniform") + (", ascending" if ascending else ""))


def prefill_case(s_q: int, heads: int, device, d_qk: int = 576, s_kv: int = PREFILL_KV) -> Case:
    """The prefill rows' case: s_q query tokens at the end of an s_kv-token bf16 sequence, `overlap` indices (s_kv other
    than PREFILL_KV: the rows over a longer context, not issue 3's)."""
    key = ("prefill-kv", d_qk, s_kv)
    if key not in _CACHE:
        _CACHE[key] = _latents(s_kv, d_qk, device, seed=2).to(torch.bfloat16)
    ikey = ("overlap", s_q, s_kv)
    if ikey not in _CACHE:
        _CACHE[ikey] = overlap_indices(s_q, s_kv, TOPK, device, seed=s_q)
    return Case("prefill", KVLayout.BF16, s_q, heads, d_qk, _q(s_q, heads, d_qk, device, heads), _CACHE[key],
                _CACHE[ikey], d_qk ** -0.5, "overlap" if s_kv == PREFILL_KV else f"overlap, s_kv {s_kv}")


# ---------------------------------------------------------------------------------------------------
# the implementations
# ---------------------------------------------------------------------------------------------------

def ours(case: Case, variant: str | None = None, config=None, splits: int | None = None, rows: bool = False):
    """A callable running dsattn on the case into preallocated outputs (config: a launch.TileConfig to
    bypass the public function and the tuned defaults; splits: force split-K in decode; rows: a prefill with
    sparse_mla_prefill's row_scratch, prefill_row_spec over the case's rows, allocated once)."""
    from ..ops.sparse_mla import (decode_scratch_spec, prefill_row_spec, prefill_scratch_spec, prefill_split_spec,
                                  sparse_mla_decode, sparse_mla_prefill)
    from ..ops.sparse_mla.dispatch import DEFAULT_SM_COUNT, decode_splits, default_variant
    from ..ops._triton import sm_count
    from ..ops.sparse_mla.launch import run_attention
    t, h = case.tokens, case.heads
    out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=case.q.device)
    lse = torch.empty((t, h), dtype=torch.float32, device=case.q.device)
    sm = sm_count(case.q.device, DEFAULT_SM_COUNT)
    variant = variant or default_variant(case.kind, h, t, sm)
    if case.kind == "prefill":
        if config is not None:
            return lambda: run_attention(case.q, case.kv, case.layout, case.indices, case.sm_scale, None, out, lse,
                                         variant, config=config), out, lse
        # the union lists' scratch allocated once, as an engine sizes it (prefill_scratch_spec: [] without grouping;
        # DSATTN_PREFILL_SCRATCH_MIB, read here, sets its chunk). Tables up to session 17 let each call allocate it
        # (scratch=None, the caching allocator's reuse); `bench ab` still does, so that an arm's env can change it.
        # The split partials too (prefill_split_spec: [] unless a short prefill splits; DSATTN_PREFILL_SPLITS, read
        # here, forces the count).
        spec = prefill_scratch_spec(t, h, case.indices.shape[1]) if variant == "native" else []
        pscratch = [torch.empty(s, dtype=dt, device=case.q.device) for s, dt in spec] or None
        sscratch = [torch.empty(s, dtype=dt, device=case.q.device)
                    for s, dt in prefill_split_spec(t, h, case.indices.shape[1], variant, sm)] or None
        rscratch = [torch.empty(s, dtype=dt, device=case.q.device)
                    for s, dt in prefill_row_spec(case.kv.shape[0], case.kv.shape[1])] if rows else None
        return lambda: sparse_mla_prefill(case.q, case.kv, case.indices, case.sm_scale, out=out, lse=lse,
                                          variant=variant, scratch=pscratch, split_scratch=sscratch,
                                          row_scratch=rscratch), out, lse
    scratch = [torch.empty(s, dtype=dt, device=case.q.device)
               for s, dt in decode_scratch_spec(t, h, case.indices.shape[1], variant, case.layout, sm)]
    if config is not None:
        if splits is None:
            splits = decode_splits(t, h, case.indices.shape[1], variant, sm)
        else:
            scratch = [torch.empty((t, splits, h, 512), dtype=torch.float32, device=case.q.device),
                       torch.empty((t, splits, h), dtype=torch.float32, device=case.q.device)] if splits > 1 else []
        flat = case.kv.flatten(0, 1)
        return lambda: run_attention(case.q, flat, case.layout, case.indices, case.sm_scale, None, out, lse, variant,
                                     splits, *(scratch or [None, None]), config=config), out, lse
    return lambda: sparse_mla_decode(case.q, case.kv, case.indices, case.sm_scale, out=out, lse=lse, variant=variant,
                                     scratch=scratch or None), out, lse


def _peers():
    try:
        import peers  # noqa: F401  (.peer/ on PYTHONPATH)
        return peers
    except Exception as e:  # noqa: BLE001 - any failure means: no peer in this run
        print(f"# FlashMLA not available ({type(e).__name__}: {e}); dsattn only", file=sys.stderr)
        return None


def _pad_heads(q: torch.Tensor, heads: int) -> torch.Tensor:
    if q.shape[1] == heads:
        return q
    qp = torch.zeros((q.shape[0], heads, q.shape[2]), dtype=q.dtype, device=q.device)
    qp[:, : q.shape[1]] = q
    return qp


def flashmla(case: Case, peers, heads: int):
    """A callable running FlashMLA on the case with `heads` heads (q zero-padded beforehand), and a function
    returning its output for the real heads; None where FlashMLA cannot run the case."""
    if peers is None:
        return None
    q = _pad_heads(case.q, heads)
    if case.kind == "prefill":
        kv = case.kv[:, None]
        idx = case.indices[:, None]
        res = {}

        def fn():
            res["o"] = peers.flashmla_sparse_prefill(q, kv, idx, case.sm_scale, 512)[0]
        return fn, lambda: res["o"][:, : case.heads]
    if case.layout is not KVLayout.FP8_DS_MLA or heads not in (64, 128):
        return None
    meta = peers.flashmla().get_mla_metadata()[0]
    q4 = q[:, None]
    cache = case.kv[:, :, None]
    idx = case.indices[:, None]
    res = {}

    def fn():
        res["o"] = peers.flashmla_sparse_decode_fp8(q4, cache, idx, case.sm_scale, 512, meta=meta)[0]
    return fn, lambda: res["o"][:, 0, : case.heads]


# ---------------------------------------------------------------------------------------------------
# measuring
# ---------------------------------------------------------------------------------------------------

def _row(case: Case, impl: str, ms: float) -> dict:
    floor = case.floor_ms()
    return {
        "kind": case.kind, "layout": case.layout.value, "dist": case.dist, "tokens": case.tokens,
        "heads": case.heads, "d_qk": case.d_qk, "topk": case.indices.shape[1], "impl": impl, "ms": ms,
        "tflops": case.flops() / ms / 1e9, "gbps": case.gathered_bytes() / ms / 1e6,
        "floor_ms": floor, "pct_floor": 100.0 * floor / ms,
    }


def _kernel_record(case: Case, variant: str) -> dict:
    """Which kernel the public function launches for this case now, and its launch configuration."""
    from ..ops.sparse_mla.launch import default_config, gluon_config, kernel_name
    flat = case.kv.flatten(0, 1) if case.kind == "decode" else case.kv
    kernel = kernel_name(case.q, flat, case.layout, variant, prefill=case.kind == "prefill")
    if kernel == "gluon_prefill":
        from ..ops.sparse_mla.gluon_prefill import prefill_config
        cfg = prefill_config(case.heads, case.d_qk)
    elif kernel == "gluon64":
        from ..ops.sparse_mla.gluon64 import g64_config
        cfg = g64_config(case.layout, case.heads, case.d_qk)
    elif kernel == "gluon_ws":
        from ..ops.sparse_mla.gluon_ws import ws_config
        cfg = ws_config(case.layout, case.heads, case.d_qk)
    elif kernel == "gluon_rx":
        from ..ops.sparse_mla.gluon_rx import rx_config
        cfg = rx_config(case.layout, case.heads, case.d_qk)
    elif kernel == "gluon":
        cfg = gluon_config(case.layout, case.heads, case.d_qk)
    else:
        cfg = default_config(variant, case.heads, case.layout)
    return {"kernel": kernel, "config": dataclasses.asdict(cfg)}


# the DSATTN_SPARSE_MLA_IMPL value that runs a kernel launch.kernel_name names, where the two differ
IMPL_OF_KERNEL = {"gluon_rxb": "gluon_rx"}  # gluon_rx runs gluon_rxb over bf16 rows at 32-head programs (session 61)


def measure_case(case: Case, peers, variants, rep_ms: float = 100, impls=("auto",), rounds: int = 3,
                 graph: bool = False) -> list[dict]:
    """dsattn (each variant, under each DSATTN_SPARSE_MLA_IMPL of `impls`) and FlashMLA (native / padded
    to 64) on one case. Every implementation is built and run once (compiles) first; then `rounds` rounds time
    each in turn (alternating, BENCHMARKS.md), and a row's ms is the median of its rounds (all in ms_rounds).
    One timing each, in order, made the first row of a process read slow (session 10-11: 8 heads at 512 tokens
    0.245-0.248 ms in the table vs 0.224 alone; notes/sparse_mla.md). graph: time CUDA-graph replays of every
    implementation (GPU time without the host's checks, dispatch and launches, as a serving engine replays a captured
    step); eager Python calls of dsattn at 8 heads are host-bound (bench/graph_check.py, notes/sparse_mla.md)."""
    saved = os.environ.get("DSATTN_SPARSE_MLA_IMPL")

    def set_impl(impl):
        if impl is None:
            if saved is None:
                os.environ.pop("DSATTN_SPARSE_MLA_IMPL", None)
            else:
                os.environ["DSATTN_SPARSE_MLA_IMPL"] = saved
        else:
            os.environ["DSATTN_SPARSE_MLA_IMPL"] = impl

    entries = []  # (impl env or None, fn, row label, extra row fields, peer name, peer output getter)
    try:
        for impl in impls:
            set_impl(impl)
            # session 68: a prefill's first variant also with row_scratch (the rows converted once, the kernel
            # without its conversion pass where dispatch.prefill_converts_rows says so; workspace: the rows' size;
            # since session 69 at 1-32 heads gluon_pair over them, gluon_prefill.rows_config)
            runs = [(v, False) for v in variants] + ([(variants[0], True)] if case.kind == "prefill" and variants
                                                     else [])
            for variant, rows in runs:
                rec = _kernel_record(case, variant)
                if impl != "auto" and IMPL_OF_KERNEL.get(rec["kernel"], rec["kernel"]) != impl:
                    continue  # this variant does not have that kernel (64-head programs are Triton only)
                label = f"dsattn:{variant}" + ("+rows" if rows else "")
                fn, _, _ = ours(case, variant, rows=rows)
                fn()
                if graph:
                    try:
                        fn = graph_replay(fn)
                    except Exception as e:  # noqa: BLE001 - a call that cannot be captured is reported, not fatal
                        print(f"# {label} {case.kind} h={case.heads}: no CUDA graph ({type(e).__name__}: "
                              f"{str(e)[:120]})", file=sys.stderr)
                        continue
                entries.append((impl, fn, label, rec, None, None))
        set_impl(None)
        widths = sorted({case.heads, max(case.heads, 64)})  # native, and padded to 64 below 64 heads
        for w in widths:
            try:
                built = flashmla(case, peers, w)
                if built is None:
                    continue
                fn, get = built
                fn()
                torch.cuda.synchronize()
                if graph and case.kind != "decode":
                    # FlashMLA's sparse fp8 decode captures but its replays fail with cudaErrorInvalidAddressSpace
                    # (H200, session 12: bench/logs/s12_graph.log; dsattn's decode replays run), and the error
                    # ended that run: its decode is timed eager (not host-bound at these sizes)
                    fn = graph_replay(fn)
            except Exception as e:  # noqa: BLE001 - a peer that refuses a shape is reported, not fatal
                print(f"# FlashMLA {case.kind} h={case.heads} as {w}: {type(e).__name__}: {str(e)[:120]}",
                      file=sys.stderr)
                continue
            name = "native" if w == case.heads else f"pad{w}"
            entries.append((None, fn, f"flashmla:{name}", {"eager": True} if graph and case.kind == "decode" else {},
                            name, get))
        times = [[] for _ in entries]
        windows = [[] for _ in entries]  # wall-clock (start, end) of each timing, to join with a clock log
        for _ in range(max(1, rounds)):
            for i, (impl, fn, *_rest) in enumerate(entries):
                set_impl(impl)
                t_start = time.time()
                times[i].append(time_ms(fn, rep_ms=rep_ms))
                windows[i].append((t_start, time.time()))
    finally:
        set_impl(None)
    rows, peer_ms = [], {}
    for (impl, fn, label, rec, peer, get), ts, wins in zip(entries, times, windows):
        ms = float(statistics.median(ts))
        row = {**_row(case, label, ms), **rec, "ms_rounds": ts, "round_windows": wins}
        if peer is not None:
            peer_ms[peer] = ms
            ofn, out, _ = ours(case, variants[0] if variants else None)
            fn()
            ofn()
            row["max_abs_vs_dsattn"] = float((get().float() - out.float()).abs().max())
        rows.append(row)
    if peer_ms:
        best_peer = min(peer_ms.values())
        for r in rows:
            if r["impl"].startswith("dsattn"):
                r["flashmla_ms"] = best_peer
                r["speedup"] = best_peer / r["ms"]
    return rows


def _variants(kind: str, heads: int) -> list[str]:
    from ..ops.sparse_mla import decode_variants, prefill_variants
    return prefill_variants(heads) if kind == "prefill" else decode_variants(heads)


def run_table(args, device, peers) -> list[dict]:
    rows = []
    for kind in args.cases:
        sizes = args.tokens or ([512] if args.quick else [512, 2048]) if kind == "decode" else \
            args.tokens or ([1024] if args.quick else [1024, 8192])
        layouts = [KVLayout.FP8_DS_MLA, KVLayout.FP8_DS_MLA_NOPE] if kind == "decode" else [KVLayout.BF16]
        for size in sizes:
            for layout in layouts:
                for h in args.heads:
                    case = decode_case(size, h, layout, device, context=args.decode_context,
                                       ascending=args.ascending) if kind == "decode" \
                        else prefill_case(size, h, device, s_kv=args.prefill_kv)
                    t0 = time.time()
                    rows += measure_case(case, peers, _variants(kind, h), rep_ms=args.rep_ms, impls=args.impl,
                                         rounds=args.rounds, graph=args.graph)
                    del case  # its rows may go before the next case builds its own (decode_case)
                    print(f"# {kind} {layout.value} tokens={size} heads={h}: {time.time() - t0:.1f}s", file=sys.stderr)
    _nope_vs_fp8(rows)
    return rows


def _nope_vs_fp8(rows: list[dict]) -> None:
    """fp8_ds_mla_nope rows get `vs_fp8_ds_mla`: dsattn fp8_ds_mla ms / this ms (same tokens, heads, variant)."""
    def key(r):
        return r["tokens"], r["heads"], r["impl"], r.get("kernel")
    ref = {key(r): r["ms"] for r in rows if r["layout"] == "fp8_ds_mla"}
    for r in rows:
        if r["layout"] == "fp8_ds_mla_nope" and key(r) in ref:
            r["vs_fp8_ds_mla"] = ref[key(r)] / r["ms"]


COLUMNS = ["kind", "layout", "tokens", "heads", "impl", "kernel", "ms", "tflops", "gbps", "pct_floor", "flashmla_ms", "speedup",
           "vs_fp8_ds_mla", "max_abs_vs_dsattn"]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="dsattn bench kernels --op sparse_mla", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default="decode,prefill", help="comma list of decode, prefill")
    p.add_argument("--heads", default="8,16,32,64,128")
    p.add_argument("--tokens", default=None, help="comma list (decode tokens or prefill s_q); default per case")
    p.add_argument("--quick", action="store_true", help="decode 512 tokens, prefill s_q 1024")
    p.add_argument("--no-peer", action="store_true", help="skip FlashMLA")
    p.add_argument("--impl", default="auto",
                   help="comma list of DSATTN_SPARSE_MLA_IMPL values to time dsattn under (auto, triton, gluon, "
                        "gluon_ws, gluon_rx, gluon64, gluon_prefill: the grouped bf16 prefill kernel); "
                        "a forced kernel that a variant lacks is skipped")
    p.add_argument("--decode-context", type=int, default=0,
                   help="decode: slots each request owns (its top-k is drawn from those alone: no row gathered twice "
                        "a call); 0 (default) draws every request's top-k from one shared pool of "
                        f"{DECODE_SLOTS} slots")
    p.add_argument("--prefill-kv", type=int, default=PREFILL_KV,
                   help=f"prefill: the sequence's tokens (the flat source's rows; default {PREFILL_KV}, the rows')")
    p.add_argument("--ascending", action="store_true",
                   help="decode: each token's entries sorted by slot (as dsattn's top-k emits them) instead of the "
                        "random order of a top-k by score")
    p.add_argument("--rep-ms", type=float, default=100)
    p.add_argument("--rounds", type=int, default=3,
                   help="timings of each implementation, alternating; a row reports their median")
    p.add_argument("--graph", action="store_true",
                   help="time CUDA-graph replays (GPU time without host work) instead of eager calls; FlashMLA's "
                        "decode stays eager (its replays fail with cudaErrorInvalidAddressSpace on the H200: "
                        "bench/logs/s12_graph.log)")
    p.add_argument("--out", default=None, help="results folder (default bench/results)")
    p.add_argument("--name", default="sparse_mla")
    args = p.parse_args(argv)
    args.cases = [c for c in args.cases.split(",") if c]
    args.heads = [int(h) for h in args.heads.split(",")]
    args.impl = [i for i in args.impl.split(",") if i]
    bad = [i for i in args.impl if i not in ("auto", "triton", "gluon", "gluon_ws", "gluon_rx", "gluon64",
                                             "gluon_prefill")]
    if bad:
        p.error(f"--impl: unknown {bad}")
    args.tokens = [int(t) for t in args.tokens.split(",")] if args.tokens else None
    if _bad_context(args.decode_context):
        p.error(f"--decode-context: {args.decode_context}; needs 0, or >= topk {TOPK} and a multiple of {DECODE_BLOCK}")
    if args.prefill_kv < TOPK:
        p.error(f"--prefill-kv: {args.prefill_kv}; needs >= topk {TOPK}")
    return args


def run(op: str, argv: list[str]) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("dsattn bench kernels --op sparse_mla needs a CUDA GPU (the CPU runs the interpreter tests instead)",
              file=sys.stderr)
        return 2
    device = torch.device("cuda")
    peers = None if args.no_peer else _peers()
    warm_up_gpu()
    # the ceilings are measured here on a GPU other than the H200, before the cases' tensors; their buffers are not
    # the table's, so the peak the meta reports starts after them
    ceilings()
    torch.cuda.reset_peak_memory_stats(device)
    rows = run_table(args, device, peers)
    print(format_table(rows, COLUMNS))
    path = write_results(args.name, rows, out_dir=args.out, meta={
        "op": op, "cases": args.cases, "rounds": args.rounds,
        "timing": "CUDA-graph replays" if args.graph else "eager calls",
        "decode": (f"{args.decode_context} own slots a request" if args.decode_context else f"{DECODE_SLOTS} shared slots")
        + f", block {DECODE_BLOCK}, uniform{', ascending' if args.ascending else ''}, topk {TOPK}",
        "prefill": f"s_kv {args.prefill_kv}, overlap (noise 0.5), topk {TOPK}", "ceilings": ceilings(),
        "peak_gpu_bytes": torch.cuda.max_memory_allocated(device),
        "speedup": "FlashMLA best ms / dsattn ms (FlashMLA padded to 64 heads below 64)",
        "env": {k: v for k, v in os.environ.items() if k.startswith(("TRITON", "CUDA_VISIBLE", "DSATTN"))}})
    print(f"# wrote {path}")
    return 0
