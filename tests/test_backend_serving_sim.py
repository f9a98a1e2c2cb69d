"""DSAAttention driven by a simulated serving engine over many steps (reference ops on the CPU; the kernels on CUDA).

The engine keeps a block pool with a shuffled free list, paged caches that start poisoned (NaN rows, 0xFF bytes, a
NaN k-pool tail state) and are poisoned again when a block or state row is freed, and requests that arrive over time:
chunked prefill under a per-step token budget (chunks start anywhere, inside blocks and k-pool pools), speculative
decodes of 1 + r tokens with some drafts rejected (num_cached rolled back to the first rejected position, which is
scheduled again with new inputs), requests finishing (their blocks freed and handed to later requests), and
prefix-cache hits (a new request whose first blocks are a live or finished request's blocks holding the same
prefix). Geometries with a shared indexer layer run a second layer on its own cache. Per seed: block size 8 or 16,
decode_threshold 2 or 3, small indexer / gather caps or not; per step: list or RequestBatch form, and decode-only
steps prepared as graph steps or not.

Every token's inputs are drawn once per (request, position, version); a rejected position gets a new version.

The oracle knows nothing of the engine's caches: for each request of a step it writes the request's accepted history
and this step's tokens into fresh caches with the reference cache writes (k-pool: kpool_update_reference over the
whole history in order, from a NaN tail state), then computes the step's rows with the reference indexer, top-k (its
sets listed as topk() lists them: ascending, -1 last) and sparse MLA (as synthetic.reference_step does request by
request). The backend's outputs must equal it bit for bit (the reference twins run the same fp32 math on the same
values, entries in the same order), its selected positions as sets, and no NaN may reach an output. The step must
also leave each scheduled request's history in the engine's caches byte for byte as the oracle wrote it (latent rows
of every layer, indexer keys or pooled keys), and in the tail state the members of its incomplete pool.

Rollbacks and the k-pool tail state (ops.indexer.kpool_update's docstring): one rejected token, or r rejected tokens
with r <= P - f % P for the first rejected position f, leave the tail state valid. For a deeper rollback the engine
restores the request's tail-state row, snapshotted before the speculative step, and schedules the step's accepted
tokens again with the inputs they had (what recomputing them would give), so the row is valid for its num_cached.

Device and tolerance mode (Engine / simulate: device, strict): the backend (DSAAttention, its caches, the indexer
inputs, the k-pool tail state and ape) lives on `device`; the oracle stays on the CPU with the reference ops and reads
nothing of the backend's (it rebuilds from the accepted inputs, the backend's tensors are copied back with .cpu() only
to be compared). strict=True (the tests here) is the bit-for-bit check above. strict=False is the check of
tests/gpu/test_backend_serving_sim_gpu.py, where the kernels round otherwise (fp16 / bf16 products, another summation
order), step by step (a later step reads the backend's own pooled keys, so nothing is allowed to accumulate):
- selections: the same sets in all of a step's rows but max(2, 2% of them) (a near tie at the k-th place may flip);
  over the rows that differ at most 2 selection units per row unshared on average (a unit: one position, or one
  pool of P positions for k-pool; tests/gpu/test_backend_gpu.py's 99% of entries shared is 20 entries of a 2048-wide
  row, and 99% of a 16-wide row would allow no flip at all); every selected position is one of the row's visible
  history (no -2, nothing after its own position, no duplicate) and as many as the oracle's;
- outputs: finite everywhere; within atol 2e-2 / rtol 2e-2 of the oracle in the rows whose selection agrees, and of
  the reference attention over the backend's own selection (on the oracle's cache, byte-equal to the backend's) in
  the rows that differ;
- caches: latent rows and plain indexer keys byte-equal (the cache-write kernels are bit-identical to the reference
  writes); k-pool pooled keys and the tail state's members within atol 1e-2 / rtol 0.07 after dequantization, NaN
  where the oracle has NaN (softmax-weighted sums: rounding may move an fp8 step).
Engine.tol counts the rows checked, the rows selecting otherwise and their unshared entries; Engine.worst keeps the
largest differences seen (outputs of agreeing rows, pooled keys, tail state).
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import random

import pytest
import torch
from _backend_helpers import import_all_ops

from dsattn.backend.attention import DSAAttention
from dsattn.backend.indexer import IndexerInputs
from dsattn.backend.metadata import Request, RequestBatch
from dsattn.backend.synthetic import indices_as_slots
from dsattn.config import preset
from dsattn.formats import (INDEX_DIM, KVLayout, as_layout, dequantize_indexer_cache, indexer_cache_views,
                            kv_cache_flat, new_indexer_cache, new_kv_cache)
from dsattn.ops.cache.reference import write_indexer_cache_reference, write_kv_cache_reference
from dsattn.ops.indexer.reference import indexer_topk_reference, kpool_expand, kpool_update_reference
from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference
from dsattn.ops.topk.reference import in_column_order

import_all_ops()  # at collection, before the fixture below switches the ops to their reference twins

MAX_LEN = 80           # max_model_len
MAX_REQS = 5           # live requests at most (also the k-pool tail-state rows)
BUDGET = 40            # tokens a step (max_num_tokens)

CONFIGS = [  # preset, cache layout, heads per rank
    ("glm-5", "fp8_ds_mla", 8),
    ("glm-5", "fp8_ds_mla", 32),
    ("glm-5", "bf16", 8),
    ("glm-5.3-flash", "fp8_ds_mla_nope", 8),
    ("glm-5.3-flash", "bf16", 16),
]
SEEDS = range(6)


@pytest.fixture(autouse=True)
def reference_ops(monkeypatch):
    """The public ops run their reference twins here, whatever other test modules set."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: a second intra-op thread costs more than it saves (softmax of [1, 4, 128] takes ms with two
    threads, us with one), so the simulation runs single-threaded; the count is restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def poison(t: torch.Tensor) -> torch.Tensor:
    """NaN for float tensors, 0xFF bytes for uint8 ones (NaN as fp8 values, scales and bf16 rope alike)."""
    return t.fill_(255 if t.dtype == torch.uint8 else float("nan"))


