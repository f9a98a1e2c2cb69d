"""Query-group union lists (ops/sparse_mla/grouping.py) and the prefill scratch plumbing.

build_groups_reference against a plain-Python oracle (ascending order); build_groups' Triton kernels (the dense
map, auto's choice where the slot range fits, the hash table and the sort) under TRITON_INTERPRET=1 (conftest)
against the reference at small sizes (topk 16..128, G 1..8, duplicates, -1, out of range, topk_length, partial
last group, token0 offsets, 64-bit codes), compared as multisets of (slot, mask) entries: the hash path lists
them in table order (the dense and sort paths in the reference's order). The dense path alone: entry for entry
at G 2..16 over poisoned scratch, overlap indices, its limit (dense at dense_max_slots, hash one past), the
groups it leaves to the rebuild. The hash path alone (its rebuild kernel switched off) on lists without repeats,
full tables included; its order independent of the insertion order; the rebuild when the insert gives up.
Argument checks; prefill_scratch_spec sizes;
sparse_mla_prefill's scratch= validation, pass-through and tracing; the backend's workspace reservation.
"""
import pytest
import torch

pytest.importorskip("triton")

from dsattn.ops.sparse_mla import prefill_scratch_spec, sparse_mla_prefill
from dsattn.ops.sparse_mla.grouping import (SCRATCH_CAP_BYTES, build_groups, build_groups_reference,
                                            group_shape)
from dsattn.ops.sparse_mla.reference import sparse_mla_reference
from dsattn.ops.sparse_mla.testing import check_close, poisoned_outputs

pytestmark = pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)


