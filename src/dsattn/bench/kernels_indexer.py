"""Benchmarks of the indexer ops against their peers (DeepGEMM's MQA logits, torch.topk), on the GPU.

Ops (each ``run_<op>(args) -> rows``, for the ``dsattn bench kernels --op OP`` router):

    indexer          prefill logits, causal tail of a long context, vs DeepGEMM fp8_mqa_logits
    topk             top-k 2048 of fp32 rows vs torch.topk
    indexer_prefill  one long sequence: chunked logits (under a byte cap) + top-k, vs DeepGEMM + torch.topk
    indexer_decode   paged logits + top-k per request vs DeepGEMM fp8_paged_mqa_logits + torch.topk, eager and
                     as CUDA-graph replays (*_graph_ms), with the other top-k version beside the default
    kpool            the k-pool indexer's pieces: pooled-cache update, decode pool top-k + expansion

``args`` needs ``quick`` (smaller sweeps) and ``sweep`` (try several block configs); ``main(argv)`` runs
ops standalone and writes ``bench/results/indexer_<op>.json``. Peers come from ``peers`` (``.peer/`` on
PYTHONPATH, see BENCHMARKS.md); without them the peer columns stay empty.
"""
from __future__ import annotations

import argparse
import sys

import torch

from .. import formats
from ..ops.indexer import indexer_logits_paged, kpool_expand, kpool_update
from ..ops.indexer.logits import launch_logits, launch_logits_paged
from ..ops.topk import topk, topk_scratch_spec
from .common import ceilings, format_table, graph_replay, time_ms, time_pair_ms, write_results

TOPK = 2048
DEVICE = "cuda"
INDEXER_SHAPES = [(8192, 131072, 32), (4096, 65536, 32), (4096, 65536, 64)]  # rows, context, heads
TOPK_SHAPES = [(4096, 65536, "randn"), (1024, 262144, "randn"), (128, 65536, "randn"), (4096, 65536, "ties")]
PREFILL = (65536, 32, 512 << 20)  # tokens, heads, logits cap in bytes
DECODE_CASES = [(128, 65536, 32, 1), (32, 131072, 32, 1), (64, 65536, 32, 2), (128, 65536, 64, 1)]
KPOOL = dict(update_tokens=8192, update_start=4094, requests=128, ctx=65536)


def _peers():
    try:
        import peers  # noqa: F401
        return peers
    except ImportError:
        return None


def _q_w(rows, heads, dev):
    q = (torch.randn(rows, heads, 128, device=dev) * 2).to(formats.FP8)
    w = torch.rand(rows, heads, device=dev) * heads ** -0.5 * 128 ** -0.5
    return q, w


def _keys(n, dev):
    v, s = formats.quantize_fp8(torch.randn(n, 128, device=dev))
    return v, s[:, 0].contiguous()


def _causal_tail(rows, ctx, dev):
    ks = torch.zeros(rows, dtype=torch.int32, device=dev)
    ke = torch.arange(ctx - rows + 1, ctx + 1, dtype=torch.int32, device=dev)
    return ks, ke


LOGITS_CONFIGS = [dict(BT=4, BN=128, num_warps=8, num_stages=3), dict(BT=4, BN=64, num_warps=4, num_stages=3),
                  dict(BT=8, BN=64, num_warps=4, num_stages=3), dict(BT=2, BN=128, num_warps=8, num_stages=4),
                  dict(BT=8, BN=128, num_warps=8, num_stages=3), dict(BT=4, BN=128, num_warps=4, num_stages=3)]


def _best_config(fn_of_cfg, configs):
    """(best cfg, ms, [(cfg, ms)]) over configs; a config that fails to compile/run is reported, skipped."""
    results = []
    for cfg in configs:
        try:
            fn = fn_of_cfg(cfg)
            fn()
            torch.cuda.synchronize()
            results.append((cfg, time_ms(fn, warmup_ms=10, rep_ms=50)))
        except Exception as e:  # noqa: BLE001 - a sweep keeps going past a config that does not build
            results.append((cfg, f"failed: {type(e).__name__}: {str(e)[:120]}"))
    ok = [(c, t) for c, t in results if isinstance(t, float)]
    best = min(ok, key=lambda x: x[1]) if ok else (None, None)
    return best[0], best[1], results


