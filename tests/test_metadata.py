"""Batch metadata (SPEC 7): per-token arrays, validation, and the chunk plans of the indexer and the
gathered-context path."""
import random

import pytest
import torch

from dsattn.backend.metadata import (BatchLimits, Request, RequestBatch, build_metadata, decodes_first,
                                     default_chunk_bytes, graph_bucket, plan_gather_chunks, plan_indexer_chunks)

LIMITS = BatchLimits(max_num_tokens=64, max_num_reqs=8, max_model_len=200, block_size=16)


def _batch():
    return [Request(37, 1, [5, 2, 9]), Request(0, 1, [7]), Request(40, 7, [1, 3, 4, 0]),
            Request(0, 23, [6, 8]), Request(17, 9, [10, 11, 12])]


def test_per_token_arrays():
    m = build_metadata(_batch(), LIMITS)
    assert (m.num_reqs, m.num_tokens, m.num_decodes, m.num_decode_tokens) == (5, 41, 2, 2)
    assert m.query_start == [0, 1, 2, 9, 32, 41] and m.seq_lens == [38, 1, 47, 23, 26]
    pos = [37, 0] + list(range(40, 47)) + list(range(23)) + list(range(17, 26))
    assert m.positions.tolist() == pos
    assert m.token_req.tolist() == [0, 1] + [2] * 7 + [3] * 23 + [4] * 9
    for t, (r, p) in enumerate(zip(m.token_req.tolist(), pos)):
        assert m.slot_mapping[t] == _batch()[r].block_table[p // 16] * 16 + p % 16
    assert m.block_table.shape == (5, 3) and m.block_table[1].tolist() == [7, 0, 0]  # blocks the step uses
    assert m.row_keys.tolist() == [p + 1 for p in pos]
    assert m.max_block_id == 11  # block 12 is past request 4's 26 tokens
    assert all(a.dtype == torch.int32 for a in (m.positions, m.token_req, m.slot_mapping, m.ks, m.ke))


def test_kpool_row_keys():
    lim = BatchLimits(max_num_tokens=64, max_num_reqs=8, max_model_len=200, block_size=16, kpool=4)
    m = build_metadata([Request(1, 1, [0]), Request(2, 6, [1])], lim)
    assert m.row_keys.tolist() == [0, 0, 1, 1, 1, 1, 2]  # positions 1; 2..7


@pytest.mark.parametrize("requests, match", [
    ([Request(0, 30, [0, 1]), Request(0, 35, [2, 3, 4])], "65 scheduled tokens, more than max_num_tokens=64"),
    ([Request(3, 1, [i]) for i in range(9)], "9 requests, more than max_num_reqs=8"),
    ([Request(195, 6, list(range(13)))], "201 tokens of context, more than max_model_len=200"),
    ([Request(20, 1, [0])], r"requests\[0\].block_table must hold 2 blocks"),
    ([Request(20, 1, [0, -1])], "block ids >= 0"),
    ([Request(0, 5, [0]), Request(3, 1, [1])], "decodes .* before prefill"),
    ([Request(0, 0, [0])], "num_scheduled"),
    ([], "non-empty"),
])
def test_rejects_batches_over_the_limits(requests, match):
    with pytest.raises(ValueError, match=match):
        build_metadata(requests, LIMITS)


def test_limits_reject():
    with pytest.raises(ValueError, match="indexer_cap_bytes"):
        BatchLimits(max_num_tokens=8, max_num_reqs=2, max_model_len=1000, block_size=16, indexer_cap_bytes=4000)
    with pytest.raises(ValueError, match="gather_cap_tokens"):
        BatchLimits(max_num_tokens=8, max_num_reqs=2, max_model_len=100, block_size=16, gather_cap_tokens=99)
    with pytest.raises(ValueError, match="multiple of kpool"):
        BatchLimits(max_num_tokens=8, max_num_reqs=2, max_model_len=100, block_size=6, kpool=4)


def test_decodes_first():
    reqs = [Request(0, 5, [0]), Request(3, 1, [1]), Request(0, 2, [2]), Request(9, 1, [3])]
    assert decodes_first(reqs) == [1, 3, 0, 2]
    assert decodes_first(reqs, decode_threshold=2) == [1, 2, 3, 0]


def _spans(seed, n=6):
    rng = random.Random(seed)
    spans, row = [], 0
    for r in range(n):
        cached, sched = rng.randint(0, 300), rng.randint(1, 40)
        spans.append((r, row, row + sched, cached))
        row += sched
    return spans


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kpool", [1, 4])
def test_indexer_chunks_cover_rows_under_the_cap(seed, kpool):
    spans = _spans(seed)
    cap = default_chunk_bytes(1, 340 // kpool, 340 // kpool) * random.Random(seed).choice([1, 3, 20, 1000])
    chunks = plan_indexer_chunks(spans, kpool, cap)
    assert chunks[0].row_start == spans[0][1] and chunks[-1].row_end == spans[-1][2]
    assert all(a.row_end == b.row_start for a, b in zip(chunks, chunks[1:]))
    for c in chunks:
        assert c.rows > 0 and default_chunk_bytes(c.rows, c.width, c.num_keys) <= cap
        # every row's keys are in its piece, and the pieces tile the flat key array
        off = 0
        for p in c.pieces:
            assert p.offset == off
            off += p.num_keys
            req, row0, row1, pos0 = spans[p.req]
            last = min(c.row_end, row1) - 1
            assert p.num_keys == (pos0 + last - row0 + 1) // kpool
            assert p.num_keys <= c.width
        assert off == c.num_keys
    # a tight cap splits; a loose one does not
    assert len(plan_indexer_chunks(spans, kpool, 1 << 40)) == 1


def test_indexer_decode_chunks_hold_no_keys():
    spans = [(r, r, r + 1, 100 + r) for r in range(10)]
    chunks = plan_indexer_chunks(spans, 1, 4 * 110 * 3, gather_keys=False)
    assert [c.rows for c in chunks] == [3, 3, 3, 1] and all(c.num_keys == 0 and not c.pieces for c in chunks)
    assert [c.width for c in chunks] == [103, 106, 109, 110]


def test_ks_ke_index_the_chunk_keys():
    reqs = [Request(5, 1, [0]), Request(40, 7, [1, 2, 3]), Request(0, 23, [4, 5]), Request(17, 9, [6, 7])]
    m = build_metadata(reqs, BatchLimits(max_num_tokens=64, max_num_reqs=8, max_model_len=48, block_size=16,
                                         indexer_cap_bytes=default_chunk_bytes(6, 48, 48 + 23)))
    assert len(m.prefill_chunks) > 1
    for c in m.prefill_chunks:
        for p in c.pieces:
            lo, hi = max(c.row_start, m.query_start[p.req]), min(c.row_end, m.query_start[p.req + 1])
            assert (m.ks[lo:hi] == p.offset).all()
            assert (m.ke[lo:hi] - m.ks[lo:hi] == m.row_keys[lo:hi]).all()


def test_gather_chunks():
    spans = [(1, 3, 10, 50), (2, 10, 12, 80), (3, 12, 30, 30), (4, 30, 31, 100)]
    chunks = plan_gather_chunks(spans, 110)
    assert [(c.row_start, c.row_end, c.num_keys) for c in chunks] == [(3, 10, 50), (10, 30, 110), (30, 31, 100)]
    assert [(p.req, p.num_keys, p.offset) for p in chunks[1].pieces] == [(2, 80, 0), (3, 30, 80)]
    reqs = [Request(3, 1, [0]), Request(40, 7, [1, 2, 3]), Request(0, 23, [4, 5])]
    for cap, second in ((70, 47), (50, 0)):  # both prefills in one chunk, or one chunk each
        m = build_metadata(reqs, BatchLimits(max_num_tokens=64, max_num_reqs=8, max_model_len=50, block_size=16,
                                             gather_cap_tokens=cap), gathered_prefill=True)
        assert m.gather_base.tolist() == [-1] + [0] * 7 + [second] * 23
        assert len(m.gather_chunks) == (1 if second else 2)


def test_block_tables_as_tensors():
    lists = _batch()
    tensors = [Request(r.num_cached, r.num_scheduled, torch.tensor(r.block_table, dtype=torch.int32))
               for r in lists]
    a, b = build_metadata(lists, LIMITS), build_metadata(tensors, LIMITS)
    assert torch.equal(a.block_table, b.block_table) and torch.equal(a.slot_mapping, b.slot_mapping)
    with pytest.raises(ValueError, match="integer block ids"):
        build_metadata([Request(3, 1, torch.tensor([1.0]))], LIMITS)
    with pytest.raises(ValueError, match=r"requests\[1\].block_table must hold block ids >= 0"):
        build_metadata([Request(3, 1, torch.tensor([1])), Request(3, 1, torch.tensor([-2]))], LIMITS)


def test_block_table_forms():
    """A request's block table as a list, tuple, numpy array (int32 / int64) or 1-D tensor of either width, also
    longer than the request needs: the same metadata as lists; non-integer ids rejected by name."""
    np = pytest.importorskip("numpy")
    lists = _batch()
    forms = [tuple, lambda b: np.array(b, dtype=np.int32), lambda b: np.array(b + [3, 99]),
             lambda b: torch.tensor(b),
             lambda b: torch.tensor(b + [-5], dtype=torch.int32)]     # ids past the request's blocks are not read
    want = build_metadata(lists, LIMITS)
    for i in range(len(forms)):  # every request in its own form, rotated
        reqs = [Request(r.num_cached, r.num_scheduled, forms[(i + j) % len(forms)](list(r.block_table)))
                for j, r in enumerate(lists)]
        _same_metadata(want, build_metadata(reqs, LIMITS))
    for bad in ([1.5], ["a"], [2**70], np.array([0.5])):
        with pytest.raises(ValueError, match="integer block ids"):
            build_metadata([Request(3, 1, bad)], LIMITS)
    with pytest.raises(ValueError, match=r"requests\[1\].block_table must hold block ids >= 0"):
        build_metadata([Request(3, 1, (4,)), Request(3, 1, np.array([-1]))], LIMITS)


@pytest.mark.parametrize("value, field, match", [
    (True, "num_cached", r"requests\[0\].num_cached must be an int >= 0, got True"),
    (1.0, "num_scheduled", r"requests\[0\].num_scheduled must be an int >= 1, got 1.0"),
    (-1, "state_slot", r"requests\[0\].state_slot must be an int >= 0, got -1"),
])
def test_request_fields_checked(value, field, match):
    r = dict(num_cached=3, num_scheduled=1, block_table=[0], state_slot=0)
    r[field] = value
    with pytest.raises(ValueError, match=match):
        build_metadata([Request(**r)], LIMITS)


def test_int_subclass_fields_taken():
    """Fields of an int subclass (not bool) pass as their int values, as before the fast check."""
    import enum

    class N(enum.IntEnum):
        ONE = 1
        FIVE = 5

    a = build_metadata([Request(N.FIVE, N.ONE, [2], state_slot=N.ONE)], LIMITS)
    b = build_metadata([Request(5, 1, [2], state_slot=1)], LIMITS)
    _same_metadata(a, b)


def _same_metadata(a, b):
    for f in a.__dataclass_fields__:
        x, y = getattr(a, f), getattr(b, f)
        assert (torch.equal(x, y) and x.dtype == y.dtype) if isinstance(x, torch.Tensor) else x == y, f


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kpool, gathered", [(1, False), (4, False), (1, True)])
def test_request_batch_gives_the_same_metadata(seed, kpool, gathered):
    """RequestBatch (the requests as tensors, checked without a loop over them) builds field for field the metadata
    of the same list of Request: per-token arrays, block table, chunk plans, gathered chunks."""
    rng = random.Random(seed)
    lim = BatchLimits(max_num_tokens=256, max_num_reqs=16, max_model_len=300, block_size=16, kpool=kpool,
                      indexer_cap_bytes=default_chunk_bytes(40, 300, 300), gather_cap_tokens=400)
    reqs, at = [], 0
    for i in range(rng.randint(1, 16)):
        sched = 1 if i < 5 else rng.randint(1, 30)
        if i >= 5 and sched == 1:
            sched = 2
        cached = rng.randint(0, 300 - sched)
        n = -(-(cached + sched) // 16) + rng.randint(0, 2)       # spare blocks past the request's own
        reqs.append(Request(cached, sched, list(range(at, at + n)), state_slot=rng.randint(0, 9)))
        at += n
    while sum(r.num_scheduled for r in reqs) > 256:
        reqs.pop()
    batch = RequestBatch.from_requests(reqs)
    batch.block_table[batch.block_table == 0] = -1 if seed % 2 else 0   # padding past the blocks is not read
    batch.block_table[0, 0] = reqs[0].block_table[0]
    _same_metadata(build_metadata(reqs, lim, gathered_prefill=gathered),
                   build_metadata(batch, lim, gathered_prefill=gathered))
    without_state = RequestBatch(batch.num_cached, batch.num_scheduled, batch.block_table.int())
    assert build_metadata(without_state, lim).state_slot.tolist() == [0] * len(reqs)


def _tensors(cached, sched, table, state=None):
    t = torch.tensor
    return RequestBatch(t(cached), t(sched), t(table), None if state is None else t(state))


@pytest.mark.parametrize("batch, match", [
    (_tensors([0, 0], [30, 35], [[0, 1, 0], [2, 3, 4]]), "65 scheduled tokens, more than max_num_tokens=64"),
    (_tensors([3] * 9, [1] * 9, [[i] for i in range(9)]), "9 requests, more than max_num_reqs=8"),
    (_tensors([195], [6], [list(range(13))]), r"requests\[0\]: more tokens of context than max_model_len=200, got 201"),
    (_tensors([3, 40], [1, 1], [[0, 0], [0, 0]]),
     r"requests.block_table\[1\] must hold the request's blocks, but has 2 columns; blocks needed, got 3"),
    (_tensors([3, 20], [1, 1], [[0], [1]]), r"requests.block_table\[1\] must hold the request's blocks.*1 columns"),
    (_tensors([3, 20], [1, 1], [[0, 5], [4, -1]]), r"requests.block_table\[1\] must hold block ids >= 0"),
    (_tensors([0, 3], [5, 1], [[0], [1]]), r"requests\[1\] is a decode after a prefill chunk"),
    (_tensors([0], [0], [[0]]), r"requests.num_scheduled\[0\] must be >= 1, got 0"),
    (_tensors([1, -4], [1, 1], [[0], [1]]), r"requests.num_cached\[1\] must be >= 0, got -4"),
    (_tensors([1], [1], [[0]], [-1]), r"requests.state_slot\[0\] must be >= 0, got -1"),
    (RequestBatch(*(torch.zeros(0, dtype=torch.int64),) * 2, torch.zeros(0, 1, dtype=torch.int64)),
     "at least one request"),
    (_tensors([1.0], [1], [[0]]), "requests.num_cached must hold integers"),
    (_tensors([1, 2], [1], [[0], [1]]), "requests.num_scheduled must have 2 rows"),
    (RequestBatch(torch.tensor([1]), torch.tensor([1]), torch.tensor([0])), "requests.block_table must be a 2-D"),
    (RequestBatch([1], torch.tensor([1]), torch.tensor([[0]])),
     "requests.num_cached must be a 1-D CPU tensor, got list"),
])
def test_request_batch_rejects(batch, match):
    with pytest.raises(ValueError, match=match):
        build_metadata(batch, LIMITS)


def test_request_batch_from_no_requests():
    with pytest.raises(ValueError, match="non-empty list of Request"):
        RequestBatch.from_requests([])


def test_graph_buckets():
    """graph_bucket: powers of two (at most max_model_len), or n equal steps a doubling with graph_bucket_steps n."""
    lim = BatchLimits(max_num_tokens=8, max_num_reqs=4, max_model_len=163840, block_size=64)
    assert [graph_bucket(n, lim) for n in (1, 2, 3, 4096, 4097, 12224, 131073, 163840)] == \
        [1, 2, 4, 4096, 8192, 16384, 163840, 163840]
    lim4 = BatchLimits(max_num_tokens=8, max_num_reqs=4, max_model_len=163840, block_size=64, graph_bucket_steps=4)
    assert [graph_bucket(n, lim4) for n in (1, 5, 4096, 4097, 5121, 7168, 7169, 12224, 140000)] == \
        [1, 5, 4096, 5120, 6144, 7168, 8192, 12288, 163840]
    for n in range(1, 3000):
        b = graph_bucket(n, lim4)
        assert n <= b and (b == graph_bucket(b, lim4))   # a bucket is its own bucket
    with pytest.raises(ValueError, match="graph_bucket_steps"):
        BatchLimits(max_num_tokens=8, max_num_reqs=4, max_model_len=100, block_size=16, graph_bucket_steps=3)


def test_graph_metadata():
    """A graph step: block table widened to the bucket's blocks (0 past each request's), the decode chunk to the
    bucket's keys; decodes only."""
    lim = BatchLimits(max_num_tokens=16, max_num_reqs=4, max_model_len=200, block_size=16, kpool=4)
    m = build_metadata([Request(37, 1, [5, 2, 9]), Request(3, 1, [7])], lim, graph=True)
    assert m.graph_bucket == 64 and m.block_table.tolist() == [[5, 2, 9, 0], [7, 0, 0, 0]]
    assert [(c.row_start, c.row_end, c.width) for c in m.decode_chunks] == [(0, 2, 16)]
    plain = build_metadata([Request(37, 1, [5, 2, 9]), Request(3, 1, [7])], lim)
    assert plain.graph_bucket is None and plain.block_table.shape == (2, 3) and plain.decode_chunks[0].width == 9
    assert torch.equal(m.slot_mapping, plain.slot_mapping) and torch.equal(m.row_keys, plain.row_keys)
    with pytest.raises(ValueError, match="decodes only"):
        build_metadata([Request(37, 1, [5, 2, 9]), Request(0, 5, [7])], lim, graph=True)