def oracle(indices, topk_length, num_slots, g, token0, ntokens):
    """[(entries, masks)] per group, straight from the definition (SPEC 3: a slot listed twice counts twice)."""
    groups = []
    for c in range(-(-ntokens // g)):
        counts = []
        for j in range(g):
            t = token0 + c * g + j
            if t >= token0 + ntokens:
                break
            n = indices.shape[1] if topk_length is None else int(topk_length[t])
            cnt = {}
            for i, s in enumerate(indices[t].tolist()):
                if i < n and 0 <= s < num_slots:
                    cnt[s] = cnt.get(s, 0) + 1
            counts.append(cnt)
        ents, masks = [], []
        for s in sorted(set().union(*counts)):
            for k in range(max(cnt.get(s, 0) for cnt in counts)):
                ents.append(s)
                masks.append(sum(1 << j for j, cnt in enumerate(counts) if cnt.get(s, 0) > k))
        groups.append((ents, masks))
    return groups


def make_indices(t, k, num_slots, dup=False, lens=False, span=None):
    """Random lists with -1, past-the-end and negative entries; dup: repeated slots within a row; span: slots
    drawn from a window of that many (neighbouring tokens share many)."""
    span = span or num_slots
    idx = torch.randint(0, span, (t, k), dtype=torch.int32) + (num_slots - span) // 2
    junk = torch.rand(t, k) < 0.15
    bad = torch.tensor([-1, num_slots, num_slots + 7, -5], dtype=torch.int32)
    idx[junk] = bad[torch.randint(0, 4, (int(junk.sum()),))]
    if dup:
        idx[:, 1] = idx[:, 0]
        idx[::2, 2] = idx[::2, 0]
        idx[1::3, k - 1] = idx[1::3, 3]
    topk_length = torch.randint(0, k + 3, (t,), dtype=torch.int32) if lens else None
    return idx, topk_length


def scratch(c, width, fill=-7):
    return (torch.full((c, width), fill, dtype=torch.int32), torch.full((c, width), fill, dtype=torch.int32),
            torch.full((c,), fill, dtype=torch.int32))


def run(fn, idx, lens, num_slots, g, token0, ntokens, rows=None):
    c = rows if rows is not None else max(1, -(-ntokens // g))
    e, m, n = scratch(c, g * idx.shape[-1])
    r = fn(idx, lens, num_slots, g, token0, ntokens, e, m, n)
    return r, e, m, n


def assert_groups(got, want_groups, ordered=False):
    """ordered: the same order too (the reference, the sort kernel); else the same (slot, mask) multiset."""
    r, e, m, n = got
    assert r == len(want_groups)
    for c, (ents, masks) in enumerate(want_groups):
        assert int(n[c]) == len(ents), c
        got_pairs = list(zip(e[c, :len(ents)].tolist(), m[c, :len(ents)].tolist()))
        want_pairs = list(zip(ents, masks))
        if ordered:
            assert got_pairs == want_pairs, c
        else:
            assert sorted(got_pairs) == sorted(want_pairs), c


def assert_same(a, b, ordered=False):
    ra, ea, ma, na = a
    rb, eb, mb, nb = b
    assert ra == rb
    assert torch.equal(na[:ra], nb[:rb])
    for c in range(ra):
        k = int(na[c])
        pa = list(zip(ea[c, :k].tolist(), ma[c, :k].tolist()))
        pb = list(zip(eb[c, :k].tolist(), mb[c, :k].tolist()))
        assert (pa == pb) if ordered else (sorted(pa) == sorted(pb)), c


@pytest.fixture(params=["dense", "hash", "hash1", "sort"])
def impl(request, monkeypatch):
    """build_groups' kernels: the dense map (auto's choice where the slot range fits; falls back to hash where it
    does not), the hash table (hash1: one program a group) or the sort."""
    from dsattn.ops.sparse_mla import grouping
    monkeypatch.delenv("DSATTN_GROUPING_IMPL", raising=False)
    monkeypatch.setattr(grouping, "IMPL", request.param)
    return request.param


# ---------------------------------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("heads, expected", [(1, (8, 8)), (8, (8, 8)), (9, (16, 4)), (16, (16, 4)), (17, (32, 2)),
                                             (32, (32, 2)), (33, (64, 1)), (64, (64, 1)), (128, (64, 1))])
def test_group_shape(heads, expected):
    assert group_shape(heads) == expected


@pytest.mark.parametrize("bad", [0, 129, -1, 8.0, True])
def test_group_shape_rejects(bad):
    with pytest.raises(ValueError, match="num_heads"):
        group_shape(bad)


def test_scratch_spec_sizes():
    assert prefill_scratch_spec(100, 64, 2048) == [] == prefill_scratch_spec(100, 128, 2048)
    i32 = torch.int32
    assert prefill_scratch_spec(100, 8, 64) == [((13, 512), i32), ((13, 512), i32), ((13,), i32)]
    assert prefill_scratch_spec(5, 20, 16) == [((3, 32), i32), ((3, 32), i32), ((3,), i32)]
    # the chunk cap: entries + masks of one chunk within 64 MiB (G 8, topk 2048: 512 groups = 4096 tokens)
    spec = prefill_scratch_spec(100000, 8, 2048)
    assert spec[0][0] == (512, 8 * 2048) and spec[2][0] == (512,)
    assert 2 * 512 * 8 * 2048 * 4 == SCRATCH_CAP_BYTES == 64 << 20
    for heads, topk in ((1, 2048), (16, 2048), (32, 1000), (8, 100000)):
        (shape, _), _, _ = prefill_scratch_spec(1 << 20, heads, topk)
        assert shape[0] >= 1 and (2 * shape[0] * shape[1] * 4 <= SCRATCH_CAP_BYTES or shape[0] == 1)
    assert prefill_scratch_spec(4095, 8, 2048)[0][0] == (512, 16384)      # cdiv(4095, 8) = 512
    assert prefill_scratch_spec(0, 8, 16)[0][0] == (0, 128)
    for bad in (dict(num_tokens=-1), dict(topk=0), dict(num_heads=0)):
        args = {**dict(num_tokens=8, num_heads=8, topk=16), **bad}
        with pytest.raises(ValueError, match=next(iter(bad))):
            prefill_scratch_spec(**args)


def test_scratch_cap_env(monkeypatch):
    """DSATTN_PREFILL_SCRATCH_MIB sets the chunk cap (A/B runs of the chunk size); bad values name it."""
    monkeypatch.setenv("DSATTN_PREFILL_SCRATCH_MIB", "128")
    assert prefill_scratch_spec(100000, 8, 2048)[0][0] == (1024, 8 * 2048)   # 2 x 64 MiB: 8192 tokens a chunk
    assert prefill_scratch_spec(8192, 16, 2048)[0][0] == (2048, 4 * 2048)    # s_q 8192 at 16 heads: one chunk
    monkeypatch.setenv("DSATTN_PREFILL_SCRATCH_MIB", "")
    assert prefill_scratch_spec(8192, 16, 2048)[0][0] == (1024, 4 * 2048)    # the default: two chunks
    for bad in ("0", "-5", "1.5", "lots"):
        monkeypatch.setenv("DSATTN_PREFILL_SCRATCH_MIB", bad)
        with pytest.raises(ValueError, match="DSATTN_PREFILL_SCRATCH_MIB"):
            prefill_scratch_spec(8192, 16, 2048)


# ---------------------------------------------------------------------------------------------------
# reference vs oracle, Triton (interpreted) vs reference
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("g", [1, 2, 3, 8])
@pytest.mark.parametrize("dup, lens", [(False, False), (True, True)])
def test_reference_matches_oracle(g, dup, lens):
    t, k, n = 13, 24, 40
    idx, tl = make_indices(t, k, n, dup=dup, lens=lens, span=30)
    for token0, ntokens in ((0, t), (3, 9), (5, 0)):
        want = oracle(idx, tl, n, g, token0, ntokens)
        assert_groups(run(build_groups_reference, idx, tl, n, g, token0, ntokens), want, ordered=True)


@pytest.mark.parametrize("k, g, dup, lens, t", [
    (16, 1, False, False, 3),
    (16, 8, True, True, 11),      # partial last group (11 = 8 + 3)
    (32, 2, True, False, 5),
    (48, 3, False, True, 7),      # topk and G not powers of two
    (64, 4, True, True, 6),
    (128, 5, False, False, 5),
    (128, 8, False, True, 8),
])
def test_triton_matches_reference(k, g, dup, lens, t, impl):
    n = 5 * k
    idx, tl = make_indices(t, k, n, dup=dup, lens=lens, span=2 * k)
    want = run(build_groups_reference, idx, tl, n, g, 0, t)
    assert_same(run(build_groups, idx, tl, n, g, 0, t), want, ordered=impl in ("sort", "dense"))
    assert_groups(want, oracle(idx, tl, n, g, 0, t), ordered=True)


def test_triton_chunk_offset_and_untouched_rows(impl):
    """token0 / ntokens pick a chunk; rows past the groups built are not written, nor (sort) entries past
    counts, nor (hash) columns past G * K (the table), nor (dense) entries past counts and masks past the map."""
    from dsattn.ops.sparse_mla import grouping
    k, g, n = 16, 4, 50
    idx, tl = make_indices(23, k, n, dup=True, lens=True, span=20)
    c, width = 5, g * k + 3
    e, m, cnt = scratch(c, width)
    assert build_groups(idx, tl, n, g, 6, 10, e, m, cnt) == 3
    assert_groups((3, e[:3], m[:3], cnt[:3]), oracle(idx, tl, n, g, 6, 10), ordered=impl in ("sort", "dense"))
    assert (e[3:] == -7).all() and (m[3:] == -7).all() and (cnt[3:] == -7).all()
    words = grouping.dense_layout(n, g)[2]                       # the dense map: masks[c, :D]
    for r in range(3):
        start = int(cnt[r]) if impl == "sort" else g * k
        if impl == "dense":
            assert (e[r, int(cnt[r]):] == -7).all() and (m[r, max(int(cnt[r]), words):] == -7).all()
        assert (e[r, start:] == -7).all() and (m[r, start:] == -7).all()


@pytest.mark.parametrize("inline", [False, True])
def test_triton_heavy_duplicates_and_nothing_valid(monkeypatch, inline, impl):
    """Repeated slots: the sort kernel's second kernel (default) and inline; the hash path's rebuild; the dense
    path's rebuild after the compaction (default) and inside it."""
    from dsattn.ops.sparse_mla import grouping
    if impl in ("hash", "hash1") and inline:
        pytest.skip("inline applies to the sort kernel and the dense path")
    monkeypatch.setattr(grouping, "INLINE_DUPS", inline)
    monkeypatch.setattr(grouping, "DENSE_INLINE", inline)
    k, g = 16, 4
    idx = torch.randint(0, 3, (8, k), dtype=torch.int32)        # every row lists slots 0..2 many times
    idx[4:] = -1                                                  # second group: nothing valid
    got = run(build_groups, idx, None, 3, g, 0, 8)
    assert_groups(got, oracle(idx, None, 3, g, 0, 8))
    assert int(got[3][1]) == 0
    lens = torch.zeros(8, dtype=torch.int32)                      # topk_length 0: nothing valid anywhere
    assert run(build_groups, idx, lens, 3, g, 0, 8)[3].tolist() == [0, 0]


@pytest.mark.parametrize("block", ["1", "2", "4"])
def test_dups_kernel_blocks(monkeypatch, block, impl):
    """The repeated-slot kernel with several groups a program (session 77: dups_block): repeats in several groups
    (first, two in one block, last, a partial last block) are all rebuilt; blocks without one are left alone."""
    if impl in ("hash", "hash1"):
        pytest.skip("the hash path rebuilds in its own finish")
    monkeypatch.setenv("DSATTN_DUPS_BLOCK", block)
    k, g, n, t = 16, 2, 64, 11
    gen = torch.Generator().manual_seed(77)
    idx = _distinct_rows(t, k, n, gen)
    for r, a, b in ((0, 1, 2), (5, 0, 15), (6, 4, 7), (10, 3, 11)):   # groups 0, 2, 3 and 5 (of one token)
        idx[r, a] = idx[r, b]
    got = run(build_groups, idx, None, n, g, 0, t)
    assert_groups(got, oracle(idx, None, n, g, 0, t))


def test_dups_block(monkeypatch):
    from dsattn.ops.sparse_mla import grouping
    monkeypatch.delenv("DSATTN_DUPS_BLOCK", raising=False)
    w = grouping.DUPS_WAVE
    assert [grouping.dups_block(x) for x in (1, w, 2 * w - 1, 2 * w, 4 * w, 4096, 10 ** 6)] == [1, 1, 1, 2, 4, 32, 32]
    monkeypatch.setenv("DSATTN_DUPS_BLOCK", "8")
    assert grouping.dups_block(3) == 8
    for bad in ("x", "0", "3", "2048", "-1"):
        monkeypatch.setenv("DSATTN_DUPS_BLOCK", bad)
        with pytest.raises(ValueError, match="DSATTN_DUPS_BLOCK"):
            grouping.dups_block(8)


@pytest.mark.parametrize("impl_name", ["dense", "sort"])
def test_dups_block_checked_before_any_kernel(monkeypatch, impl_name):
    """A bad DSATTN_DUPS_BLOCK is a ValueError before build_groups writes anything (the union kernels run first)."""
    from dsattn.ops.sparse_mla import grouping
    monkeypatch.delenv("DSATTN_GROUPING_IMPL", raising=False)
    monkeypatch.setattr(grouping, "IMPL", impl_name)
    monkeypatch.setenv("DSATTN_DUPS_BLOCK", "3")
    idx, tl = make_indices(8, 16, 40, dup=True, lens=False, span=30)
    e, m, cnt = scratch(4, 2 * 16)
    with pytest.raises(ValueError, match="DSATTN_DUPS_BLOCK"):
        build_groups(idx, tl, 40, 2, 0, 8, e, m, cnt)
    assert (e == -7).all() and (m == -7).all() and (cnt == -7).all()


def test_triton_wide_codes(impl):
    """slot * GP + j past int32 (num_slots near 2^31): the sort kernel sorts 64-bit codes; the hash path
    hashes slots near 2^31."""
    n = 2**31 - 1
    idx = torch.tensor([[n - 1, 5, n - 2, -1], [5, n - 1, n - 1, 0], [2**30, n - 2, 7, 5]], dtype=torch.int32)
    for g in (2, 3):
        assert_groups(run(build_groups, idx, None, n, g, 0, 3), oracle(idx, None, n, g, 0, 3),
                      ordered=impl == "sort")
    wide = torch.stack([torch.randperm(1000)[:16] + (n - 1000) for _ in range(6)]).to(torch.int32)
    assert_groups(run(build_groups, wide, None, n, 3, 0, 6), oracle(wide, None, n, 3, 0, 6))


# ---------------------------------------------------------------------------------------------------
# the hash path alone
# ---------------------------------------------------------------------------------------------------

def _distinct_rows(t, k, span, generator):
    return torch.stack([torch.randperm(span, generator=generator)[:k] for _ in range(t)]).to(torch.int32)


@pytest.mark.parametrize("hash_impl", ["hash", "hash1"])
@pytest.mark.parametrize("k, g, t, span", [
    (16, 1, 3, 32), (16, 8, 11, 32), (32, 2, 5, 64), (48, 3, 7, 96), (128, 8, 8, 256),
    (15, 3, 6, 60), (6, 3, 6, 40),   # G * K odd (windows of 1 cell), G * K = 18 (windows of 2)
    (64, 4, 8, 256),   # disjoint-ish: a fuller table
    (64, 4, 4, 256),   # one group of 4 disjoint lists of 64: the table (256 cells) ends full
    (64, 8, 8, 512),   # 8 disjoint lists: full
])
def test_hash_alone_without_repeats(monkeypatch, k, g, t, span, hash_impl):
    """Lists without repeated slots settle in the table: no group is left to the rebuild (switched off here:
    HASH_REBUILD), up to a full table (every cell taken). Blocks of 32 cells: several clear programs a
    group and an in-place compaction over several blocks."""
    from dsattn.ops.sparse_mla import grouping
    monkeypatch.setattr(grouping, "IMPL", hash_impl)
    monkeypatch.setattr(grouping, "HASH_COMPACT", (32, 1))
    monkeypatch.setattr(grouping, "HASH1", (16, 1))       # hash1: several probe steps a token
    monkeypatch.setattr(grouping, "HASH_REBUILD", False)
    monkeypatch.setattr(grouping, "HASH_SORTED_LOAD", 2.0)            # the table's order even when full
    gen = torch.Generator().manual_seed(k * 100 + g)
    if span == g * k and t == g:
        idx = torch.randperm(span, generator=gen).to(torch.int32).view(t, k)
    else:
        idx = _distinct_rows(t, k, span, gen)
    got = run(build_groups, idx, None, span, g, 0, t)
    assert (got[3][:got[0]] >= 0).all()
    assert_groups(got, oracle(idx, None, span, g, 0, t))


@pytest.mark.parametrize("hash_impl", ["hash", "hash1"])
def test_hash_order_independent_of_insertion_order(monkeypatch, hash_impl):
    """Ordered hashing: the table (hence the entries' order) depends on the set of slots only, not on the
    order they arrive in (the interpreter runs the programs one by one, so permuting each token's list
    changes the insertion order)."""
    from dsattn.ops.sparse_mla import grouping
    monkeypatch.setattr(grouping, "IMPL", hash_impl)
    gen = torch.Generator().manual_seed(3)
    k, g, t, n = 64, 4, 8, 200
    idx = _distinct_rows(t, k, n, gen)
    a = run(build_groups, idx, None, n, g, 0, t)
    perm = torch.stack([torch.randperm(k, generator=gen) for _ in range(t)])
    b = run(build_groups, torch.gather(idx, 1, perm), None, n, g, 0, t)
    flipped = idx.view(t // g, g, k).flip(1).reshape(t, k)          # tokens of a group in reverse order
    f = run(build_groups, flipped, None, n, g, 0, t)
    for c in range(a[0]):
        cnt = int(a[3][c])
        assert torch.equal(a[1][c, :cnt], b[1][c, :cnt]) and torch.equal(a[2][c, :cnt], b[2][c, :cnt])
        assert torch.equal(a[1][c, :cnt], f[1][c, :cnt])
    assert_groups(a, oracle(idx, None, n, g, 0, t))


@pytest.mark.parametrize("hash_impl", ["hash", "hash1"])
def test_hash_gives_up_to_the_rebuild(monkeypatch, hash_impl):
    """An insert still probing after HASH_MAX_ROUNDS marks its group; with no finish (HASH_FINISH_TURNS 0), or
    a finish that does not settle either, the rebuild (sort) still gets it right."""
    from dsattn.ops.sparse_mla import grouping
    monkeypatch.setattr(grouping, "IMPL", hash_impl)
    monkeypatch.setattr(grouping, "HASH_MAX_ROUNDS", 1)
    monkeypatch.setattr(grouping, "HASH_W", 1)
    k, g, t = 32, 4, 8
    idx = torch.randperm(256).to(torch.int32).view(t, k)            # disjoint lists: full tables, collisions
    want = oracle(idx, None, 256, g, 0, t)
    for finish in ("none", "stuck"):
        with monkeypatch.context() as m:
            if finish == "none":
                m.setattr(grouping, "HASH_FINISH_TURNS", 0)
            else:
                m.setattr(grouping, "_finish_rounds", lambda ts, w: 1)
            assert_groups(run(build_groups, idx, None, 256, g, 0, t), want, ordered=True)
            m.setattr(grouping, "HASH_REBUILD", False)
            assert (run(build_groups, idx, None, 256, g, 0, t)[3] == -1).all()


@pytest.mark.parametrize("hash_impl", ["hash", "hash1"])
@pytest.mark.parametrize("lens", [False, True])
def test_hash_give_up_finishes_to_the_same_table(monkeypatch, hash_impl, lens):
    """Groups whose insert gave up (every one here: HASH_MAX_ROUNDS 1 over nearly full tables) are finished to
    the very table, hence the same entries in the same order, as where nothing gave up: the order depends on the
    set of slots only, not on whether a program stopped (on a GPU, a matter of timing). Nothing is rebuilt."""
    from dsattn.ops.sparse_mla import grouping
    monkeypatch.setattr(grouping, "IMPL", hash_impl)
    monkeypatch.setattr(grouping, "HASH_W", 1)
    monkeypatch.setattr(grouping, "HASH_COMPACT", (32, 1))
    monkeypatch.setattr(grouping, "HASH_FINISH_BLOCK", 16)           # several finish blocks a token
    monkeypatch.setattr(grouping, "HASH1", (16, 1))
    monkeypatch.setattr(grouping, "HASH_REBUILD", False)
    gen = torch.Generator().manual_seed(7)
    k, g, t, span = 32, 4, 12, 160
    idx = _distinct_rows(t, k, span, gen)                           # ~74% full tables
    idx[2, 5] = -1
    idx[7, 30] = span + 4
    lens_ = torch.randint(k // 2, k + 1, (t,), dtype=torch.int32, generator=gen) if lens else None
    settled = run(build_groups, idx, lens_, span, g, 0, t)
    assert (settled[3][:settled[0]] < grouping._sorted_at(g * k)).all()   # under the slot-order load
    monkeypatch.setattr(grouping, "HASH_MAX_ROUNDS", 1)
    finished = run(build_groups, idx, lens_, span, g, 0, t)
    monkeypatch.setattr(grouping, "HASH_FINISH_TURNS", 0)
    assert (run(build_groups, idx, lens_, span, g, 0, t)[3] == -1).all()  # every group did give up
    for got in (settled, finished):
        assert (got[3][:got[0]] >= 0).all()
        assert_groups(got, oracle(idx, lens_, span, g, 0, t))
    for c in range(settled[0]):
        n = int(settled[3][c])
        assert torch.equal(settled[1][c, :n], finished[1][c, :n]), c
        assert torch.equal(settled[2][c, :n], finished[2][c, :n]), c


@pytest.mark.parametrize("hash_impl", ["hash", "hash1"])
@pytest.mark.parametrize("give_up", [False, True])
def test_hash_full_unions_in_slot_order(monkeypatch, hash_impl, give_up):
    """A union filling HASH_SORTED_LOAD of its table or more comes in ascending slot order (rebuilt), one under
    it in table order, whether or not its insert gave up (give_up: HASH_MAX_ROUNDS 1; a group whose table holds
    that many already is rebuilt without a finish, the others are finished first)."""
    from dsattn.ops.sparse_mla import grouping
    monkeypatch.setattr(grouping, "IMPL", hash_impl)
    monkeypatch.setattr(grouping, "HASH_W", 1)
    monkeypatch.setattr(grouping, "HASH_COMPACT", (32, 1))
    monkeypatch.setattr(grouping, "HASH_SORTED_LOAD", 0.5)
    if give_up:
        monkeypatch.setattr(grouping, "HASH_MAX_ROUNDS", 1)
    gen = torch.Generator().manual_seed(11)
    k, g = 32, 4
    full = torch.randperm(4 * k, generator=gen).to(torch.int32).view(g, k)   # 128 distinct slots: load 1
    part = _distinct_rows(g, k, 48, gen)                                      # <= 48 slots: load <= 0.375
    idx = torch.cat([full, part, full.flip(1)])
    got = run(build_groups, idx, None, 200, g, 0, 3 * g)
    want = oracle(idx, None, 200, g, 0, 3 * g)
    assert_groups(got, want)
    for c in (0, 2):
        n = int(got[3][c])
        assert n == 4 * k and torch.equal(got[1][c, :n], got[1][c, :n].sort().values), c
    assert not torch.equal(got[1][1, :int(got[3][1])], got[1][1, :int(got[3][1])].sort().values)
    monkeypatch.setattr(grouping, "HASH_REBUILD", False)
    assert run(build_groups, idx, None, 200, g, 0, 3 * g)[3].tolist() == [-1, int(got[3][1]), -1]


# ---------------------------------------------------------------------------------------------------
# the dense path alone
# ---------------------------------------------------------------------------------------------------

@pytest.fixture
def spy(monkeypatch):
    """Counts the dense and hash launches build_groups makes (IMPL auto)."""
    from dsattn.ops.sparse_mla import grouping
    calls = []
    for name in ("_launch_dense", "_launch_hash"):
        real = getattr(grouping, name)
        monkeypatch.setattr(grouping, name, lambda *a, _r=real, _n=name: (calls.append(_n[8:]), _r(*a))[1])
    monkeypatch.delenv("DSATTN_GROUPING_IMPL", raising=False)
    monkeypatch.setattr(grouping, "IMPL", "auto")
    return calls


@pytest.mark.parametrize("g, k, t, dup, lens, token0", [
    (2, 32, 7, True, True, 0), (4, 16, 10, True, False, 3), (8, 32, 16, False, True, 0),
    (16, 16, 20, True, True, 2),
])
def test_dense_matches_reference_in_order(spy, g, k, t, dup, lens, token0):
    """auto takes the dense path; over poisoned scratch (-7) it equals the reference entry for entry
    (ascending slots; repeated slots rebuilt by the sort path's kernel), a chunk (token0, a partial last group)
    included; random lists with -1 / past-the-end / negative slots and topk_length."""
    n = 3 * k
    idx, tl = make_indices(token0 + t, k, n, dup=dup, lens=lens, span=2 * k)
    got = run(build_groups, idx, tl, n, g, token0, t)
    assert spy == ["dense"]
    assert_same(got, run(build_groups_reference, idx, tl, n, g, token0, t), ordered=True)


@pytest.mark.parametrize("g", [2, 8])
def test_dense_overlap_indices(spy, g):
    """Neighbouring tokens sharing most slots (the bench's overlap indices), -1 in the short rows (a row at
    position p < topk lists p + 1 slots)."""
    from dsattn.bench.kernels_mla import overlap_indices
    idx = overlap_indices(16, 40, 32, torch.device("cpu"))
    assert (idx == -1).any()
    got = run(build_groups, idx, None, 40, g, 0, 16)
    assert spy == ["dense"]
    assert_same(got, run(build_groups_reference, idx, None, 40, g, 0, 16), ordered=True)


def test_fused_reach():
    """The fused shared-memory path's reach (session 46: its map compacted a chunk at a time, bound by shared memory,
    not registers): at topk 2048 G 8 / 4 / 2 / 16 131072 / 262144 / 524288 / 32768 slots, each program's map, totals
    and codes within a block's shared memory; dense_reach gives it where the kernel runs, dense_max_slots elsewhere."""
    from dsattn.ops.sparse_mla import grouping, grouping_smem
    want = {8: 131072, 4: 262144, 2: 524288, 16: 32768, 3: 262144}
    for g, top in want.items():
        assert grouping.fused_max_slots(g, 2048) == top
        assert grouping.fused_fits(top, g, 2048) and not grouping.fused_fits(top + 1, g, 2048)
        gp, spw, d = grouping.dense_layout(top, g)
        for nw in (8, 16):
            words = max(d, 32 * nw) + grouping_smem.tot_words(nw) + grouping_smem.union_out_words(g, 2048, nw)
            assert words * 4 == grouping_smem.union_bytes(d, g, 2048, nw) <= grouping_smem.SMEM_BYTES
        assert (top << gp) <= 1 << 31
        assert grouping.dense_reach(g, 2048, "cpu") == grouping.dense_max_slots(g, 2048)
    assert grouping.fused_max_slots(32, 2048) == 0       # 32-bit fields: no dense path
    assert grouping_smem.union_max_words(64, 2048) == 0  # codes alone past the shared memory


def test_union_warps_by_shared_memory(monkeypatch):
    """The fused program runs 16 warps where its shared memory leaves no room for a second program on an SM (the cases
    session 47 measured faster at 16), else 8; UNION_WARPS or DSATTN_UNION_WARPS force 8 or 16, anything else is a
    ValueError naming them."""
    from dsattn.ops.sparse_mla import grouping, grouping_smem
    monkeypatch.delenv("DSATTN_UNION_WARPS", raising=False)
    monkeypatch.setattr(grouping_smem, "UNION_WARPS", 0)
    cases = {(8, 16384): 8, (8, 65536): 16, (8, 131072): 16, (4, 65536): 8, (4, 131072): 8, (4, 262144): 16,
             (2, 16384): 8, (2, 262144): 8, (2, 524288): 16, (16, 32768): 16, (8, 1000): 8}
    for (g, slots), want in cases.items():
        d = grouping.dense_layout(slots, g)[2]
        assert grouping_smem.union_warps(d, g, 2048) == want, (g, slots)
        alone = 2 * (grouping_smem.union_bytes(d, g, 2048, 8) + 1024) > grouping_smem.SM_SMEM_BYTES
        assert alone == (want == 16)
    d = grouping.dense_layout(131072, 8)[2]
    monkeypatch.setenv("DSATTN_UNION_WARPS", "8")
    assert grouping_smem.union_warps(d, 8, 2048) == 8
    for bad in ("12", "x"):
        monkeypatch.setenv("DSATTN_UNION_WARPS", bad)
        with pytest.raises(ValueError, match="DSATTN_UNION_WARPS"):
            grouping_smem.union_warps(d, 8, 2048)
    monkeypatch.delenv("DSATTN_UNION_WARPS")
    monkeypatch.setattr(grouping_smem, "UNION_WARPS", 16)
    assert grouping_smem.union_warps(grouping.dense_layout(16384, 8)[2], 8, 2048) == 16


def test_fused_dispatch_takes_its_own_reach(monkeypatch):
    """Where the fused kernel runs (stubbed here: it needs a GPU), build_groups sends calls up to fused_max_slots to
    it and one past to the hash path; the non-fused dense IMPLs keep dense_max_slots."""
    from dsattn.ops.sparse_mla import grouping, grouping_smem
    calls = []
    monkeypatch.setattr(grouping_smem, "usable", lambda device: True)
    monkeypatch.setattr(grouping, "_launch_dense", lambda *a, **kw: calls.append(("dense", a[2], a[-1])))
    monkeypatch.setattr(grouping, "_launch_hash", lambda *a, **kw: calls.append(("hash", a[2])))
    monkeypatch.delenv("DSATTN_GROUPING_IMPL", raising=False)
    g, k, t = 8, 2048, 8
    idx = torch.zeros(t, k, dtype=torch.int32)
    bufs = [torch.zeros(1, g * k, dtype=torch.int32), torch.zeros(1, g * k, dtype=torch.int32),
            torch.zeros(1, dtype=torch.int32)]
    top = grouping.fused_max_slots(g, k)
    for impl in ("auto", "dense_fused"):
        monkeypatch.setattr(grouping, "IMPL", impl)
        for n in (16385, top, top + 1):
            calls.clear()
            grouping.build_groups(idx, None, n, g, 0, t, *bufs)
            assert calls == ([("dense", n, True)] if n <= top else [("hash", n)]), (impl, n)
    for impl in ("dense", "dense_smem"):
        monkeypatch.setattr(grouping, "IMPL", impl)
        for n in (16384, 16385):
            calls.clear()
            grouping.build_groups(idx, None, n, g, 0, t, *bufs)
            assert calls == ([("dense", n, False)] if n <= 16384 else [("hash", n)]), (impl, n)


@pytest.mark.parametrize("g, k, words", [(4, 16, 4), (2, 4, 64), (3, 8, 8)])
def test_dense_limit(spy, monkeypatch, g, k, words):
    """num_slots at dense_max_slots runs dense (the last slot in the last field of the last word), one more runs
    the hash path; the limit is the register cap DENSE_WORDS or the masks row's G * K columns, whichever is less
    (g 2, k 4: 8 columns)."""
    from dsattn.ops._triton import next_pow2
    from dsattn.ops.sparse_mla import grouping
    monkeypatch.setattr(grouping, "DENSE_WORDS", words)
    gp = next_pow2(g)
    top = min(words, g * k) * (32 // gp)
    assert grouping.dense_max_slots(g, k) == top
    assert grouping.dense_fits(top, g, k) and not grouping.dense_fits(top + 1, g, k)
    t = 2 * g
    for n, path in ((top, "dense"), (top + 1, "hash")):
        idx = torch.randint(0, n, (t, k), dtype=torch.int32)
        idx[:, 0] = n - 1
        idx[0, 1] = n                                              # past the end
        idx[1, 2] = n - 2
        spy.clear()
        got = run(build_groups, idx, None, n, g, 0, t)
        assert spy == [path]
        assert_same(got, run(build_groups_reference, idx, None, n, g, 0, t), ordered=path == "dense")


def test_dense_rebuild_marks_only_repeats(spy, monkeypatch):
    """With the rebuild switched off (DENSE_REBUILD) exactly the groups where a token lists a slot twice are
    marked (counts -1); the others are built; empty groups (nothing valid) have no entries."""
    from dsattn.ops.sparse_mla import grouping
    monkeypatch.setattr(grouping, "DENSE_REBUILD", False)
    k, g, n = 16, 4, 64
    gen = torch.Generator().manual_seed(5)
    idx = _distinct_rows(16, k, n, gen)
    idx[5, 3] = idx[5, 9]                                          # group 1: a repeat
    idx[8:12] = -1                                                 # group 2: empty
    idx[13, 0] = idx[13, 15]                                       # group 3: a repeat
    r, e, m, c = run(build_groups, idx, None, n, g, 0, 16)
    assert spy == ["dense"] and c.tolist()[1] == -1 and c.tolist()[3] == -1 and c.tolist()[2] == 0
    want = oracle(idx, None, n, g, 0, 16)
    assert_groups((1, e[:1], m[:1], c[:1]), want[:1], ordered=True)


@pytest.mark.parametrize("impl", ["dense_smem", "dense_fused"])
def test_dense_smem_falls_back_without_a_gpu(spy, monkeypatch, impl):
    """IMPL 'dense_smem' (the map in shared memory) and 'dense_fused' (map and compaction there; auto's choice on a
    GPU), grouping_smem.py: inline PTX, never under the interpreter, so here they run the global-memory dense map,
    with the same results; their kernels' GPU tests are in tests/gpu/."""
    from dsattn.ops.sparse_mla import grouping, grouping_smem
    assert not grouping_smem.usable(torch.device("cpu"))
    monkeypatch.setattr(grouping, "IMPL", impl)
    idx, tl = make_indices(12, 16, 48, dup=True, lens=True, span=32)
    got = run(build_groups, idx, tl, 48, 4, 0, 12)
    assert spy == ["dense"]
    assert_same(got, run(build_groups_reference, idx, tl, 48, 4, 0, 12), ordered=True)


def test_grouping_impl_env_at_call_time(spy, monkeypatch):
    """DSATTN_GROUPING_IMPL, where set, is read at each call (so an A/B run can switch it) over IMPL; a bad value is
    refused, naming it, before any kernel runs."""
    monkeypatch.setenv("DSATTN_GROUPING_IMPL", "hash")
    idx, tl = make_indices(8, 16, 48, lens=True, span=32)
    got = run(build_groups, idx, tl, 48, 4, 0, 8)
    assert spy == ["hash"]
    assert_same(got, run(build_groups_reference, idx, tl, 48, 4, 0, 8))
    monkeypatch.setenv("DSATTN_GROUPING_IMPL", "fast")
    e, m, n = scratch(2, 64)
    with pytest.raises(ValueError, match="DSATTN_GROUPING_IMPL"):
        build_groups(idx, tl, 48, 4, 0, 8, e, m, n)
    assert (e == -7).all() and (m == -7).all() and (n == -7).all()


@pytest.mark.parametrize("kernel, groups, words", [("map", ["4", "2"], "words"), ("union", ["2"], "raw_words")])
def test_dense_smem_kernels_compile_for_sm90a(kernel, groups, words):
    """grouping_smem's kernels compile for sm_90a on this machine (no GPU) at topk 2048, 16384 slots: the map kernel
    (IMPL 'dense_smem') at G 4 / 2, the fused one ('dense_fused', auto's choice) at G 2. The shared-memory atomics are
    ATOMS.OR in the SASS, no spill, and the dynamic shared memory is exactly the words the inline PTX addresses (the
    map's; for the fused kernel map + 32 + codes), so no shared memory of Triton's own can overlap those raw
    accesses."""
    pytest.importorskip("triton.experimental.gluon")
    import os
    import re
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.path.join(root, "src")}
    env.pop("TRITON_INTERPRET", None)
    res = subprocess.run([sys.executable, os.path.join(root, "bench", "grouping_smem_check.py"), "--kernel", kernel,
                          "--groups", *groups], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("G ")]
    assert len(lines) == 2 * len(groups), res.stdout
    for ln in lines:
        n = int(re.search(words + r" (\d+)", ln).group(1))
        assert int(re.search(r"shared=(\d+)", ln).group(1)) == 4 * n, ln
        assert int(re.search(r"spill_st=(\d+)", ln).group(1)) == 0, ln
        assert int(re.search(r"'ATOMS.OR': (\d+)", ln).group(1)) > 0, ln


def test_three_dim_indices_and_fallback(monkeypatch):
    """[T, 1, K] indices; without kernels (TRITON_INTERPRET=0 on the CPU) build_groups is the reference."""
    idx, tl = make_indices(6, 16, 40, dup=True, lens=True)
    want = oracle(idx, tl, 40, 4, 0, 6)
    assert_groups(run(build_groups, idx[:, None], tl, 40, 4, 0, 6), want)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert_groups(run(build_groups, idx, tl, 40, 4, 0, 6), want, ordered=True)


def test_build_groups_checks():
    idx, tl = make_indices(10, 16, 40, lens=True)
    e, m, n = scratch(3, 64)
    good = dict(indices=idx, topk_length=tl, num_slots=40, G=4, token0=0, ntokens=10, entries=e, masks=m, counts=n)
    bad = [
        ("indices", dict(indices=idx.long())), ("indices", dict(indices=idx[:, None].expand(10, 2, 16))),
        ("topk_length", dict(topk_length=tl[:5])), ("topk_length", dict(topk_length=tl.long())),
        ("num_slots", dict(num_slots=-1)), ("G", dict(G=0)), ("G", dict(G=17)), ("token0", dict(token0=-1)),
        ("ntokens", dict(ntokens=-2)), ("token0 \\+ ntokens", dict(token0=4, ntokens=7)),
        ("entries must have a row per group", dict(entries=e[:2], masks=m[:2], counts=n[:2])),
        ("entries", dict(entries=e[:, :60])), ("entries", dict(entries=e.float())),
        ("masks", dict(masks=m[:, :32])), ("counts", dict(counts=n[:2])), ("counts", dict(counts=n.long())),
        ("entries", dict(entries=e.t().contiguous().t())),
    ]
    for name, change in bad:
        with pytest.raises(ValueError, match=name):
            build_groups(**{**good, **change})
    before = [x.clone() for x in (e, m, n)]
    with pytest.raises(ValueError):
        build_groups(**{**good, "G": 2})                         # 5 groups, 3 rows
    assert all(torch.equal(a, b) for a, b in zip(before, (e, m, n)))   # nothing written
    assert build_groups(**good) == 3
    assert build_groups(**{**good, "ntokens": 0}) == 0


# ---------------------------------------------------------------------------------------------------
# sparse_mla_prefill(scratch=)
# ---------------------------------------------------------------------------------------------------

def _prefill_inputs(t=5, h=8, k=16, n=64):
    q = torch.randn(t, h, 576).to(torch.bfloat16)
    kv = torch.randn(n, 576).to(torch.bfloat16)
    idx, _ = make_indices(t, k, n, span=n)
    return q, kv, idx


def test_prefill_scratch_validation():
    q, kv, idx = _prefill_inputs(t=20)
    spec = prefill_scratch_spec(20, 8, 16)
    assert spec[2][0] == (3,)
    good = [torch.zeros(s, dtype=dt) for s, dt in spec]
    e, m, c = good
    bad = [
        ("scratch\\[0\\]", [e.long(), m, c]), ("scratch\\[1\\]", [e, m.float(), c]),
        ("scratch\\[2\\]", [e, m, c.long()]),
        ("scratch\\[0\\]", [e[:, :64], m, c]), ("scratch\\[1\\]", [e, m[:1], c]), ("scratch\\[2\\]", [e, m, c[:1]]),
        ("scratch\\[0\\]", [e[:0], m[:0], c[:0]]),
        ("scratch\\[0\\] must be contiguous", [torch.zeros(3, 256, dtype=torch.int32)[:, :128], m, c]),
        ("scratch\\[1\\] must be contiguous", [e, torch.zeros(3, 256, dtype=torch.int32)[:, 128:], c]),
        ("scratch\\[2\\]", [e[:2], m[:2], torch.zeros(2, 2, dtype=torch.int32)[:, 0]]),
        ("scratch\\[1\\]", [e, torch.empty(m.shape, dtype=torch.int32, device="meta"), c]),
        ("scratch must hold the 3", good[:2]), ("scratch must be a sequence", e),
    ]
    for match, s in bad:
        with pytest.raises(ValueError, match=match):
            sparse_mla_prefill(q, kv, idx, 0.1, scratch=s)
    # 64 heads: G == 1, the spec is [] and only None / empty is accepted
    q64 = torch.randn(20, 64, 576).to(torch.bfloat16)
    with pytest.raises(ValueError, match="scratch must hold the 0"):
        sparse_mla_prefill(q64, kv, idx, 0.1, scratch=good)
    sparse_mla_prefill(q64, kv, idx, 0.1, scratch=[])
    sparse_mla_prefill(q, kv, idx, 0.1, scratch=[e[:1], m[:1], c[:1]])   # fewer groups than the spec: chunks


@pytest.mark.parametrize("interpret", ["0", "1"])
def test_prefill_scratch_passes_through(monkeypatch, interpret):
    """A valid scratch (any C >= 1 groups) changes nothing in the result; the reference path (TRITON_INTERPRET
    0) and the launcher (interpreted Triton kernels) both take it. 17 tokens at 8 heads are 3 groups of G = 8 (the
    last partial): scratch of 1 or 2 groups runs them in 3 or 2 chunks where the grouped kernel runs (on CPU both
    paths ignore it), 3 groups (the spec's) in one. Scratch holds junk (-7) and out / lse NaN before each call; every
    result is within SPEC 3's tolerances of the reference (check_close) and equal to the call without scratch."""
    monkeypatch.setenv("TRITON_INTERPRET", interpret)
    t, h, k = 17, 8, 16
    q, kv, idx = _prefill_inputs(t=t, h=h, k=k, n=32)
    tl = torch.randint(0, k + 1, (t,), dtype=torch.int32)
    tl[1] = 0
    _, g = group_shape(h)
    spec = prefill_scratch_spec(t, h, k)
    assert g == 8 and spec[0][0] == (3, g * k)
    ref = sparse_mla_reference(q, kv, idx, 0.1, topk_length=tl)
    want = poisoned_outputs(t, h)
    sparse_mla_prefill(q, kv, idx, 0.1, topk_length=tl, variant="native", out=want[0], lse=want[1])
    check_close(*want, *ref)
    for c in (1, 2, 3):
        assert (-(-t // (c * g)) > 1) == (c < 3)  # chunks of c * g tokens: several below the spec's 3 groups
        s = [torch.full((c, g * k), -7, dtype=torch.int32), torch.full((c, g * k), -7, dtype=torch.int32),
             torch.full((c,), -7, dtype=torch.int32)]
        got = poisoned_outputs(t, h)
        sparse_mla_prefill(q, kv, idx, 0.1, topk_length=tl, variant="native", scratch=s, out=got[0], lse=got[1])
        check_close(*got, *ref)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_prefill_scratch_traces(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q, kv, idx = _prefill_inputs(t=3, h=8, k=16, n=32)
    s = [torch.zeros(sh, dtype=dt) for sh, dt in prefill_scratch_spec(3, 8, 16)]
    want = sparse_mla_prefill(q, kv, idx, 0.1, scratch=s)
    fn = torch.compile(lambda q, kv, idx, a, b, c: sparse_mla_prefill(q, kv, idx, 0.1, scratch=[a, b, c]),
                       fullgraph=True, backend="aot_eager")
    got = fn(q, kv, idx, *s)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


# ---------------------------------------------------------------------------------------------------
# the backend's workspace
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout, heads, reserved", [("bf16", 8, True), ("bf16", 20, True), ("bf16", 64, False),
                                                     ("fp8_ds_mla", 16, False), ("fp8_ds_mla", 32, True),
                                                     ("fp8_ds_mla", 64, False)])
def test_backend_reserves_prefill_scratch(layout, heads, reserved):
    """The workspace holds prefill_scratch_spec of the largest prefill call (max_num_tokens) on the paths that
    call sparse_mla_prefill (bf16_prefill; fp8_gathered, 32 heads and up), only where G > 1 (<= 32 heads); the
    views a step takes fit once the workspace is locked."""
    from dsattn.backend.attention import PREFILL_SCRATCH, DSAAttention
    from dsattn.config import preset
    from dsattn.memory.workspace import specs_nbytes
    geo = preset("glm-5").scaled(index_topk=16, index_n_heads=4, num_heads=heads)
    attn = DSAAttention(geo, tp=1, kv_layout=layout, block_size=16, max_num_tokens=64, max_num_reqs=8,
                        max_model_len=128)
    rows = {r["consumer"]: r for r in attn.workspace.report()}
    assert (PREFILL_SCRATCH in rows) == reserved
    if not reserved:
        return
    spec = prefill_scratch_spec(64, heads, attn.width)
    assert rows[PREFILL_SCRATCH]["phase"] == "attention"
    assert rows[PREFILL_SCRATCH]["bytes"] == specs_nbytes(dict(enumerate(spec)))
    attn.lock()
    for t in (1, 9, 64):
        views = attn._prefill_scratch(t)
        assert [(tuple(v.shape), v.dtype) for v in views] == prefill_scratch_spec(t, heads, attn.width)