def run_indexer(args) -> list[dict]:
    """Prefill logits: rows = the causal tail of a ctx-token context, fp8 q and k."""
    dev = DEVICE
    pe = _peers()
    shapes = INDEXER_SHAPES
    if args.quick:
        shapes = shapes[:2]
    rows_out = []
    first = None  # (config, heads) the first shape ran with
    for rows, ctx, heads in shapes:
        q, w = _q_w(rows, heads, dev)
        k, k_scale = _keys(ctx, dev)
        ks, ke = _causal_tail(rows, ctx, dev)
        out = torch.empty(rows, ctx, device=dev)
        flops = 2.0 * float((ke - ks).sum()) * heads * 128
        # sweep on the first shape; later shapes keep the winner (BT scaled so BT x heads stays)
        if args.sweep and first is None:
            cfgs = [dict(c, BT=max(1, c["BT"] * 32 // heads)) for c in LOGITS_CONFIGS]
        elif first is not None and first[0]:
            cfgs = [dict(first[0], BT=max(1, first[0]["BT"] * first[1] // heads))]
        else:
            cfgs = [{}]
        cfg, _, sweep = _best_config(lambda c: (lambda: launch_logits(q, w, k, k_scale, ks, ke, out, c)), cfgs)
        ours = lambda: launch_logits(q, w, k, k_scale, ks, ke, out, cfg)  # noqa: E731
        row = dict(op="indexer_logits", rows=rows, ctx=ctx, heads=heads, config=str(cfg),
                   sweep=[(str(c), t) for c, t in sweep])
        if pe is not None:
            peer = lambda: pe.deepgemm_mqa_logits(q, k, k_scale, w, ks, ke, ctx)  # noqa: E731
            ref = peer()
            ours()
            valid = torch.arange(ctx, device=dev)[None, :] < (ke - ks)[:, None]
            diff = ((out - ref).abs() / ref.abs().clamp_min(1e-3)).masked_fill(~valid, 0)
            row["max_rel_diff_vs_deepgemm"] = float(diff.max())
            row["tail_is_neg_inf"] = bool(out.masked_fill(valid, float("-inf")).isneginf().all())
            del ref
            t_ours, t_peer = time_pair_ms(ours, peer)
            row.update(ms=t_ours, deepgemm_ms=t_peer, ratio_vs_deepgemm=t_peer / t_ours)
        else:
            row["ms"] = time_ms(ours)
        row["tflops"] = flops / row["ms"] / 1e9
        fp8 = ceilings()["fp8_flops"]
        row["floor_ms"] = flops / fp8 * 1e3 if fp8 else None
        if args.sweep and rows == shapes[0][0]:
            exact = dict(cfg, dot="bf16")
            row["bf16_dot_ms"] = time_ms(lambda: launch_logits(q, w, k, k_scale, ks, ke, out, exact))
        rows_out.append(row)
        if first is None:
            first = (cfg, heads)
        out = None  # frees the logits (the closures above hold it) before the next shape allocates
        torch.cuda.empty_cache()
    return rows_out


def _topk_inputs(rows, width, dist, dev):
    if dist == "ties":  # few distinct values: the sampled candidates overflow, the exact fallback runs
        return torch.randint(0, 64, (rows, width), device=dev).float()
    return torch.randn(rows, width, device=dev)


def _same_sets(a, b):
    return (a.sort(dim=1).values == b.sort(dim=1).values).all(dim=1)


def run_topk(args) -> list[dict]:
    dev = DEVICE
    shapes = TOPK_SHAPES
    if args.quick:
        shapes = shapes[:1]
    out_rows = []
    for rows, width, dist in shapes:
        x = _topk_inputs(rows, width, dist, dev)
        lengths = torch.full((rows,), width, dtype=torch.int32, device=dev)
        out = torch.empty(rows, TOPK, dtype=torch.int32, device=dev)
        (shape, dtype), = topk_scratch_spec(rows, width, TOPK)
        scratch = torch.empty(shape, dtype=dtype, device=dev)
        ours = lambda: _topk(x, lengths, TOPK, out, scratch)  # noqa: E731
        peer = lambda: torch.topk(x, TOPK, dim=1)  # noqa: E731
        ours()
        if dist == "ties":  # torch.topk breaks ties arbitrarily: compare with the tie-aware reference
            from ..ops.topk.reference import topk_reference
            sub = slice(0, 8)
            ref = topk_reference(x[sub], torch.zeros_like(lengths[sub]), lengths[sub], TOPK)
            mismatched = int((~_same_sets(out[sub], ref)).sum())
        else:
            mismatched = int((~_same_sets(out, peer().indices.int())).sum())
        t_ours, t_peer = time_pair_ms(ours, peer)
        gb = rows * width * 4 / 1e9
        out_rows.append(dict(op="topk", rows=rows, width=width, k=TOPK, dist=dist, ms=t_ours, torch_topk_ms=t_peer,
                             speedup_vs_torch=t_peer / t_ours, read_tbs=gb / t_ours,
                             floor_ms=gb * 1e12 / ceilings()["hbm_bytes_per_s"],
                             rows_with_other_set=mismatched))
    return out_rows


def _prefill_chunks(n_tokens, cap_bytes):
    """Row chunks [a, b) of a causal prefill (row i sees i + 1 keys) whose logits, [b - a, b] fp32, fit
    cap_bytes: the largest b with (b - a) * b * 4 <= cap."""
    import math
    chunks, a, c = [], 0, cap_bytes // 4
    while a < n_tokens:
        b = int((a + math.sqrt(a * a + 4 * c)) // 2)
        while (b - a) * b > c:
            b -= 1
        b = min(n_tokens, max(b, a + 1))
        chunks.append((a, b))
        a = b
    return chunks


def _prefill_topk_fn(opts):
    """The top-k of a prefill chunk: the public op (opts None) or launch_topk with knobs."""
    if opts is None:
        return _topk
    from ..ops.topk.select import launch_topk

    def fn(x, lengths, k, out, scratch):
        launch_topk(x, lengths, k, out, scratch, **opts)
        return out
    return fn


def run_indexer_prefill(args) -> list[dict]:
    """One 65536-token sequence, glm-5 indexer (32 heads): logits then top-k per chunk, logits <= 512 MB.

    Per top-k variant (the public op, then ``args.prefill_topk``: a list of launch_topk knob dicts):
    the serial pipeline (logits of a chunk, then its top-k) and, from the same run, the two halves
    alone: the logits of every chunk (into the one buffer) and the top-k of every chunk (from all
    chunks' logits kept in memory, so each reads its own rows). Then the same with two 256 MB buffers
    and two streams: the top-k of chunk i runs while the logits of chunk i + 1 do."""
    dev = DEVICE
    pe = _peers() if getattr(args, "prefill_peer", True) else None
    n, heads, cap = PREFILL
    q, w = _q_w(n, heads, dev)
    k, k_scale = _keys(n, dev)
    ks = torch.zeros(n, dtype=torch.int32, device=dev)
    ke = torch.arange(1, n + 1, dtype=torch.int32, device=dev)
    lengths = ke - ks
    chunks = _prefill_chunks(n, cap)
    work = torch.empty(cap // 4, device=dev)
    (shape, dtype), = topk_scratch_spec(max(b - a for a, b in chunks), n, TOPK)
    scratch = torch.empty(shape, dtype=dtype, device=dev)
    result = torch.empty(n, TOPK, dtype=torch.int32, device=dev)
    rep = getattr(args, "prefill_rep_ms", 300)
    # every chunk's logits, kept (about 9 GB) for the top-k-only timing
    kept = []
    for a, b in chunks:
        kept.append(torch.empty(b - a, b, device=dev))
        launch_logits(q[a:b], w[a:b], k, k_scale, ks[a:b], ke[a:b], kept[-1])

    def logits_only():
        for a, b in chunks:
            launch_logits(q[a:b], w[a:b], k, k_scale, ks[a:b], ke[a:b], work[: (b - a) * b].view(b - a, b))

    t_logits = time_ms(logits_only, warmup_ms=50, rep_ms=rep)
    variants = [("default", None)] + [(str(o), o) for o in (getattr(args, "prefill_topk", None) or [])]
    rows = []
    serial_sets = {}  # variant -> the serial pipeline's own output, rows sorted (the two-stream run must match it)

    def differing(a, b):
        return int((a.sort(dim=1).values != b.sort(dim=1).values).any(dim=1).sum())
    for name, opts in variants:
        tk = _prefill_topk_fn(opts)

        def ours(tk=tk):
            for a, b in chunks:
                logits = work[: (b - a) * b].view(b - a, b)
                launch_logits(q[a:b], w[a:b], k, k_scale, ks[a:b], ke[a:b], logits)
                tk(logits, lengths[a:b], TOPK, result[a:b], scratch)

        def topk_only(tk=tk):
            for (a, b), logits in zip(chunks, kept):
                tk(logits, lengths[a:b], TOPK, result[a:b], scratch)

        row = dict(op="indexer_prefill", topk=name, tokens=n, heads=heads, cap_mb=cap >> 20, chunks=len(chunks))
        try:
            ours()
            torch.cuda.synchronize()
            serial_sets[name] = result.clone()
            # check: every row's set against torch.topk of the same logits (rows spread over the chunks)
            bad = 0
            for (a, b), logits in zip(chunks, kept):
                tk(logits, lengths[a:b], TOPK, result[a:b], scratch)
                pick = torch.arange(a, b, max(1, (b - a) // 64), device=dev)
                for r in pick.tolist():
                    m = int(lengths[r])
                    if m >= TOPK:
                        want = torch.topk(logits[r - a, :m], TOPK).indices.int().sort().values
                        bad += int(not torch.equal(result[r].sort().values, want))
            row["checked_rows_with_other_set"] = bad
            # and the pipeline's own output (logits rewritten into one buffer chunk by chunk) against the
            # top-k of the kept logits just computed, every row
            row["pipeline_rows_differing"] = differing(serial_sets[name], result)
            row["ms"] = time_ms(ours, warmup_ms=50, rep_ms=rep)
            row["logits_only_ms"] = t_logits
            row["topk_only_ms"] = time_ms(topk_only, warmup_ms=50, rep_ms=rep)
        except Exception as e:  # noqa: BLE001 - report and go on
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
        print(row, flush=True)
    # two streams, two half-size buffers: top-k of chunk i beside the logits of chunk i + 1
    half = cap // 2
    chunks2 = _prefill_chunks(n, half)
    bufs = [work[: half // 4], work[half // 4: 2 * (half // 4)]]
    (shape2, dtype2), = topk_scratch_spec(max(b - a for a, b in chunks2), n, TOPK)
    scratch2 = torch.empty(shape2, dtype=dtype2, device=dev)
    s_logits, s_topk = torch.cuda.Stream(), torch.cuda.Stream()
    for name, opts in variants:
        tk = _prefill_topk_fn(opts)

        def overlapped(tk=tk):
            main = torch.cuda.current_stream()
            s_logits.wait_stream(main)
            s_topk.wait_stream(main)
            done = [None, None]  # event: the top-k that last read buffer j has finished
            for i, (a, b) in enumerate(chunks2):
                j = i % 2
                logits = bufs[j][: (b - a) * b].view(b - a, b)
                with torch.cuda.stream(s_logits):
                    if done[j] is not None:
                        s_logits.wait_event(done[j])
                    launch_logits(q[a:b], w[a:b], k, k_scale, ks[a:b], ke[a:b], logits)
                    ready = torch.cuda.Event()
                    ready.record(s_logits)
                with torch.cuda.stream(s_topk):
                    s_topk.wait_event(ready)
                    tk(logits, lengths[a:b], TOPK, result[a:b], scratch2)
                    done[j] = torch.cuda.Event()
                    done[j].record(s_topk)
            main.wait_stream(s_logits)
            main.wait_stream(s_topk)

        row = dict(op="indexer_prefill", topk=name, tokens=n, heads=heads, cap_mb=cap >> 20, chunks=len(chunks2),
                   plan="two streams, two logits buffers of cap / 2")
        try:
            result.fill_(-7)
            overlapped()
            torch.cuda.synchronize()
            row["unwritten_rows"] = int((result == -7).any(dim=1).sum())
            if name in serial_sets:
                row["rows_differing_from_serial"] = differing(result, serial_sets[name])
            row["ms"] = time_ms(overlapped, warmup_ms=50, rep_ms=rep)
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
        print(row, flush=True)
    if pe is not None:
        def peer():
            for a, b in chunks:
                logits = pe.deepgemm_mqa_logits(q[a:b], k, k_scale, w[a:b], ks[a:b], ke[a:b], b)
                valid = torch.arange(b, device=dev)[None, :] < lengths[a:b, None]
                torch.topk(logits.masked_fill_(~valid, float("-inf")), min(TOPK, b), dim=1)
        peer()
        rows[0]["deepgemm_plus_torch_topk_ms"] = time_ms(peer, warmup_ms=50, rep_ms=rep)
    flops = 2.0 * float(lengths.sum()) * heads * 128
    for row in rows:
        if "ms" in row:
            row.update(logits_tflops_equiv=flops / row["ms"] / 1e9, target_ms=40.0)
    return rows


def _paged_setup(reqs, ctx, heads, next_n, bs, dev):
    blocks_per_req = ctx // bs
    nb = reqs * blocks_per_req
    cache = formats.new_indexer_cache(nb, bs, device=dev)
    values, scales = formats.indexer_cache_views(cache)
    v, s = formats.quantize_fp8(torch.randn(nb * bs, 128, device=dev))
    values.copy_(v.view(nb, bs, 128))
    scales.copy_(s.view(nb, bs))
    block_table = torch.randperm(nb, device=dev).to(torch.int32).view(reqs, blocks_per_req)
    q, w = _q_w(reqs * next_n, heads, dev)
    row_req = torch.arange(reqs, device=dev, dtype=torch.int32).repeat_interleave(next_n)
    row_len = (ctx - next_n + 1 + torch.arange(next_n, device=dev, dtype=torch.int32)).repeat(reqs)
    return cache, block_table, q, w, row_req, row_len


PAGED_CONFIGS = [dict(BN=64, num_warps=4, num_stages=3), dict(BN=128, num_warps=4, num_stages=3),
                 dict(BN=128, num_warps=8, num_stages=3), dict(BN=64, num_warps=4, num_stages=4, splits=16)]


def run_indexer_decode(args) -> list[dict]:
    dev = DEVICE
    pe = _peers()
    cases = DECODE_CASES
    if args.quick:
        cases = cases[:1]
    bs = 64
    out_rows = []
    swept = None  # the first case's winner, kept for the later cases
    for reqs, ctx, heads, next_n in cases:
        cache, block_table, q, w, row_req, row_len = _paged_setup(reqs, ctx, heads, next_n, bs, dev)
        t = reqs * next_n
        logits = torch.empty(t, ctx, device=dev)
        idx = torch.empty(t, TOPK, dtype=torch.int32, device=dev)
        (shape, dtype), = topk_scratch_spec(t, ctx, TOPK)
        scratch = torch.empty(shape, dtype=dtype, device=dev)
        cfgs = PAGED_CONFIGS if args.sweep and not out_rows else [{}]
        if out_rows and args.sweep:
            cfgs = [swept]
        cfg, _, sweep = _best_config(
            lambda c: (lambda: launch_logits_paged(q, w, cache, block_table, row_req, row_len, logits, c)), cfgs)
        if not out_rows:
            swept = cfg
        run_logits = lambda: launch_logits_paged(q, w, cache, block_table, row_req, row_len, logits, cfg)  # noqa: E731
        run_topk = lambda: _topk(logits, row_len, TOPK, idx, scratch)  # noqa: E731
        t_logits = time_ms(run_logits)
        t_topk = time_ms(run_topk)
        row = dict(op="indexer_decode", requests=reqs, ctx=ctx, heads=heads, next_n=next_n, config=str(cfg),
                   sweep=[(str(c), tt) for c, tt in sweep], logits_ms=t_logits, topk_ms=t_topk,
                   ms=t_logits + t_topk, cache_read_tbs=t * ctx * 132 / 1e9 / t_logits)
        # CUDA-graph replays (a serving engine's decode step): no host launch cost; v4's top-k is three launches,
        # whose host time exceeds its GPU time at 128 rows in eager timings (bench/results/topk_v3_split.json)
        row.update(logits_graph_ms=time_ms(graph_replay(run_logits)), topk_graph_ms=time_ms(graph_replay(run_topk)))
        row["graph_ms"] = row["logits_graph_ms"] + row["topk_graph_ms"]
        if not TOPK_OPTS:  # the other select beside the default (v3: one fused launch), for the v3 / v4 choice
            from ..ops.topk.select import DEFAULT_VERSION, launch_topk
            other = 3 if DEFAULT_VERSION == 4 else 4
            run_other = lambda: launch_topk(logits, row_len, TOPK, idx, scratch, version=other)  # noqa: E731
            row[f"topk_v{other}_ms"] = time_ms(run_other)
            row[f"topk_v{other}_graph_ms"] = time_ms(graph_replay(run_other))
        if pe is not None and heads in (32, 64):
            ctx_lens = row_len.view(reqs, next_n)
            q4 = q.view(reqs, next_n, heads, 128)
            cache4 = cache.unsqueeze(2)
            peer_logits = lambda: pe.deepgemm_paged_mqa_logits(q4, cache4, w, ctx_lens, block_table, ctx)  # noqa: E731
            ref = peer_logits()
            valid = torch.arange(ctx, device=dev)[None, :] < row_len[:, None]
            diff = ((logits - ref).abs() / ref.abs().clamp_min(1e-3)).masked_fill(~valid, 0)
            row["max_rel_diff_vs_deepgemm"] = float(diff.max())
            ref = ref.masked_fill(~valid, float("-inf"))
            t_peer_logits = time_ms(peer_logits)
            peer_topk = lambda: torch.topk(ref, TOPK, dim=1)  # noqa: E731
            t_peer_topk = time_ms(peer_topk)
            row.update(deepgemm_logits_ms=t_peer_logits, torch_topk_ms=t_peer_topk,
                       peer_ms=t_peer_logits + t_peer_topk)
            row["speedup_vs_peer"] = row["peer_ms"] / row["ms"]
            try:
                row["deepgemm_logits_graph_ms"] = time_ms(graph_replay(peer_logits))
            except Exception as e:  # noqa: BLE001 - a peer that cannot be captured keeps its eager rows
                row["deepgemm_logits_graph_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            row["torch_topk_graph_ms"] = time_ms(graph_replay(peer_topk))
            if "deepgemm_logits_graph_ms" in row:
                row["peer_graph_ms"] = row["deepgemm_logits_graph_ms"] + row["torch_topk_graph_ms"]
                row["speedup_vs_peer_graph"] = row["peer_graph_ms"] / row["graph_ms"]
        out_rows.append(row)
        cache = logits = None  # freed before the next case allocates
        torch.cuda.empty_cache()
    return out_rows


def run_kpool(args) -> list[dict]:
    """glm-5.3-flash (kpool 4): pooled-cache update of a prefill chunk; decode pool top-k + expansion."""
    dev = DEVICE
    kp, bs, heads = 4, 64, 32
    rows = []
    # update: one 8192-token prefill chunk of a request already 4094 tokens in (the tail state is used)
    n, start = KPOOL["update_tokens"], KPOOL["update_start"]
    nb = (start + n) // bs + 2
    block_table = torch.randperm(nb, device=dev).to(torch.int32).view(1, nb)
    pooled = formats.new_indexer_cache(nb, bs // kp, device=dev)
    tail = torch.randn(1, kp - 1, 256, device=dev)
    k = torch.randn(n, 128, device=dev).bfloat16()
    gate = torch.randn(n, 128, device=dev)
    ape = torch.randn(kp, 128, device=dev)
    pos = torch.arange(start, start + n, dtype=torch.int32, device=dev)
    req = torch.zeros(n, dtype=torch.int32, device=dev)
    slot = torch.zeros(1, dtype=torch.int32, device=dev)
    t_upd = time_ms(lambda: kpool_update(k, gate, ape, pos, req, block_table, pooled, tail, slot))
    rows.append(dict(op="kpool_update", tokens=n, kpool=kp, ms=t_upd))
    # decode: 128 requests x 65536 tokens -> 16384 pools each; logits over the pooled cache, top-512, expand
    reqs, ctx = KPOOL["requests"], KPOOL["ctx"]
    cache, block_table, q, w, row_req, row_len = _paged_setup(reqs, ctx // kp, heads, 1, bs // kp, dev)
    positions = torch.full((reqs,), ctx - 1, dtype=torch.int32, device=dev)
    n_pools = (positions + 1) // kp
    logits = torch.empty(reqs, ctx // kp, device=dev)
    pool_idx = torch.empty(reqs, TOPK // kp, dtype=torch.int32, device=dev)
    out = torch.empty(reqs, TOPK + kp - 1, dtype=torch.int32, device=dev)
    (shape, dtype), = topk_scratch_spec(reqs, ctx // kp, TOPK // kp)
    scratch = torch.empty(shape, dtype=dtype, device=dev)

    def step():
        indexer_logits_paged(q, w, cache, block_table, row_req, n_pools.to(torch.int32), out=logits)
        _topk(logits, n_pools.to(torch.int32), TOPK // kp, pool_idx, scratch)
        kpool_expand(pool_idx, positions, kp, out=out)

    rows.append(dict(op="kpool_decode_topk", requests=reqs, ctx=ctx, kpool=kp, ms=time_ms(step)))
    return rows


TOPK_VARIANTS = [dict(), dict(version=3, maxnreg=128), dict(sample=4096), dict(stop=2)]  # maxnreg: a v3 knob
TUNE_SHAPES = [(4096, 65536), (128, 65536)]
TOPK_OPTS: dict = {}  # the select's knobs for every later top-k of this run (set by run_topk_tune)


def _topk(x, lengths, k, out, scratch):
    """The public op, or the kernel with the knobs the tune picked (same kernel, other constexprs)."""
    if not TOPK_OPTS:
        return topk(x, lengths, k, out=out, scratch=scratch)
    from ..ops.topk.select import launch_topk
    launch_topk(x, lengths, k, out, scratch, **TOPK_OPTS)
    return out


def run_topk_tune(args) -> list[dict]:
    """The select's knobs and stage cut-offs (stop=1: sample threshold only, 2: + candidate pass)."""
    from ..ops.topk.select import launch_topk
    dev = DEVICE
    rows_out = []
    correct = []  # (row, variant) of the 4096-row shape's variants whose sets were right
    for rows, width in TUNE_SHAPES:
        x = torch.randn(rows, width, device=dev)
        lengths = torch.full((rows,), width, dtype=torch.int32, device=dev)
        out = torch.empty(rows, TOPK, dtype=torch.int32, device=dev)
        (shape, dtype), = topk_scratch_spec(rows, width, TOPK)
        scratch = torch.empty(shape, dtype=dtype, device=dev)
        for v in TOPK_VARIANTS:
            try:
                fn = lambda: launch_topk(x, lengths, TOPK, out, scratch, **v)  # noqa: E731
                fn()
                ok = None
                if not v.get("stop"):
                    ok = bool(_same_sets(out, torch.topk(x, TOPK, dim=1).indices.int()).all())
                row = dict(op="topk_tune", rows=rows, width=width, variant=str(v), ms=time_ms(fn), sets_ok=ok)
                if ok and rows == TUNE_SHAPES[0][0]:
                    correct.append((row, v))
            except Exception as e:  # noqa: BLE001 - keep sweeping
                row = dict(op="topk_tune", rows=rows, width=width, variant=str(v), error=str(e)[:200])
            rows_out.append(row)
    # keep the fastest correct variant (4096-row shape) for the rest of the run
    if correct:
        best, opts = min(correct, key=lambda rv: rv[0]["ms"])
        TOPK_OPTS.clear()
        TOPK_OPTS.update(opts)
        best["picked"] = True
    return rows_out


OPS = {"indexer": run_indexer, "topk": run_topk, "indexer_decode": run_indexer_decode,
       "indexer_prefill": run_indexer_prefill, "kpool": run_kpool, "topk_tune": run_topk_tune}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="dsattn.bench.kernels_indexer", description=__doc__.splitlines()[0])
    p.add_argument("--op", default="all", help=f"one of {sorted(OPS)}, several joined by commas, or all")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--sweep", default="", help="ops (comma-separated, or all) that try several block configs")
    p.add_argument("--out-dir", default=None)
    p.add_argument("--prefill-topk", default="[]", help="indexer_prefill: JSON list of launch_topk knob dicts "
                   "timed beside the public op")
    p.add_argument("--prefill-rep-ms", type=float, default=300.0)
    p.add_argument("--no-prefill-peer", dest="prefill_peer", action="store_false")
    args = p.parse_args(argv)
    import json
    args.prefill_topk = json.loads(args.prefill_topk)
    if not torch.cuda.is_available():
        print("indexer benchmarks need a CUDA GPU", file=sys.stderr)
        return 1
    sweep = args.sweep
    ceilings()  # measured first (on a GPU other than the H200), before any case's tensors
    for op in (list(OPS) if args.op == "all" else args.op.split(",")):
        args.sweep = sweep == "all" or op in sweep.split(",")
        rows = OPS[op](args)
        if TOPK_OPTS and op != "topk_tune":
            for r in rows:
                r.setdefault("topk_opts", str(TOPK_OPTS))
        path = write_results(op if op.startswith(("indexer", "topk")) else f"indexer_{op}", rows,
                             meta=dict(op=op, quick=args.quick, sweep=args.sweep, topk_opts=dict(TOPK_OPTS),
                                       ceilings=ceilings()),
                             out_dir=args.out_dir)
        cols = [c for c in rows[0] if c not in ("sweep",)]
        print(f"\n== {op} ({path})\n" + format_table(rows, cols), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
