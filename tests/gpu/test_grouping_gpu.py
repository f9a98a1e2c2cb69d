"""grouping IMPL 'dense_smem' (grouping_smem.py: each group's dense map built in shared memory by one Gluon program
with inline PTX atomics) on the GPU: the same union lists as the reference entry for entry (the dense path's order),
and the same scratch rows bit for bit as the global-memory dense path (masks past counts hold the same map words), over
poisoned scratch, at the prefill's sizes (overlap indices, topk 2048, 16384 slots, G 8 / 4 / 2) and at small ones
with repeated slots (the rebuild), -1 / past-the-end / negative entries, topk_length, chunks and partial last groups;
then the grouped prefill under it, bit-equal to the global-memory dense path. Then IMPL 'dense_fused' (auto's choice
since session 37: map and compaction in one shared-memory program), entry for entry against the reference on the same
kinds of input and at the dense path's limits, the prefill bit-equal. Last, the hash path's order over nearly full
tables: the same in every call, and the same whether or not inserts gave up (session 47). Skipped without CUDA."""
import pytest
import torch

from dsattn.ops.sparse_mla import grouping, grouping_smem

pytestmark = pytest.mark.gpu
DEV = "cuda"


def _spy_on(monkeypatch, name):
    """Records the G of each call of grouping_smem.<name> (so a test fails if build_groups quietly took another
    path)."""
    calls = []
    real = getattr(grouping_smem, name)

    def launch(*a, **kw):
        calls.append(a[3])
        return real(*a, **kw)
    monkeypatch.setattr(grouping_smem, name, launch)
    return calls


@pytest.fixture
def spy(monkeypatch):
    """The shared-memory map launches (IMPL 'dense_smem')."""
    return _spy_on(monkeypatch, "launch_map")


def _indices(t, k, num_slots, dup, lens, gen):
    idx = torch.randint(0, num_slots, (t, k), dtype=torch.int32, generator=gen)
    junk = torch.rand(t, k, generator=gen) < 0.15
    bad = torch.tensor([-1, num_slots, num_slots + 7, -5], dtype=torch.int32)
    idx[junk] = bad[torch.randint(0, 4, (int(junk.sum()),), generator=gen)]
    if dup:
        idx[:, 1] = idx[:, 0]
        idx[1::3, k - 1] = idx[1::3, 3]
    tl = torch.randint(0, k + 3, (t,), dtype=torch.int32, generator=gen) if lens else None
    return idx.to(DEV), None if tl is None else tl.to(DEV)


def _build(impl, monkeypatch, idx, tl, num_slots, g, token0, ntokens, rows):
    monkeypatch.delenv("DSATTN_GROUPING_IMPL", raising=False)
    monkeypatch.setattr(grouping, "IMPL", impl)
    width = g * idx.shape[1]
    bufs = [torch.full((rows, width), -7, dtype=torch.int32, device=DEV),
            torch.full((rows, width), -7, dtype=torch.int32, device=DEV),
            torch.full((rows,), -7, dtype=torch.int32, device=DEV)]
    r = grouping.build_groups(idx, tl, num_slots, g, token0, ntokens, *bufs)
    torch.cuda.synchronize()
    return r, bufs


def _check(spy, monkeypatch, idx, tl, num_slots, g, token0, ntokens, rows):
    r, got = _build("dense_smem", monkeypatch, idx, tl, num_slots, g, token0, ntokens, rows)
    assert spy, "the shared-memory map did not run"
    r2, dense = _build("dense", monkeypatch, idx, tl, num_slots, g, token0, ntokens, rows)
    assert r == r2
    for a, b in zip(got, dense):
        assert torch.equal(a, b)
    ref = [x.cpu().clone() for x in dense]
    grouping.build_groups_reference(idx.cpu(), None if tl is None else tl.cpu(), num_slots, g, token0, ntokens, *ref)
    cnt = got[2].cpu()
    for c in range(r):
        n = int(ref[2][c])
        assert int(cnt[c]) == n, c
        assert torch.equal(got[0][c, :n].cpu(), ref[0][c, :n]) and torch.equal(got[1][c, :n].cpu(), ref[1][c, :n]), c


