"""sparse_mla_prefill's key_slots (session 46): indices as keys, each key's row in key_slots; the union lists of the
grouped kernel built over the keys (grouping.translate_entries turns them into slots). ops.gather.gather_slots (the
key -> slot map of requests' positions) is tested with the other gathers (tests/test_backend_gather.py), the bf16
backend path's keyed calls in tests/test_backend*.py.

On a CPU machine conftest.py sets TRITON_INTERPRET=1: the kernels run interpreted (the Gluon grouped kernel does not
run here; the keyed call takes the slot lookup and the Triton kernel, tests/gpu/test_grouping_gpu.py the grouped one).
"""
import pytest
import torch

from dsattn.ops.sparse_mla import slots_of_keys, sparse_mla_prefill
from dsattn.ops.sparse_mla import grouping
from dsattn.ops.sparse_mla.reference import sparse_mla_reference
from dsattn.ops.sparse_mla.testing import check_close, poisoned_outputs

pytestmark = pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)


def _keyed(t=5, h=8, d=576, n=60, nk=48, k=24, seed=0):
    """q, kv [n rows], keys [t, k] (some -1, some >= nk), key_slots [nk] (a permutation of rows, one -1, one past n)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(t, h, d, generator=g).bfloat16()
    kv = torch.randn(n, d, generator=g).bfloat16()
    key_slots = torch.randperm(n, generator=g)[:nk].to(torch.int32)
    key_slots[3] = -1
    key_slots[5] = n + 2
    keys = torch.randint(-2, nk + 3, (t, k), generator=g, dtype=torch.int32)
    return q, kv, keys, key_slots


def test_slots_of_keys():
    keys = torch.tensor([[0, 2, -1, 3, 9]], dtype=torch.int32)
    ks = torch.tensor([7, -1, 5, 100], dtype=torch.int32)
    assert slots_of_keys(keys, ks).tolist() == [[7, 5, -1, 100, -1]]
    assert slots_of_keys(keys, ks[:0]).tolist() == [[-1] * 5]


def _slots_named(keys, key_slots):
    """key_slots[k] for each key k in [0, NK), else -1: the slots the keys name, spelled out here (not through
    slots_of_keys) for the reference."""
    ok = (keys >= 0) & (keys < key_slots.shape[0])
    return torch.where(ok, key_slots[keys.clamp(0, key_slots.shape[0] - 1).long()], -1).to(torch.int32)


@pytest.mark.parametrize("h, variant", [(8, "native"), (8, "pad64"), (16, None), (64, None)])
def test_prefill_with_key_slots_equals_its_slots(h, variant):
    """The call with (keys, key_slots) gives the bits of the call with the slots they name (invalid keys, a -1 slot
    and a slot past the source skipped alike), topk_length too; each call writes every element of NaN-poisoned
    out / lse within SPEC 3's tolerances of the reference over those slots (check_close; row 1 is empty)."""
    q, kv, keys, key_slots = _keyed(h=h)
    tl = torch.tensor([24, 0, 7, 24, 13], dtype=torch.int32)
    ref = sparse_mla_reference(q, kv, _slots_named(keys, key_slots), 0.1, topk_length=tl)
    a = poisoned_outputs(5, h)
    sparse_mla_prefill(q, kv, keys, 0.1, topk_length=tl, variant=variant, key_slots=key_slots, out=a[0], lse=a[1])
    check_close(*a, *ref)
    b = poisoned_outputs(5, h)
    sparse_mla_prefill(q, kv, slots_of_keys(keys, key_slots), 0.1, topk_length=tl, variant=variant, out=b[0],
                       lse=b[1])
    check_close(*b, *ref)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.isinf(ref[1][1]).all() and torch.isfinite(ref[1][[0, 2, 3, 4]]).all()