# -- inputs -------------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Token:
    """One token's inputs: per layer its query and latent row; the full layer's indexer q, weights, key (and gate)."""

    q: torch.Tensor          # [layers, H, D_qk] bf16
    latent: torch.Tensor     # [layers, D_qk] bf16
    iq: torch.Tensor         # [Hi, 128] bf16
    iw: torch.Tensor         # [Hi] fp32
    ik: torch.Tensor         # [128] bf16
    gate: torch.Tensor | None  # [128] fp32 (k-pool)


class InputBank:
    """Draws each (request, position, version)'s inputs once and hands back the same tensors afterwards."""

    def __init__(self, geo, heads: int, layers: int, seed: int):
        self.geo, self.heads, self.layers = geo, heads, layers
        self.gen = torch.Generator().manual_seed(seed)
        self.memo: dict[tuple[int, int, int], Token] = {}

    def _randn(self, *shape, scale=1.0):
        return torch.randn(*shape, generator=self.gen) * scale

    def get(self, rid: int, pos: int, version: int) -> Token:
        key = (rid, pos, version)
        if key not in self.memo:
            g, hi = self.geo, self.geo.index_n_heads
            self.memo[key] = Token(
                q=self._randn(self.layers, self.heads, g.d_qk).bfloat16(),
                latent=self._randn(self.layers, g.d_qk, scale=0.5).bfloat16(),
                iq=self._randn(hi, INDEX_DIM).bfloat16(), iw=self._randn(hi, scale=(hi * INDEX_DIM) ** -0.5),
                ik=self._randn(INDEX_DIM).bfloat16(), gate=self._randn(INDEX_DIM) if g.kpool > 1 else None)
        return self.memo[key]


# -- the oracle ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Expected:
    """The oracle's view of one request: selected positions [n, width] (-1 unused), fp32 outputs [n, H, 512] per
    layer, and the fresh caches holding its history (block table 0, 1, 2, ...: slot == position)."""

    sel: torch.Tensor
    outs: list[torch.Tensor]
    kv: list[torch.Tensor]
    index_cache: torch.Tensor          # token keys, or pooled keys for k-pool
    tail: torch.Tensor | None          # [1, P - 1, 256]