@pytest.mark.parametrize("g, k, t, dup, lens, token0", [
    (2, 32, 7, True, True, 0), (4, 16, 10, True, False, 3), (8, 32, 16, False, True, 0), (16, 16, 20, True, True, 2),
    (3, 48, 11, False, False, 0), (8, 2047, 19, True, True, 1), (4, 2048, 33, False, True, 0)])
def test_dense_smem_matches(spy, monkeypatch, g, k, t, dup, lens, token0):
    gen = torch.Generator().manual_seed(g * 100 + k)
    n = max(3 * k, 64)
    idx, tl = _indices(token0 + t, k, n, dup, lens, gen)
    _check(spy, monkeypatch, idx, tl, n, g, token0, t, -(-t // g) + 1)


@pytest.mark.parametrize("g", [8, 4, 2])
def test_dense_smem_prefill_sizes(spy, monkeypatch, g):
    """Overlap indices (the bench's, -1 in the short rows), topk 2048, 16384 slots (dense's limit at G 8)."""
    from dsattn.bench.kernels_mla import overlap_indices
    idx = overlap_indices(512, 16384, 2048, torch.device(DEV), seed=g)
    _check(spy, monkeypatch, idx, None, 16384, g, 0, 512, 512 // g)


def test_dense_smem_prefill_bit_equal(spy, monkeypatch):
    """sparse_mla_prefill at 16 heads (G 4, the 'native' variant: grouped) under dense_smem: the same union lists, so
    outputs bit-equal."""
    from dsattn.ops.sparse_mla import sparse_mla_prefill
    from dsattn.ops.sparse_mla.testing import check_close, make_case, poisoned_outputs
    case = make_case(200, 16, 576, num_slots=12000, topk=2048, layout="bf16", with_length=True, seed=9, device=DEV)
    outs = []
    monkeypatch.delenv("DSATTN_GROUPING_IMPL", raising=False)
    for impl in ("dense", "dense_smem"):
        monkeypatch.setattr(grouping, "IMPL", impl)
        out, lse = poisoned_outputs(200, 16, DEV)
        sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, topk_length=case.topk_length, out=out,
                           lse=lse, variant="native")
        torch.cuda.synchronize()
        outs.append((out, lse))
    assert spy, "the shared-memory map did not run"
    check_close(*outs[1], *case.reference())
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


# grouping IMPL 'dense_fused' (grouping_smem.dense_union_smem_kernel: the map built and compacted in one program's
# shared memory, then written out whole): the reference's lists entry for entry (ascending slots; a group with a
# repeated slot rebuilt by the repeated-slot kernel), nothing written to the rows of groups not built.

@pytest.fixture
def spy_union(monkeypatch):
    """The fused launches (IMPL 'dense_fused')."""
    return _spy_on(monkeypatch, "launch_union")


def _check_fused(spy_union, monkeypatch, idx, tl, num_slots, g, token0, ntokens, rows):
    r, got = _build("dense_fused", monkeypatch, idx, tl, num_slots, g, token0, ntokens, rows)
    assert spy_union, "the fused union kernel did not run"
    ref = [x.cpu().clone() for x in got]
    assert grouping.build_groups_reference(idx.cpu(), None if tl is None else tl.cpu(), num_slots, g, token0, ntokens,
                                           *ref) == r
    cnt = got[2].cpu()
    for c in range(r):
        n = int(ref[2][c])
        assert int(cnt[c]) == n, c
        assert torch.equal(got[0][c, :n].cpu(), ref[0][c, :n]) and torch.equal(got[1][c, :n].cpu(), ref[1][c, :n]), c
    assert (got[0][r:] == -7).all() and (got[1][r:] == -7).all() and (got[2][r:] == -7).all()


@pytest.mark.parametrize("g, k, t, dup, lens, token0", [
    (2, 32, 7, True, True, 0), (4, 16, 10, True, False, 3), (8, 32, 16, False, True, 0), (16, 16, 20, True, True, 2),
    (3, 48, 11, False, False, 0), (8, 2047, 19, True, True, 1), (4, 2048, 33, False, True, 0),
    (2, 2048, 9, False, False, 0), (2, 1000, 12, True, True, 5), (1, 64, 5, True, True, 0)])
def test_dense_fused_matches(spy_union, monkeypatch, g, k, t, dup, lens, token0):
    gen = torch.Generator().manual_seed(g * 100 + k + 7)
    n = max(3 * k, 64)
    idx, tl = _indices(token0 + t, k, n, dup, lens, gen)
    _check_fused(spy_union, monkeypatch, idx, tl, n, g, token0, t, -(-t // g) + 1)


@pytest.mark.parametrize("g, slots", [(8, 16384), (4, 16384), (2, 16384), (4, 32768), (2, 65536), (2, 100)])
def test_dense_fused_prefill_sizes(spy_union, monkeypatch, g, slots):
    """Overlap indices (the bench's, -1 in the short rows), topk 2048, at the prefill's 16384 slots and at the dense
    path's limits (G 4 32768, G 2 65536 slots), and a slot range smaller than a program's map (100 slots)."""
    from dsattn.bench.kernels_mla import overlap_indices
    idx = overlap_indices(512, max(slots, 16384), 2048, torch.device(DEV), seed=g)
    if slots < 16384:
        idx = torch.where(idx >= 0, idx % (slots + 20), idx)         # a few past the end, and repeats (the rebuild)
    _check_fused(spy_union, monkeypatch, idx, None, slots, g, 0, 512, 512 // g + 1)


def _prefill_under(impls, case, monkeypatch):
    """sparse_mla_prefill ('native') of the case under each grouping IMPL, into poisoned outputs: [(out, lse), ...]."""
    from dsattn.ops.sparse_mla import sparse_mla_prefill
    from dsattn.ops.sparse_mla.testing import poisoned_outputs
    t, heads = case.q.shape[:2]
    outs = []
    for impl in impls:
        monkeypatch.setattr(grouping, "IMPL", impl)
        out, lse = poisoned_outputs(t, heads, case.q.device)
        sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, topk_length=case.topk_length, out=out,
                           lse=lse, variant="native")
        torch.cuda.synchronize()
        outs.append((out, lse))
    return outs


def test_dense_fused_prefill_bit_equal(spy_union, monkeypatch):
    """sparse_mla_prefill at 16 and 32 heads (G 4 / 2, grouped) under dense_fused: the same union lists in the same
    order as the dense path's, so outputs bit-equal."""
    from dsattn.ops.sparse_mla.testing import check_close, make_case
    monkeypatch.delenv("DSATTN_GROUPING_IMPL", raising=False)
    for heads in (16, 32):
        case = make_case(200, heads, 576, num_slots=12000, topk=2048, layout="bf16", with_length=True, seed=9,
                         device=DEV)
        outs = _prefill_under(("dense", "dense_fused"), case, monkeypatch)
        check_close(*outs[1], *case.reference())
        assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    assert spy_union, "the fused union kernel did not run"


# Maps larger than one chunk (session 46: dense_union_smem_kernel compacts its map CHUNK_WORDS words at a time, so the
# fused path's reach is grouping.fused_max_slots, no longer the registers' DENSE_WORDS).

@pytest.mark.parametrize("g, slots", [(8, 16385), (8, 50000), (8, 131072), (4, 262144), (2, 524288), (16, 32768),
                                      (4, 40000)])
def test_dense_fused_past_one_chunk(spy_union, monkeypatch, g, slots):
    """Overlap indices over the whole slot range, the last slot listed by some rows, -1 and past-the-end entries, a few
    rows with a repeated slot (their groups rebuilt), topk_length; at the fused path's limits and between them and one
    chunk: the reference's lists entry for entry."""
    from dsattn.bench.kernels_mla import overlap_indices
    assert dense_fused_reaches(g, slots)
    t = 96
    idx = overlap_indices(t, slots, 2048, torch.device(DEV), seed=g + slots)
    idx[::5, 3] = slots - 1                  # the last field of the last word
    idx[2::5, 11] = slots                    # past the end
    idx[3::7, 17] = -1
    idx[1::29, 9] = idx[1::29, 2]            # repeats: those groups take the repeated-slot kernel
    gen = torch.Generator().manual_seed(slots)
    tl = torch.randint(1500, 2049, (t,), dtype=torch.int32, generator=gen).to(DEV)
    _check_fused(spy_union, monkeypatch, idx, tl, slots, g, 0, t, -(-t // g) + 1)


def dense_fused_reaches(g, slots):
    return grouping.fused_fits(slots, g, 2048) and not grouping.dense_fits(slots, g, 2048)


@pytest.mark.parametrize("g", [8, 4, 2, 16])
def test_dense_fused_limit(spy_union, monkeypatch, g):
    """fused_max_slots runs the fused kernel; one slot more runs the hash path (same lists, in its own order)."""
    top = grouping.fused_max_slots(g, 2048)
    assert top == {8: 131072, 4: 262144, 2: 524288, 16: 32768}[g]
    gen = torch.Generator().manual_seed(g)
    t = 2 * g
    idx = torch.randint(0, top, (t, 2048), dtype=torch.int32, generator=gen)
    idx[:, 0] = top - 1
    _check_fused(spy_union, monkeypatch, idx.to(DEV), None, top, g, 0, t, 3)
    spy_union.clear()
    idx[:, 0] = top
    r, got = _build("dense_fused", monkeypatch, idx.to(DEV), None, top + 1, g, 0, t, 3)
    assert not spy_union, "past the fused limit the hash path runs"
    ref = [x.cpu().clone() for x in got]
    grouping.build_groups_reference(idx, None, top + 1, g, 0, t, *ref)
    assert grouping._same([x.cpu() for x in got], ref, r)


@pytest.mark.parametrize("heads, slots", [(8, 70000), (16, 100000), (32, 300000)])
def test_dense_fused_prefill_over_a_long_source(spy_union, monkeypatch, heads, slots):
    """sparse_mla_prefill ('native', grouped) over a flat source past the registers' reach: within the tolerance of the
    reference, and bit-equal to the sort path's union lists (the same ascending order). Overlap indices (no slot twice
    in a row, so no group is rebuilt), some -1 and past the end, topk_length."""
    from dsattn.bench.kernels_mla import overlap_indices
    from dsattn.ops.sparse_mla.testing import check_close, make_case
    monkeypatch.delenv("DSATTN_GROUPING_IMPL", raising=False)
    idx = overlap_indices(160, slots, 2048, torch.device(DEV), seed=heads).cpu()
    idx[::3, 5::101] = -1
    idx[1::4, 7::89] = slots + 3
    case = make_case(160, heads, 576, num_slots=slots, topk=2048, layout="bf16", with_length=True, seed=11, device=DEV,
                     indices=idx)
    outs = _prefill_under(("dense_fused", "sort"), case, monkeypatch)
    assert spy_union, "the fused union kernel did not run"
    check_close(*outs[0], *case.reference())
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("heads", [8, 16, 32])
def test_prefill_with_key_slots_builds_over_the_keys(spy_union, monkeypatch, heads):
    """sparse_mla_prefill's key_slots (session 46): the grouped kernel's union lists built over a dense key range
    (20000 keys) whose rows lie anywhere in a 300000-row source (past the dense reach at every G): the fused kernel
    runs over the keys, the lists are turned into slots, and out / lse stay within tolerance of the reference over
    the slots the keys name; a -1 slot and one past the source are skipped."""
    from dsattn.bench.kernels_mla import overlap_indices
    from dsattn.ops.sparse_mla import slots_of_keys, sparse_mla_prefill
    from dsattn.ops.sparse_mla.testing import check_close, make_case, poisoned_outputs
    monkeypatch.delenv("DSATTN_GROUPING_IMPL", raising=False)
    monkeypatch.setattr(grouping, "IMPL", "auto")
    nk, n = 20000, 300000
    gen = torch.Generator().manual_seed(heads)
    key_slots = torch.randperm(n, generator=gen)[:nk].to(torch.int32)
    key_slots[7] = -1
    key_slots[11] = n + 5
    keys = overlap_indices(160, nk, 2048, torch.device(DEV), seed=heads).cpu()
    keys[::3, 5::101] = -1
    keys[1::4, 7::89] = nk + 3
    case = make_case(160, heads, 576, num_slots=n, topk=2048, layout="bf16", with_length=True, seed=13, device=DEV,
                     indices=slots_of_keys(keys, key_slots))
    out, lse = poisoned_outputs(160, heads, DEV)
    sparse_mla_prefill(case.q, case.flat, keys.to(DEV), case.sm_scale, topk_length=case.topk_length, out=out,
                       lse=lse, variant="native", key_slots=key_slots.to(DEV))
    torch.cuda.synchronize()
    assert spy_union, "the fused union kernel did not run over the keys"
    check_close(out, lse, *case.reference())


# ---------------------------------------------------------------------------------------------------
# the hash path: its entries' order depends on the set of slots only (session 47's finish)
# ---------------------------------------------------------------------------------------------------

def _random_lists(t, k, span, seed):
    """t independent lists of k distinct slots in [0, span): nearly full tables (G lists of k among 16 * k
    positions: ~0.97 / 0.91 / 0.81 of G * k cells at G 2 / 4 / 8)."""
    gen = torch.Generator(device=DEV).manual_seed(seed)
    return torch.rand(t, span, generator=gen, device=DEV).topk(k, dim=1).indices.to(torch.int32)


def _live(bufs, groups):
    ent, msk, cnt = bufs
    return [(ent[c, :int(cnt[c])].clone(), msk[c, :int(cnt[c])].clone()) for c in range(groups)]


@pytest.mark.parametrize("impl", ["hash", "hash1"])
@pytest.mark.parametrize("g", [2, 4, 8])
def test_hash_order_does_not_depend_on_give_ups(monkeypatch, impl, g):
    """Over nearly full tables (random lists) the hash path gives the same entries in the same order in every
    call: unions over HASH_SORTED_LOAD of the table in slot order, the others in table order. And with no union
    rebuilt for its load (HASH_SORTED_LOAD 2), every group that gave up is finished to the table it would have
    had: the same entries, in the same order, as when every insert is made to give up early (HASH_MAX_ROUNDS 2).
    Session 46 saw two calls differ when a give-up went straight to the rebuild (slot order) and whether a
    program gave up depended on timing."""
    k, t, span = 2048, 64 * g, 16 * 2048
    idx = _random_lists(t, k, span, seed=g)
    idx[3, 17] = -1
    idx[5, 100] = span + 9
    ref = [torch.empty((t // g, g * k), dtype=torch.int32, device=DEV) for _ in range(2)]
    ref.append(torch.empty(t // g, dtype=torch.int32, device=DEV))
    grouping.build_groups_reference(idx, None, span, g, 0, t, *ref)
    r, first = _build(impl, monkeypatch, idx, None, span, g, 0, t, t // g)
    assert grouping._same(first, ref, r)
    want = _live(first, r)
    big = first[2][:r] >= grouping._sorted_at(g * k)
    for c in range(r):
        assert bool(big[c]) == torch.equal(want[c][0], want[c][0].sort().values), c
    for _ in range(5):
        _, again = _build(impl, monkeypatch, idx, None, span, g, 0, t, t // g)
        got = _live(again, r)
        assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(got, want))
    monkeypatch.setattr(grouping, "HASH_SORTED_LOAD", 2.0)
    monkeypatch.setattr(grouping, "HASH_REBUILD", False)   # a group left unsettled would show as counts -1
    _, settled = _build(impl, monkeypatch, idx, None, span, g, 0, t, t // g)
    assert (settled[2][:r] >= 0).all()
    want = _live(settled, r)
    monkeypatch.setattr(grouping, "HASH_MAX_ROUNDS", 2)
    monkeypatch.setattr(grouping, "HASH_FINISH_TURNS", 0)
    _, stopped = _build(impl, monkeypatch, idx, None, span, g, 0, t, t // g)
    assert (stopped[2][:r] == -1).sum() > r // 2, "too few inserts gave up to test the finish"
    monkeypatch.setattr(grouping, "HASH_FINISH_TURNS", 4)
    _, finished = _build(impl, monkeypatch, idx, None, span, g, 0, t, t // g)
    assert (finished[2][:r] >= 0).all()
    got = _live(finished, r)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(got, want))