def test_prefill_with_key_slots_reference_path(monkeypatch):
    """The reference path (TRITON_INTERPRET 0) with key_slots: the same result as with the slots, both written over
    NaN-poisoned out / lse and equal to the reference over the slots the keys name."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q, kv, keys, key_slots = _keyed(seed=3)
    ref = sparse_mla_reference(q, kv, _slots_named(keys, key_slots), 0.1)
    a, b = poisoned_outputs(5, 8), poisoned_outputs(5, 8)
    sparse_mla_prefill(q, kv, keys, 0.1, key_slots=key_slots, out=a[0], lse=a[1])
    sparse_mla_prefill(q, kv, slots_of_keys(keys, key_slots), 0.1, out=b[0], lse=b[1])
    check_close(*a, *ref)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("bad, match", [
    (lambda ks: ks.long(), "key_slots must have dtype"),
    (lambda ks: ks[None], "key_slots must have"),
    (lambda ks: torch.stack([ks, ks], 1)[:, 0], "key_slots must have a contiguous"),
])
def test_prefill_key_slots_rejected(bad, match):
    q, kv, keys, key_slots = _keyed()
    out = torch.full((5, 8, 512), float("nan"), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=match):
        sparse_mla_prefill(q, kv, keys, 0.1, out=out, key_slots=bad(key_slots))
    assert torch.isnan(out.float()).all()


@pytest.mark.parametrize("g", [8, 4, 2])
def test_union_lists_over_keys_translate_to_the_slots_lists(g, monkeypatch):
    """build_groups over keys, then translate_entries, gives the lists build_groups makes over the slots the keys
    name (as (slot, mask) multisets; the order is the keys'), repeated keys (the rebuild) and topk_length included."""
    monkeypatch.delenv("DSATTN_GROUPING_IMPL", raising=False)
    monkeypatch.setattr(grouping, "IMPL", "auto")
    gen = torch.Generator().manual_seed(g)
    t, k, nk, n = 3 * g + 1, 32, 200, 5000
    key_slots = (torch.randperm(n, generator=gen)[:nk]).to(torch.int32)
    keys = torch.randint(-1, nk + 2, (t, k), generator=gen, dtype=torch.int32)
    keys[1, 4] = keys[1, 2]
    tl = torch.randint(0, k + 1, (t,), generator=gen, dtype=torch.int32)
    rows = -(-t // g)
    bufs = [torch.full((rows, g * k), -7, dtype=torch.int32), torch.full((rows, g * k), -7, dtype=torch.int32),
            torch.full((rows,), -7, dtype=torch.int32)]
    r = grouping.build_groups(keys, tl, nk, g, 0, t, *bufs)
    grouping.translate_entries(bufs[0], bufs[2], r, key_slots)
    want = [torch.empty_like(x) for x in bufs]
    grouping.build_groups_reference(slots_of_keys(keys, key_slots), tl, n, g, 0, t, *want)
    assert torch.equal(bufs[2], want[2])
    for c in range(r):
        m = int(want[2][c])
        got = sorted(zip(bufs[0][c, :m].tolist(), bufs[1][c, :m].tolist()))
        assert got == sorted(zip(want[0][c, :m].tolist(), want[1][c, :m].tolist())), c
        assert (bufs[0][c, m:] == -7).all() or grouping._impl() != "auto"


def test_prefill_with_key_slots_traces():
    """The custom op takes key_slots through torch.compile (fullgraph) as well."""
    q, kv, keys, key_slots = _keyed(seed=5)
    ref = sparse_mla_prefill(q, kv, keys, 0.1, key_slots=key_slots)
    fn = torch.compile(lambda q, kv, k, ks: sparse_mla_prefill(q, kv, k, 0.1, key_slots=ks), fullgraph=True,
                       backend="aot_eager")
    got = fn(q, kv, keys, key_slots)
    torch.testing.assert_close(got[0], ref[0])
    torch.testing.assert_close(got[1], ref[1])


@pytest.mark.parametrize("interpret", ["1", "0"])
def test_translate_entries_live_entries_only(interpret, monkeypatch):
    """translate_entries, the Triton kernel (interpreted) and the PyTorch path where no kernel runs: entries before
    counts[c] become key_slots[entry] for the groups built, everything else is left as it was; with masks, the masks
    of entries whose slot is invalid are cleared too."""
    monkeypatch.setenv("TRITON_INTERPRET", interpret)
    gen = torch.Generator().manual_seed(7)
    key_slots = torch.randint(-1, 1000, (50,), generator=gen, dtype=torch.int32)
    entries = torch.randint(0, 50, (4, 40), generator=gen, dtype=torch.int32)
    counts = torch.tensor([40, 0, 17, 9], dtype=torch.int32)
    key_slots[:5] = torch.tensor([-1, 1000, 999, 0, -5], dtype=torch.int32)
    entries[0, :5] = torch.arange(5, dtype=torch.int32)  # group 0 holds the keys of invalid slots
    masks = torch.randint(1, 255, entries.shape, generator=gen, dtype=torch.int32)
    before, mbefore = entries.clone(), masks.clone()
    grouping.translate_entries(entries, counts, 3, key_slots)
    for c, n in enumerate([40, 0, 17]):
        assert torch.equal(entries[c, :n], key_slots[before[c, :n].long()])
        assert torch.equal(entries[c, n:], before[c, n:])
    assert torch.equal(entries[3], before[3])
    # with masks (gluon_pair's lists): an entry whose slot is outside [0, 1000) loses its bits, nothing else changes
    entries.copy_(before)
    grouping.translate_entries(entries, counts, 3, key_slots, masks, 1000)
    for c, n in enumerate([40, 0, 17]):
        slots = key_slots[before[c, :n].long()]
        assert torch.equal(entries[c, :n], slots)
        bad = (slots < 0) | (slots >= 1000)
        assert bad.any() or c > 0
        assert (masks[c, :n][bad] == 0).all() and torch.equal(masks[c, :n][~bad], mbefore[c, :n][~bad])
        assert torch.equal(masks[c, n:], mbefore[c, n:])
    assert torch.equal(masks[3], mbefore[3])
