"""Batch metadata (SPEC section 7): from the requests of one step, the per-token arrays and the chunk
plans every path runs on. Pure host-side work on CPU tensors; the backend copies the result into the
workspace once per step and every layer reuses it.

A step is a list of requests, each with tokens already cached, tokens scheduled now and a block table (or the
same as tensors, RequestBatch: the engine's form, checked and turned into metadata without a loop over requests).
Decodes (scheduled <= decode_threshold, i.e. 1 + speculative tokens) come first, prefill chunks after.
Token t of the batch is the query row t of every op.

Indexer "keys" are per-token keys (kpool 1) or pooled keys (kpool P): row t of a request sees
``row_keys[t] = (pos[t] + 1) // P`` of them. The indexer runs in row chunks; everything one chunk
materializes (fp32 logits ``[rows, width]``, top-k scratch, and for prefill the keys it gathers: each
of its requests' keys ``[0, last row's keys)`` in one flat array that ``ks``/``ke`` index) must fit
``indexer_cap_bytes``, as measured by a ``chunk_bytes(rows, width, num_keys)`` function the backend
supplies. The gathered-context path (fp8 cache, >= 32 heads) gathers whole prefill requests' latent
rows into a bf16 buffer of at most ``gather_cap_tokens`` rows, in request chunks.
"""
from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

import numpy as np
import torch

ChunkBytes = Callable[[int, int, int], int]

@dataclasses.dataclass(frozen=True)
class Request:
    """One request of a step.

    num_cached     tokens already in the caches (context)
    num_scheduled  tokens computed in this step (written to the caches by the step)
    block_table    block ids of the request in order (a list, or a 1-D integer tensor / array); at least
                   ceil((num_cached + num_scheduled) / block_size) of them
    state_slot     row of the k-pool tail state (k-pool models only): the request's own from its first step to its
                   last, like a recurrent state (a request moved to another row has its row copied; a prefix-cache
                   hit starts at a block boundary and needs none; after rejected speculative tokens it stays valid
                   for the rollbacks kpool_update's docstring names)
    """

    num_cached: int
    num_scheduled: int
    block_table: Sequence[int]
    state_slot: int = 0

    @property
    def seq_len(self) -> int:
        return self.num_cached + self.num_scheduled


@dataclasses.dataclass(frozen=True, eq=False)  # (tensor fields: == would compare them element-wise)
class RequestBatch:
    """A step's requests as host tensors, one row a request, decodes first: the form an engine keeps them in.
    ``prepare`` takes it instead of a list of Request, runs the same checks on whole tensors and builds the
    same metadata without a Python loop over the requests (validate_batch).

    num_cached     [B] integer tensor: tokens already in the caches
    num_scheduled  [B] integer tensor: tokens computed in this step
    block_table    [B, W] integer tensor: row i's first ceil((num_cached + num_scheduled) / block_size)
                   entries are its block ids in order; entries past them are not read
    state_slot     [B] integer tensor, or None (all 0): rows of the k-pool tail state
    All on the CPU.
    """

    num_cached: torch.Tensor
    num_scheduled: torch.Tensor
    block_table: torch.Tensor
    state_slot: torch.Tensor | None = None

    @classmethod
    def from_requests(cls, requests: Sequence[Request]) -> RequestBatch:
        """The same requests as tensors (block tables padded with 0 to the longest)."""
        if not requests:
            raise ValueError("requests must be a non-empty list of Request")
        tables = [torch.as_tensor(r.block_table).reshape(-1) for r in requests]
        width = max(len(t) for t in tables)
        table = torch.zeros((len(requests), width), dtype=torch.int64)
        for i, t in enumerate(tables):
            table[i, :len(t)] = t
        return cls(torch.tensor([r.num_cached for r in requests]), torch.tensor([r.num_scheduled for r in requests]),
                   table, torch.tensor([r.state_slot for r in requests]))