def oracle(geo, layout: KVLayout, bs: int, ape, tokens: list[Token], first: int) -> Expected:
    """Rows first .. len(tokens) - 1 of a request whose whole history is `tokens`, from scratch: fresh poisoned caches
    hold the history, written by the reference writes; then the reference indexer, top-k and sparse MLA."""
    n_tok, p = len(tokens), geo.kpool
    nb = -(-n_tok // bs)
    pos = torch.arange(n_tok, dtype=torch.int32)
    rows = pos[first:]
    zeros = torch.zeros(n_tok - first, dtype=torch.int32)
    iq = torch.stack([t.iq for t in tokens[first:]]).float()
    iw = torch.stack([t.iw for t in tokens[first:]])
    ik = torch.stack([t.ik for t in tokens])
    tail = None
    if p > 1:
        index_cache = poison(new_indexer_cache(nb, bs // p))
        tail = torch.full((1, p - 1, 2 * INDEX_DIM), float("nan"))
        kpool_update_reference(ik, torch.stack([t.gate for t in tokens]), ape, pos, torch.zeros_like(pos),
                               torch.arange(nb, dtype=torch.int32)[None], index_cache, tail,
                               torch.zeros(1, dtype=torch.int32))
        keys = dequantize_indexer_cache(index_cache)[:n_tok // p]
        # kpool_topk_reference's steps, the pools listed as topk() lists them (ascending, -1 last) before expansion
        pools = indexer_topk_reference(iq, iw, keys, zeros, (rows + 1) // p, geo.index_topk // p)
        sel = kpool_expand(in_column_order(pools), rows, p)
    else:
        index_cache = poison(new_indexer_cache(nb, bs))
        write_indexer_cache_reference(ik, index_cache, pos)
        keys = dequantize_indexer_cache(index_cache)[:n_tok]
        sel = in_column_order(indexer_topk_reference(iq, iw, keys, zeros, rows + 1, geo.index_topk))
    outs, kvs = [], []
    for layer in range(tokens[0].q.shape[0]):
        kv = poison(new_kv_cache(nb, bs, layout, geo.d_qk))
        write_kv_cache_reference(torch.stack([t.latent[layer] for t in tokens]), kv, pos, layout)
        q = torch.stack([t.q[layer] for t in tokens[first:]])
        outs.append(sparse_mla_paged_reference(q, kv, sel, geo.softmax_scale, layout)[0])
        kvs.append(kv)
    return Expected(sel, outs, kvs, index_cache, tail)


def slots_of(blocks: list[int], positions: torch.Tensor, bs: int) -> torch.Tensor:
    """Cache slots of a request's positions (or pools, with the pooled block size) through its block table."""
    return torch.tensor(blocks, dtype=torch.long)[positions // bs] * bs + positions % bs


def index_rows(cache: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """The fp8 values and the scale of an indexer cache's slots as bytes [n, 132]."""
    values, scales = indexer_cache_views(cache)
    return torch.cat([values.view(torch.uint8).reshape(-1, INDEX_DIM)[slots],
                      scales.reshape(-1, 1)[slots].view(torch.uint8)], dim=1)


# -- the engine ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class SimRequest:
    rid: int
    prompt: int                 # prompt tokens (prefilled in chunks)
    target: int                 # prompt + generated tokens: finished when num_cached reaches it
    slot: int                   # k-pool tail-state row
    blocks: list[int]
    history: list[Token]        # accepted tokens, one a position
    versions: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # pos -> version

    @property
    def num_cached(self) -> int:
        return len(self.history)


@dataclasses.dataclass
class CacheEntry:
    """A finished request's full blocks, kept for prefix hits until evicted."""

    blocks: list[int]
    history: list[Token]


class BlockPool:
    """Block ids in a shuffled free list; a block is held by live requests and by prefix-cache entries, and goes
    back to the free list (at a random place) when neither holds it, poisoned through on_free."""

    def __init__(self, num_blocks: int, rng: random.Random, on_free):
        self.rng, self.on_free = rng, on_free
        self.free = list(range(num_blocks))
        rng.shuffle(self.free)
        self.live = [0] * num_blocks
        self.cached = [0] * num_blocks
        self.ever_used = [False] * num_blocks
        self.reuses = 0

    def take(self) -> int:
        b = self.free.pop()
        self.reuses += self.ever_used[b]
        self.ever_used[b] = True
        self.live[b] = 1
        return b

    def release(self, b: int, cached: bool = False) -> None:
        (self.cached if cached else self.live)[b] -= 1
        if self.live[b] == 0 and self.cached[b] == 0:
            self.on_free(b)
            self.free.insert(self.rng.randint(0, len(self.free)), b)

    def evictable(self, excluding=()) -> int:
        return sum(1 for b in range(len(self.live)) if self.live[b] == 0 and self.cached[b] > 0 and b not in excluding)


class Engine:
    """Schedules steps, runs them through the backend, checks each against the oracle, accepts or rolls back.
    device: where the backend and its caches live; strict: bit-equal to the oracle, else the tolerance mode (the
    module docstring)."""

    def __init__(self, name: str, layout: str, heads: int, seed: int, device: torch.device | str = "cpu",
                 strict: bool = True):
        self.dev, self.strict = torch.device(device), strict
        self.rng = random.Random(seed)
        types = ("full", "shared") if name == "glm-5.3-flash" else ()
        self.geo = geo = preset(name).scaled(index_topk=16, index_n_heads=4, num_heads=heads, indexer_types=types)
        self.heads, self.layout, self.layers = heads, as_layout(layout), max(1, len(types))
        self.p = geo.kpool
        self.bs = bs = self.rng.choice([8, 16])
        self.threshold = self.rng.choice([2, 3])
        kw = dict(kv_layout=layout, block_size=bs, max_num_tokens=BUDGET, max_num_reqs=MAX_REQS, max_model_len=MAX_LEN,
                  decode_threshold=self.threshold, device=self.dev)
        self.attn = DSAAttention(geo, **kw)
        small_caps = self.rng.random() < 0.5
        if small_caps:  # small caps: prefill requests split across indexer chunks and gathered contexts
            most = self.attn.limits.max_keys
            cap = self.attn.indexer.chunk_bytes(self.rng.randint(2, 6), most, most)
            self.attn = DSAAttention(geo, indexer_cap_bytes=cap, gather_cap_tokens=MAX_LEN, **kw)
        num_blocks = 2 * MAX_LEN // bs
        dev = self.dev
        self.kv = [poison(new_kv_cache(num_blocks, bs, layout, geo.d_qk, device=dev)) for _ in range(self.layers)]
        self.icache = poison(new_indexer_cache(num_blocks, bs // self.p, device=dev))
        self.tail = (torch.full((MAX_REQS, self.p - 1, 2 * INDEX_DIM), float("nan"), device=dev) if self.p > 1
                     else None)
        g = torch.Generator().manual_seed(1000 + seed)
        self.ape_host = torch.randn(self.p, INDEX_DIM, generator=g) * 0.1 if self.p > 1 else None   # the oracle's
        self.ape = self.ape_host.to(dev) if self.p > 1 else None
        self.pool = BlockPool(num_blocks, self.rng, self._poison_block)
        self.slots = list(range(MAX_REQS))
        self.rng.shuffle(self.slots)
        self.bank = InputBank(geo, heads, self.layers, seed)
        self.live: list[SimRequest] = []
        self.entries: list[CacheEntry] = []   # prefix cache, oldest first
        self.next_rid = 0
        self.stats = collections.Counter({f"block_size_{bs}": 1, "small_caps" if small_caps else "full_caps": 1})
        self.tol = collections.Counter()                              # rows, rows_differ, entries_unshared
        self.worst = dict.fromkeys(("out", "pooled", "tail"), 0.0)    # largest differences seen (tolerance mode)

    # -- memory ---------------------------------------------------------------------------------------------------

    def _poison_block(self, b: int) -> None:
        for kv in self.kv:
            poison(kv[b])
        poison(self.icache[b])

    def _blocks_needed(self, r: SimRequest) -> int:
        return -(-r.target // self.bs) - len(r.blocks)

    def _evict_oldest(self) -> None:
        entry = self.entries.pop(0)
        for b in entry.blocks:
            self.pool.release(b, cached=True)

    def _grow(self, r: SimRequest, tokens: int) -> None:
        while len(r.blocks) * self.bs < tokens:
            while not self.pool.free:
                self._evict_oldest()
            r.blocks.append(self.pool.take())

    # -- arrivals and finishing -----------------------------------------------------------------------------------

    def arrive(self) -> None:
        """A new request, maybe a prefix hit on a live request's or a cache entry's full accepted blocks; admitted
        when a state row is free and the blocks it may still need fit beside those the live requests may need."""
        rng, bs = self.rng, self.bs
        if len(self.live) >= MAX_REQS:
            return
        prefix_blocks, prefix, kind = [], [], None
        sources = [(r.blocks, r.history, "live") for r in self.live if r.num_cached >= bs]
        sources += [(e.blocks, e.history, "cached") for e in self.entries]
        if sources and rng.random() < 0.5:
            blocks, history, kind = rng.choice(sources)
            k = rng.randint(1, min(len(history) // bs, (MAX_LEN - 8) // bs))
            prefix_blocks, prefix = blocks[:k], history[:k * bs]
        prompt = len(prefix) + rng.randint(1 if prefix else 3, min(40, MAX_LEN - len(prefix) - 1))
        target = min(MAX_LEN, prompt + rng.randint(1, 10))
        r = SimRequest(self.next_rid, prompt, target, -1, list(prefix_blocks), list(prefix))
        outstanding = sum(self._blocks_needed(x) for x in self.live) + self._blocks_needed(r)
        if len(self.pool.free) + self.pool.evictable(excluding=prefix_blocks) < outstanding:
            return
        self.next_rid += 1
        for b in prefix_blocks:
            self.pool.live[b] += 1
        if prefix:
            self.stats["prefix_hits_" + kind] += 1
        r.slot = self.slots.pop()
        self.live.append(r)

    def finish(self, r: SimRequest) -> None:
        """Its full blocks may stay in the prefix cache; every block it holds is released, its state row poisoned."""
        full = r.num_cached // self.bs
        if full and self.rng.random() < 0.7:
            for b in r.blocks[:full]:
                self.pool.cached[b] += 1
            self.entries.append(CacheEntry(r.blocks[:full], r.history[:full * self.bs]))
            if len(self.entries) > 3:
                self._evict_oldest()
        for b in r.blocks:
            self.pool.release(b)
        if self.tail is not None:
            poison(self.tail[r.slot])
        self.slots.insert(self.rng.randint(0, len(self.slots)), r.slot)
        self.live.remove(r)
        self.stats["finished"] += 1

    # -- a step ---------------------------------------------------------------------------------------------------

    def schedule(self) -> list[tuple[SimRequest, int]]:
        """Generating requests first (1 + r tokens), then prompt chunks of random length, within the budget;
        returned decodes (<= decode_threshold tokens) first."""
        rng, left, picked = self.rng, BUDGET, []
        gen = [r for r in self.live if r.num_cached >= r.prompt]
        for r in gen + [r for r in self.live if r.num_cached < r.prompt]:
            c = r.num_cached
            if c >= r.prompt:
                n = min(rng.randint(1, self.threshold), r.target - c)
            else:
                n = min(r.prompt - c, rng.choice([r.prompt - c, rng.randint(1, 24)]))
            n = min(n, left)
            if n == 0:
                continue
            self._grow(r, c + n)
            left -= n
            picked.append((r, n))
        return [x for x in picked if x[1] <= self.threshold] + [x for x in picked if x[1] > self.threshold]

    def step(self) -> None:
        for _ in range(self.rng.choice([0, 0, 1, 2])):
            self.arrive()
        sched = self.schedule()
        if not sched:
            return
        bank = self.bank
        toks = [[bank.get(r.rid, pos, r.versions[pos]) for pos in range(r.num_cached, r.num_cached + n)]
                for r, n in sched]
        flat = [t for ts in toks for t in ts]
        requests = [Request(r.num_cached, n, torch.tensor(r.blocks, dtype=torch.int32), r.slot) for r, n in sched]
        spec = {r.rid for r, n in sched if r.num_cached >= r.prompt and n > 1}   # speculative decodes
        # the engine's snapshot of each speculative request's tail-state row, for a rollback kpool_update cannot undo
        snapshots = {r.rid: self.tail[r.slot].clone() for r, _ in sched if r.rid in spec} if self.p > 1 else {}
        for r, n in sched:
            if r.num_cached < r.prompt:
                self.stats["prompt_chunks"] += 1
                self.stats["chunk_starts_in_block"] += r.num_cached % self.bs != 0
                self.stats["chunk_starts_in_pool"] += self.p > 1 and r.num_cached % self.p != 0
        graph = all(n <= self.threshold for _, n in sched) and self.rng.random() < 0.5   # decodes only: graph steps
        self.stats["graph_steps"] += graph
        step = self.attn.prepare(RequestBatch.from_requests(requests) if self.rng.random() < 0.5 else requests,
                                 graph=graph)
        assert step.host.num_decodes == sum(n <= self.threshold for _, n in sched)
        dev = self.dev

        def stack(xs):
            return torch.stack(xs).to(dev)

        ix = IndexerInputs(q=stack([t.iq for t in flat]), weights=stack([t.iw for t in flat]),
                           k=stack([t.ik for t in flat]), cache=self.icache,
                           gate=stack([t.gate for t in flat]) if self.p > 1 else None, ape=self.ape,
                           tail_state=self.tail)
        outs = []
        for layer in range(self.layers):
            out = torch.full((len(flat), self.heads, 512), float("nan"), dtype=torch.bfloat16, device=dev)
            full = layer == 0
            self.attn.forward(step, stack([t.q[layer] for t in flat]), stack([t.latent[layer] for t in flat]),
                              self.kv[layer], ix if full else None, layer=layer, out=out)
            assert out.isfinite().all(), f"NaN (or inf) in layer {layer}'s output"
            outs.append(out)
        self.check(step, sched, toks, outs)
        self.stats["steps"] += 1
        self.stats["tokens"] += len(flat)
        self.stats["block_reuses"] = self.pool.reuses
        self.accept(sched, toks, spec, snapshots)

    def check(self, step, sched, toks, outs) -> None:
        """Each request of the step against the oracle: selected positions (as sets) and outputs; then what the
        step left in the caches: its history's latent rows and keys (pooled keys for k-pool) byte for byte, and the
        members of its incomplete pool in the tail state. The tolerance mode (strict=False) checks the selections
        and outputs as the module docstring says, pooled keys and the tail state within a tolerance, and the
        selections' agreement over the whole step at the end."""
        # the backend's tensors on the CPU (there .cpu() returns the tensor itself), for the comparisons only
        slots = indices_as_slots(self.attn, step, self.attn.indices(step)).cpu()
        outs = [o.cpu() for o in outs]
        kvs = [kv.cpu() for kv in self.kv]
        icache = self.icache.cpu()
        tail = self.tail.cpu() if self.tail is not None else None
        bs, p, a = self.bs, self.p, 0
        differ = unshared = 0   # tolerance mode: the step's rows selecting otherwise, their entries not shared
        for (r, n), ts in zip(sched, toks):
            c = r.num_cached
            want = oracle(self.geo, self.layout, bs, self.ape_host, r.history + ts, c)
            where = (r.rid, c, n)
            # slots back to positions through the request's block table (-2: a slot outside its blocks)
            column = {b: i for i, b in enumerate(r.blocks)}
            got_sel = torch.tensor([[-1 if x < 0 else -2 if x // bs not in column else column[x // bs] * bs + x % bs
                                     for x in row] for row in slots[a:a + n].tolist()], dtype=torch.int32)
            if self.strict:
                assert torch.equal(got_sel.sort(dim=1).values, want.sel.sort(dim=1).values), where
                for layer in range(self.layers):
                    got = outs[layer][a:a + n]
                    assert torch.equal(got, want.outs[layer].bfloat16()), (*where, layer,
                                                                            self.diff(got, want.outs[layer]))
            else:
                same, lost = self.near_selection(got_sel, want.sel, c, where)
                differ += int((~same).sum())
                unshared += lost
                self.near_outputs(ts, got_sel, same, want, [o[a:a + n] for o in outs], where)
            seq = torch.arange(c + n)
            for layer in range(self.layers):
                got_rows = kv_cache_flat(kvs[layer])[slots_of(r.blocks, seq, bs)].view(torch.uint8)
                want_rows = kv_cache_flat(want.kv[layer])[:c + n].view(torch.uint8)
                assert torch.equal(got_rows, want_rows), (*where, "kv rows", layer)
            keys = torch.arange((c + n) // p)
            if self.strict or p == 1:
                assert torch.equal(index_rows(icache, slots_of(r.blocks, keys, bs // p)),
                                   index_rows(want.index_cache, keys)), (*where, "indexer keys")
            else:   # pooled keys: softmax-weighted sums, rounding may move an fp8 step
                self.close("pooled", dequantize_indexer_cache(icache)[slots_of(r.blocks, keys, bs // p)],
                           dequantize_indexer_cache(want.index_cache)[keys], (*where, "pooled keys"))
            if p > 1:
                m = (c + n) % p
                if self.strict:
                    assert torch.equal(tail[r.slot, :m], want.tail[0, :m]), (*where, "tail state")
                else:
                    self.close("tail", tail[r.slot, :m], want.tail[0, :m], (*where, "tail state"))
            a += n
        if not self.strict:
            # a near tie at the k-th place may flip (fp8 keys, fp32 sums in another order): test_backend_gpu.py's
            # max(2, 2%) rows; a flip swaps one selection unit (a position, or a pool of P for k-pool), at most
            # 2 a differing row on average (or 1% of the width, test_backend_gpu.py's share at width 2048)
            assert differ <= max(2, 0.02 * a), f"{differ} of {a} rows select other tokens (step {self.stats['steps']})"
            assert unshared <= differ * max(2 * p, 0.01 * self.attn.width), \
                f"{unshared} entries unshared over {differ} rows selecting otherwise (step {self.stats['steps']})"
            self.tol.update(rows=a, rows_differ=differ, entries_unshared=unshared)

    def near_selection(self, got: torch.Tensor, want: torch.Tensor, c: int, where) -> tuple[torch.Tensor, int]:
        """Tolerance mode, one request's rows [n, width] of positions: every selected position visible to its row
        (none outside the request's blocks, none after the row's own position, no duplicate, as many as the
        oracle's); returns which rows select the oracle's set, and the oracle's entries the others miss."""
        assert (got >= -1).all(), (*where, "a selected slot outside the request's blocks")
        assert (got <= c + torch.arange(got.shape[0])[:, None]).all(), (*where, "a position after its row's")
        same = (got.sort(dim=1).values == want.sort(dim=1).values).all(dim=1)
        lost = 0
        for i in (~same).nonzero().flatten().tolist():
            g = [x for x in got[i].tolist() if x >= 0]
            w = {x for x in want[i].tolist() if x >= 0}
            assert len(g) == len(set(g)) == len(w), (*where, i, "selection sizes", g, sorted(w))
            lost += len(w - set(g))
        return same, lost

    def near_outputs(self, ts, got_sel, same, want: Expected, outs, where) -> None:
        """Tolerance mode, one request's outputs per layer: the oracle's where the selection agrees, the reference
        attention over the backend's own selection elsewhere (the oracle's cache: its rows equal the backend's)."""
        for layer in range(self.layers):
            got = outs[layer].float()
            ref = want.outs[layer]
            torch.testing.assert_close(got[same], ref[same], atol=2e-2, rtol=2e-2,
                                       msg=lambda m: f"{(*where, layer)}: {m}")
            if same.any():
                # beyond the output's own bf16 rounding (0 where the outputs are bit-equal)
                err = (got[same] - ref[same].bfloat16().float()).abs().max().item()
                self.worst["out"] = max(self.worst["out"], err)
            if not same.all():
                q = torch.stack([t.q[layer] for t in ts])[~same]
                own, _ = sparse_mla_paged_reference(q, want.kv[layer], got_sel[~same], self.geo.softmax_scale,
                                                    self.layout)
                torch.testing.assert_close(got[~same], own, atol=2e-2, rtol=2e-2,
                                           msg=lambda m: f"{(*where, layer)} on its own selection: {m}")

    def close(self, what: str, got: torch.Tensor, want: torch.Tensor, where) -> None:
        """Tolerance mode: pooled keys or tail-state members within atol 1e-2 / rtol 0.07, NaN where the oracle's
        are NaN (test_backend_gpu.py's rule for pooled keys)."""
        torch.testing.assert_close(got, want, atol=1e-2, rtol=0.07, equal_nan=True, msg=lambda m: f"{where}: {m}")
        if got.numel():
            self.worst[what] = max(self.worst[what], (got - want).abs().nan_to_num(0.0).max().item())

    @staticmethod
    def diff(got, want) -> float:
        return (got.float() - want.bfloat16().float()).abs().max().item()

    def beyond_contract(self, rejected: int, first: int) -> bool:
        """A rollback after which kpool_update's tail state is not valid (its docstring): more than one rejected
        token reaching back over an earlier index of the pool being rebuilt (rejected > P - first % P)."""
        return self.p > 1 and rejected > 1 and rejected > self.p - first % self.p

    def accept(self, sched, toks, spec: set[int], snapshots) -> None:
        """Each request's accepted tokens join its history. A speculative decode (1 + r tokens) keeps 1 .. 1 + r of
        them: rejected drafts roll num_cached back to the first rejected position f, whose inputs (and those after
        it) get a new version. After a rollback beyond kpool_update's contract the engine restores the request's
        tail-state row from its snapshot and leaves num_cached at the step's start: the accepted tokens run again,
        with the inputs they had."""
        rng = self.rng
        for (r, n), ts in zip(sched, toks):
            c = r.num_cached
            keep = n
            if r.rid in spec:
                deep = [k for k in range(1, n) if self.beyond_contract(n - k, c + k)]
                if deep and rng.random() < 0.5:   # rare by chance: taken whenever possible half the time
                    keep = rng.choice(deep)
                elif rng.random() < 0.6:
                    keep = rng.randint(1, n - 1)
            rejected, f = n - keep, c + keep
            for pos in range(f, c + n):
                r.versions[pos] += 1
            if rejected:
                self.stats["rejections"] += 1
                self.stats["rejected_tokens"] += rejected
            if self.beyond_contract(rejected, f):
                self.tail[r.slot] = snapshots[r.rid]
                self.stats["tail_restores"] += 1
            else:
                self.stats["multi_token_rollbacks"] += rejected > 1
                r.history += ts[:keep]
            if r.num_cached >= r.target:
                self.finish(r)


def simulate(name: str, layout: str, heads: int, seed: int, device: torch.device | str = "cpu",
             strict: bool = True) -> Engine:
    """10 to 15 checked steps (a step with nothing to schedule, before any request arrived, does not count).
    device, strict: Engine's (the backend's device; bit-equal, or the tolerance mode)."""
    eng = Engine(name, layout, heads, seed, device=device, strict=strict)
    steps = eng.rng.randint(10, 15)
    for _ in range(4 * steps):
        if eng.stats["steps"] == steps:
            return eng
        eng.step()
    raise AssertionError(f"the engine scheduled {eng.stats['steps']} steps of {steps}")


def engine_seed(name: str, layout: str, heads: int, seed: int) -> int:
    """The engine's seed of a configuration's seed-th simulation (the GPU test runs the same simulations)."""
    return 1000 * CONFIGS.index((name, layout, heads)) + seed


@functools.lru_cache(maxsize=None)
def simulation_stats(name: str, layout: str, heads: int, seed: int) -> collections.Counter:
    """The event counts of a checked simulation; each runs once per process (the coverage test reuses them)."""
    return simulate(name, layout, heads, seed=engine_seed(name, layout, heads, seed)).stats


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name, layout, heads", CONFIGS)
def test_serving_simulation_matches_oracle(name, layout, heads, seed):
    """Every step of the simulation: outputs bit-equal to the oracle's, the same selected positions, no NaN."""
    stats = simulation_stats(name, layout, heads, seed)
    assert stats["rejections"] and stats["prompt_chunks"], stats


def engine_events(name: str) -> list[str]:
    """The events the simulation is there for (k-pool ones for the k-pool preset)."""
    events = ["finished", "block_reuses", "prefix_hits_live", "prefix_hits_cached", "chunk_starts_in_block",
              "multi_token_rollbacks", "graph_steps"]
    if name == "glm-5.3-flash":
        events += ["chunk_starts_in_pool", "tail_restores"]
    return events


@pytest.mark.parametrize("name, layout, heads", CONFIGS)
def test_simulations_cover_the_engine_events(name, layout, heads):
    """Over the seeds of a configuration, every event the simulation is there for happened."""
    total = collections.Counter()
    for seed in SEEDS:
        total.update(simulation_stats(name, layout, heads, seed))
    assert all(total[e] for e in engine_events(name)), dict(total)


# the GPU test's simulations (tests/gpu/test_backend_serving_sim_gpu.py): 2 or 3 of the seeds above a configuration,
# chosen so that together they cover every engine event, both block sizes and both cap choices
GPU_SEEDS = {
    ("glm-5", "fp8_ds_mla", 8): (1, 5),
    ("glm-5", "fp8_ds_mla", 32): (1, 3),
    ("glm-5", "bf16", 8): (1, 3, 5),
    ("glm-5.3-flash", "fp8_ds_mla_nope", 8): (0, 3),
    ("glm-5.3-flash", "bf16", 16): (0, 3),
}


@pytest.mark.parametrize("name, layout, heads", CONFIGS)
def test_gpu_seeds_cover_the_engine_events(name, layout, heads):
    """The GPU test's seeds of a configuration cover what the CPU test's cover (the engine's draws do not depend on
    the backend's results: its schedules are the same on any device and in either mode), both block sizes (8, 16) and
    both indexer / gather cap choices."""
    seeds = GPU_SEEDS[(name, layout, heads)]
    assert 2 <= len(seeds) <= 3 and set(seeds) <= set(SEEDS)
    total = collections.Counter()
    for seed in seeds:
        total.update(simulation_stats(name, layout, heads, seed))
    events = engine_events(name) + ["block_size_8", "block_size_16", "small_caps", "full_caps"]
    assert all(total[e] for e in events), {e: total[e] for e in events}


TOLERANCE_RUNS = [("glm-5.3-flash", "fp8_ds_mla_nope", 8, 0), ("glm-5", "fp8_ds_mla", 32, 1)]


@pytest.mark.parametrize("name, layout, heads, seed", TOLERANCE_RUNS)
def test_tolerance_mode_on_the_cpu(name, layout, heads, seed):
    """The GPU test's checks (strict=False, tests/gpu/test_backend_serving_sim_gpu.py) with the reference ops on the
    CPU, where they are exact: the same schedule and events as the strict run, every row checked, no row selecting
    otherwise and no difference anywhere."""
    eng = simulate(name, layout, heads, engine_seed(name, layout, heads, seed), device="cpu", strict=False)
    assert eng.stats == simulation_stats(name, layout, heads, seed)
    assert eng.tol["rows"] == eng.stats["tokens"] and eng.tol["rows_differ"] == 0, eng.tol
    assert eng.worst == {"out": 0.0, "pooled": 0.0, "tail": 0.0}, eng.worst