@dataclasses.dataclass(frozen=True)
class BatchLimits:
    """The largest batch a backend reserves for, and how it chunks work.

    indexer_cap_bytes  workspace bytes one indexer chunk may take (logits, top-k scratch, gathered keys)
    gather_cap_tokens  context rows the gathered path holds at once (default max_model_len)
    graph_bucket_steps buckets a doubling of the context for graph steps (graph_bucket): 1 (powers of two), 2, 4,
                       8 or 16; more buckets pad less and need more graphs
    """

    max_num_tokens: int
    max_num_reqs: int
    max_model_len: int
    block_size: int
    decode_threshold: int = 1
    kpool: int = 1
    indexer_cap_bytes: int = 512 << 20
    gather_cap_tokens: int | None = None
    graph_bucket_steps: int = 1

    def __post_init__(self):
        for name in ("max_num_tokens", "max_num_reqs", "max_model_len", "block_size", "decode_threshold", "kpool",
                     "graph_bucket_steps"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.graph_bucket_steps not in (1, 2, 4, 8, 16):
            raise ValueError(f"graph_bucket_steps must be 1, 2, 4, 8 or 16, got {self.graph_bucket_steps}")
        if self.block_size % self.kpool:
            raise ValueError(f"block_size ({self.block_size}) must be a multiple of kpool ({self.kpool})")
        if self.indexer_cap_bytes < default_chunk_bytes(1, self.max_keys, self.max_keys):
            raise ValueError(f"indexer_cap_bytes must hold one row of the longest request and its keys "
                             f"({default_chunk_bytes(1, self.max_keys, self.max_keys)} bytes), "
                             f"got {self.indexer_cap_bytes}")
        if self.gather_cap_tokens is not None and self.gather_cap_tokens < self.max_model_len:
            raise ValueError(f"gather_cap_tokens must be >= max_model_len ({self.max_model_len}), "
                             f"got {self.gather_cap_tokens}")

    @property
    def max_keys(self) -> int:
        """Most indexer keys one row sees (pooled keys for kpool > 1)."""
        return self.max_model_len // self.kpool

    @property
    def max_blocks_per_req(self) -> int:
        return -(-self.max_model_len // self.block_size)

    @property
    def gather_tokens(self) -> int:
        return self.gather_cap_tokens if self.gather_cap_tokens is not None else self.max_model_len


@dataclasses.dataclass(frozen=True)
class Piece:
    """Rows of one request inside a chunk: request `req`, its first `num_keys` keys (or context
    tokens) gathered at `offset` of the chunk's flat buffer."""

    req: int
    num_keys: int
    offset: int


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Query rows [row_start, row_end) run together; `width` logits columns (indexer chunks); `pieces`
    what the chunk gathers (flat prefill indexer chunks, gathered-context chunks), `num_keys` in all."""

    row_start: int
    row_end: int
    width: int = 0
    pieces: tuple[Piece, ...] = ()
    num_keys: int = 0

    @property
    def rows(self) -> int:
        return self.row_end - self.row_start


@dataclasses.dataclass
class BatchMetadata:
    """Everything a step needs about its batch, on the host (int32 CPU tensors, Python ints and lists).

    positions [T]      position of each token in its request
    token_req [T]      request (block-table row) of each token
    slot_mapping [T]   cache slot each token is written to
    block_table [B, M] block ids (M = blocks of the longest request; unused entries 0)
    state_slot [B]     k-pool tail-state rows
    row_keys [T]       indexer keys row t sees ((pos + 1) // kpool)
    ks, ke [T]         prefill rows: key range in their indexer chunk's flat key array (decode rows 0)
    gather_base [T]    gathered path, prefill rows: offset of the request's context in its gather chunk (-1 else)
    graph_bucket       a graph step's bucket (build_metadata's graph), else None
    """

    limits: BatchLimits
    num_reqs: int
    num_tokens: int
    num_decodes: int
    num_decode_tokens: int
    query_start: list[int]
    seq_lens: list[int]
    max_block_id: int
    positions: torch.Tensor
    token_req: torch.Tensor
    slot_mapping: torch.Tensor
    block_table: torch.Tensor
    state_slot: torch.Tensor
    row_keys: torch.Tensor
    ks: torch.Tensor
    ke: torch.Tensor
    gather_base: torch.Tensor
    decode_chunks: list[Chunk]
    prefill_chunks: list[Chunk]
    gather_chunks: list[Chunk]
    graph_bucket: int | None = None

    @property
    def num_prefill_tokens(self) -> int:
        return self.num_tokens - self.num_decode_tokens

    @property
    def num_prefills(self) -> int:
        return self.num_reqs - self.num_decodes


def _int(name: str, v, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return v


def validate_requests(requests: Sequence[Request], limits: BatchLimits) -> None:
    """ValueError naming the problem for a batch this backend cannot run (before anything runs)."""
    if not isinstance(requests, Sequence) or len(requests) == 0:
        raise ValueError("requests must be a non-empty list of Request")
    if len(requests) > limits.max_num_reqs:
        raise ValueError(f"requests: {len(requests)} requests, more than max_num_reqs={limits.max_num_reqs}")
    total = 0
    seen_prefill = False
    bs, most, dt = limits.block_size, limits.max_model_len, limits.decode_threshold
    for i, r in enumerate(requests):
        if not isinstance(r, Request):
            raise ValueError(f"requests[{i}] must be a Request, got {type(r).__name__}")
        cached, sched, state = r.num_cached, r.num_scheduled, r.state_slot
        if type(cached) is not int or type(sched) is not int or type(state) is not int or cached < 0 or sched < 1 \
                or state < 0:  # the common case in one test; _int names the field (and takes int subclasses)
            cached = _int(f"requests[{i}].num_cached", cached)
            sched = _int(f"requests[{i}].num_scheduled", sched, 1)
            _int(f"requests[{i}].state_slot", state)
        seq = cached + sched
        if seq > most:
            raise ValueError(f"requests[{i}]: {seq} tokens of context, more than max_model_len={most}")
        need = -(-seq // bs)
        if len(r.block_table) < need:
            raise ValueError(f"requests[{i}].block_table must hold {need} blocks for {seq} tokens, "
                             f"got {len(r.block_table)}")
        if sched <= dt:
            if seen_prefill:
                raise ValueError(f"requests must list decodes (<= {dt} scheduled tokens) before prefill chunks; "
                                 f"requests[{i}] is a decode after a prefill")
        else:
            seen_prefill = True
        total += sched
    if total > limits.max_num_tokens:
        raise ValueError(f"requests: {total} scheduled tokens, more than max_num_tokens={limits.max_num_tokens}")


def _int_tensor(name: str, v, dims: int, rows: int | None = None) -> np.ndarray:
    """v (an integer CPU tensor of `dims` dimensions and `rows` rows) as int64 numpy; ValueError naming it otherwise."""
    if not isinstance(v, torch.Tensor) or v.dim() != dims or v.device.type != "cpu":
        raise ValueError(f"{name} must be a {dims}-D CPU tensor, got "
                         f"{type(v).__name__ if not isinstance(v, torch.Tensor) else f'{v.dim()}-D on {v.device}'}")
    if v.dtype.is_floating_point or v.dtype.is_complex or v.dtype == torch.bool:
        raise ValueError(f"{name} must hold integers, got {v.dtype}")
    if rows is not None and v.shape[0] != rows:
        raise ValueError(f"{name} must have {rows} rows (one a request), got {v.shape[0]}")
    return v.numpy().astype(np.int64, copy=False)


def _first_bad(name: str, bad: np.ndarray, what: str, values: np.ndarray | None = None) -> None:
    """ValueError naming the first request i where bad[i] (with its value when given)."""
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        got = f", got {int(values[i])}" if values is not None else ""
        raise ValueError(f"{name.format(i=i)} {what}{got}")


def validate_batch(batch: RequestBatch, limits: BatchLimits) -> tuple[np.ndarray, ...]:
    """validate_requests for a RequestBatch, on whole arrays; returns (num_cached, num_scheduled, block table
    [B, most blocks needed] with 0 past each request's blocks, state_slot), int64 numpy (with build_metadata in numpy
    too, 128 decodes' prepare 0.46-0.49 -> 0.23-0.25 ms against torch: bench/logs/s50/prepare_ab2.log)."""
    if not isinstance(batch, RequestBatch):
        raise ValueError(f"requests must be a list of Request or a RequestBatch, got {type(batch).__name__}")
    cached = _int_tensor("requests.num_cached", batch.num_cached, 1)
    b = cached.shape[0]
    if b == 0:
        raise ValueError("requests must hold at least one request")
    if b > limits.max_num_reqs:
        raise ValueError(f"requests: {b} requests, more than max_num_reqs={limits.max_num_reqs}")
    sched = _int_tensor("requests.num_scheduled", batch.num_scheduled, 1, b)
    table = _int_tensor("requests.block_table", batch.block_table, 2, b)
    state = (np.zeros(b, dtype=np.int64) if batch.state_slot is None
             else _int_tensor("requests.state_slot", batch.state_slot, 1, b))
    _first_bad("requests.num_cached[{i}]", cached < 0, "must be >= 0", cached)
    _first_bad("requests.num_scheduled[{i}]", sched < 1, "must be >= 1", sched)
    _first_bad("requests.state_slot[{i}]", state < 0, "must be >= 0", state)
    seq = cached + sched
    _first_bad("requests[{i}]:", seq > limits.max_model_len, f"more tokens of context than max_model_len="
               f"{limits.max_model_len}", seq)
    need = -(-seq // limits.block_size)
    most = int(need.max())
    _first_bad("requests.block_table[{i}]", need > table.shape[1], f"must hold the request's blocks, but has "
               f"{table.shape[1]} columns; blocks needed", need)
    prefill = sched > limits.decode_threshold
    after = np.logical_or.accumulate(prefill)       # a prefill at or before i
    _first_bad("requests[{i}]", ~prefill & after, f"is a decode after a prefill chunk: requests must list decodes "
               f"(<= {limits.decode_threshold} scheduled tokens) first")
    total = int(sched.sum())
    if total > limits.max_num_tokens:
        raise ValueError(f"requests: {total} scheduled tokens, more than max_num_tokens={limits.max_num_tokens}")
    table = table[:, :most]
    used = np.arange(most)[None, :] < need[:, None]
    _first_bad("requests.block_table[{i}]", ((table < 0) & used).any(1), "must hold block ids >= 0")
    return cached, sched, np.where(used, table, 0), state


def decodes_first(requests: Sequence[Request], decode_threshold: int = 1) -> list[int]:
    """A stable order of `requests` with decodes first (for engines whose batches are not ordered)."""
    return sorted(range(len(requests)), key=lambda i: requests[i].num_scheduled > decode_threshold)


# -------------------------------------------------------------------------------------------------
# chunk plans
# -------------------------------------------------------------------------------------------------

def _largest(lo: int, hi: int, fits) -> int:
    """Largest m in [lo, hi] with fits(m), given fits is monotone (true then false); lo - 1 if none."""
    best = lo - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def default_chunk_bytes(rows: int, width: int, num_keys: int) -> int:
    """Bytes of an indexer chunk without top-k scratch: fp32 logits plus gathered 132-byte keys."""
    return 4 * rows * width + 132 * num_keys


def plan_indexer_chunks(spans: Sequence[tuple[int, int, int, int]], kpool: int, cap_bytes: int,
                        chunk_bytes: ChunkBytes = default_chunk_bytes, gather_keys: bool = True,
                        min_width: int = 0) -> list[Chunk]:
    """Row chunks of the indexer with ``chunk_bytes(rows, width, num_keys) <= cap_bytes``.

    spans: (request, first row, end row, position of the first row) of consecutive requests.
    gather_keys (flat prefill keys): each chunk gathers, per request, keys [0, keys of its last row in
    the chunk) as one piece; without it (paged decode) pieces are empty and num_keys 0.
    min_width: every chunk at least this wide (a graph step's bucket, at least every row's keys: then every
    chunk's width is min_width and, without gathered keys, the chunks depend on the row counts alone).
    chunk_bytes must grow with each argument.
    """
    if not spans:
        return []

    def keys_at(pos: int) -> int:
        return (pos + 1) // kpool

    # the common case first: every row in one chunk
    lasts = [keys_at(pos0 + row1 - 1 - row0) for _, row0, row1, pos0 in spans]
    total_keys = sum(lasts) if gather_keys else 0
    widest = max(max(lasts), min_width)
    if chunk_bytes(spans[-1][2] - spans[0][1], widest, total_keys) <= cap_bytes:
        offsets = itertools.accumulate(lasts, initial=0)
        pieces = tuple(Piece(req, n, o) for (req, *_), n, o in zip(spans, lasts, offsets)) if gather_keys else ()
        return [Chunk(spans[0][1], spans[-1][2], widest, pieces, total_keys)]

    chunks: list[Chunk] = []
    start = spans[0][1]
    width, nkeys, rows = min_width, 0, 0
    pieces: list[Piece] = []
    for req, row0, row1, pos0 in spans:
        i = row0
        while i < row1:
            def fits(m, i=i):
                last = keys_at(pos0 + (i - row0) + m - 1)
                return chunk_bytes(rows + m, max(width, last), nkeys + last * gather_keys) <= cap_bytes
            m = _largest(1, row1 - i, fits)
            if m < 1:
                if rows == 0:
                    raise ValueError(f"indexer cap of {cap_bytes} bytes cannot hold one row of request {req}")
                chunks.append(Chunk(start, i, width, tuple(pieces), nkeys))
                start, width, nkeys, rows, pieces = i, min_width, 0, 0, []
                continue
            # m is the most rows that fit, so the request's next rows (if any) open a new chunk.
            last = keys_at(pos0 + (i - row0) + m - 1)
            if gather_keys:
                pieces.append(Piece(req, last, nkeys))
                nkeys += last
            width = max(width, last)
            rows += m
            i += m
    if rows:
        chunks.append(Chunk(start, start + rows, width, tuple(pieces), nkeys))
    return chunks


def plan_gather_chunks(spans: Sequence[tuple[int, int, int, int]], cap_tokens: int) -> list[Chunk]:
    """Request chunks of the gathered-context path: whole requests, context rows summing to <= cap.

    spans: (request, first row, end row, context tokens [seq_len]) of consecutive prefill requests.
    """
    chunks: list[Chunk] = []
    pieces: list[Piece] = []
    start = total = 0
    for req, row0, row1, seq_len in spans:
        if pieces and total + seq_len > cap_tokens:
            chunks.append(Chunk(start, row0, 0, tuple(pieces), total))
            pieces, total = [], 0
        if not pieces:
            start = row0
        pieces.append(Piece(req, seq_len, total))
        total += seq_len
    if pieces:
        chunks.append(Chunk(start, spans[-1][2], 0, tuple(pieces), total))
    return chunks


# -------------------------------------------------------------------------------------------------
# the builder
# -------------------------------------------------------------------------------------------------

def _ids_array(ids) -> np.ndarray:
    """Block ids given as a list, tuple or numpy array, as numpy (this in place of torch.tensor, with the faster field
    checks of validate_requests: 128 decodes' prepare with list tables 2.62-2.82 -> 0.94-1.02 ms,
    bench/logs/s50/prepare_ab.log); ValueError unless they are integers."""
    try:
        arr = np.asarray(ids)
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"requests[*].block_table must hold integer block ids ({e})") from None
    if arr.dtype.kind not in "iu" or arr.dtype == np.uint64:  # floats, bools, strings, objects (ints past int64)
        raise ValueError(f"requests[*].block_table must hold integer block ids, got {arr.dtype}")
    return arr


def _block_table(requests: Sequence[Request], need: np.ndarray) -> np.ndarray:
    """[B, max(need)] int64 numpy: each request's first need[i] block ids, 0 after; ValueError on a bad id. Tables given
    as lists are joined into one list and converted once, tensor tables joined by one torch.cat."""
    parts, ints = [], []
    for r, n in zip(requests, need.tolist()):
        t = r.block_table
        if type(t) is list:
            ints += t if len(t) == n else t[:n]
            continue
        if ints:
            parts.append(_ids_array(ints))
            ints = []
        if isinstance(t, torch.Tensor):
            t = t if t.dim() == 1 else t.reshape(-1)
            t = t if t.shape[0] == n else t[:n]
            if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
                raise ValueError(f"requests[*].block_table must hold integer block ids, got {t.dtype}")
            parts.append(t if t.is_cpu else t.cpu())
        else:
            parts.append(_ids_array(t[:n]))
    if ints:
        parts.append(_ids_array(ints))
    if all(isinstance(x, torch.Tensor) for x in parts):  # one torch.cat (a C loop) for tensor tables
        flat = torch.cat(parts).numpy()
    else:
        flat = np.concatenate([x.numpy() if isinstance(x, torch.Tensor) else x for x in parts])
    flat = flat.astype(np.int64, copy=False)
    if (flat < 0).any():
        i = int(np.searchsorted(np.cumsum(need), np.flatnonzero(flat < 0)[0], side="right"))
        raise ValueError(f"requests[{i}].block_table must hold block ids >= 0")
    table = np.zeros((len(requests), int(need.max())), dtype=np.int64)
    table[np.arange(table.shape[1])[None, :] < need[:, None]] = flat
    return table


def graph_bucket(max_seq_len: int, limits: BatchLimits) -> int:
    """A graph step's bucket: the power of two at or above its longest request's tokens, or with n =
    limits.graph_bucket_steps > 1 the first of n equal steps from half that power of two up to it (n = 4: 4096, 5120,
    6144, 7168, 8192, 10240, ...), at most max_model_len."""
    top = 1 << max(max_seq_len - 1, 0).bit_length()
    n = limits.graph_bucket_steps
    if n > 1 and top >= 2 * n:
        half, step = top // 2, top // (2 * n)
        top = half + -(-(max_seq_len - half) // step) * step
    return min(top, limits.max_model_len)


def build_metadata(requests: Sequence[Request] | RequestBatch, limits: BatchLimits, *,
                   gathered_prefill: bool = False, chunk_bytes: ChunkBytes = default_chunk_bytes,
                   graph: bool = False) -> BatchMetadata:
    """Host metadata of one step (see BatchMetadata); ValueError if the batch is over the limits.

    gathered_prefill: plan the gathered-context path (fp8 cache, >= 32 heads per rank).
    chunk_bytes: workspace bytes of an indexer chunk (rows, width, gathered keys), under indexer_cap_bytes.
    graph: a decode-only step whose shapes depend on its tokens, requests and bucket (graph_bucket) alone: the block
    table has ceil(bucket / block_size) columns (0 past each request's blocks) and every decode chunk the width
    bucket // kpool (its logits -inf past each row's keys), so that steps of one bucket launch the same kernels with
    the same shapes (a CUDA graph captured for one replays for the others). ValueError for a step with prefill rows.
    """
    bs, p = limits.block_size, limits.kpool
    # numpy throughout (int64), tensors at the end: a step's host arrays are small, where torch's per-operation cost
    # dominated (bench/logs/s50/prepare_ab2.log)
    if isinstance(requests, RequestBatch):
        cached, sched, table, state = validate_batch(requests, limits)
        seq = cached + sched
    else:
        validate_requests(requests, limits)
        cached = np.array([r.num_cached for r in requests], dtype=np.int64)
        sched = np.array([r.num_scheduled for r in requests], dtype=np.int64)
        seq = cached + sched
        table = _block_table(requests, -(-seq // bs))
        state = np.array([r.state_slot for r in requests], dtype=np.int64)
    b = seq.shape[0]
    qs = np.zeros(b + 1, dtype=np.int64)
    np.cumsum(sched, out=qs[1:])
    t = int(qs[-1])
    token_req = np.repeat(np.arange(b), sched)
    positions = np.arange(t) - qs[token_req] + cached[token_req]

    slot_mapping = table[token_req, positions // bs] * bs + positions % bs
    max_block_id = int(table.max())

    nd = int((sched <= limits.decode_threshold).sum())
    ndt = int(qs[nd])
    bucket = None
    if graph:
        if nd < b:
            raise ValueError(f"requests: a graph step takes decodes only (<= {limits.decode_threshold} scheduled "
                             f"tokens), got {b - nd} prefill chunks")
        bucket = graph_bucket(int(seq.max()), limits)
        cols = -(-bucket // bs)
        if table.shape[1] < cols:
            table = np.pad(table, ((0, 0), (0, cols - table.shape[1])))
    ql = qs.tolist()
    cl, sl = cached.tolist(), seq.tolist()
    row_keys = (positions + 1) // p

    spans_dec = [(i, ql[i], ql[i + 1], cl[i]) for i in range(nd)]
    spans_pre = [(i, ql[i], ql[i + 1], cl[i]) for i in range(nd, b)]
    cap = limits.indexer_cap_bytes
    decode_chunks = plan_indexer_chunks(spans_dec, p, cap, chunk_bytes, gather_keys=False,
                                        min_width=bucket // p if graph else 0)
    prefill_chunks = plan_indexer_chunks(spans_pre, p, cap, chunk_bytes, gather_keys=True)
    ks = np.zeros(t, dtype=np.int64)
    ke = np.zeros(t, dtype=np.int64)
    for c in prefill_chunks:
        for piece in c.pieces:
            lo, hi = max(c.row_start, ql[piece.req]), min(c.row_end, ql[piece.req + 1])
            ks[lo:hi] = piece.offset
            ke[lo:hi] = piece.offset + row_keys[lo:hi]

    gather_base = np.full(t, -1, dtype=np.int64)
    gather_chunks: list[Chunk] = []
    if gathered_prefill and nd < b:
        spans = [(i, ql[i], ql[i + 1], sl[i]) for i in range(nd, b)]
        gather_chunks = plan_gather_chunks(spans, limits.gather_tokens)
        for c in gather_chunks:
            for piece in c.pieces:
                gather_base[ql[piece.req]:ql[piece.req + 1]] = piece.offset

    def i32(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int32))

    return BatchMetadata(
        limits=limits, num_reqs=b, num_tokens=t, num_decodes=nd, num_decode_tokens=ndt,
        query_start=ql, seq_lens=sl, max_block_id=max_block_id, graph_bucket=bucket,
        positions=i32(positions), token_req=i32(token_req), slot_mapping=i32(slot_mapping),
        block_table=i32(table), state_slot=i32(state),
        row_keys=i32(row_keys), ks=i32(ks), ke=i32(ke), gather_base=i32(gather_base),
        decode_chunks=decode_chunks, prefill_chunks=prefill_chunks, gather_chunks=gather_chunks)
