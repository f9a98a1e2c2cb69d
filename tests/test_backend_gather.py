"""The backend's gathers (ops/gather) under TRITON_INTERPRET=1 against their reference twins, at tiny sizes:
positions -> slots / gathered rows (-1 kept, positions past the table), paged indexer keys and fp8
latent rows (dequantized to bf16) gathered by pieces. Outputs are poisoned first; rows no piece covers
must keep the poison."""

import pytest
import torch

pytest.importorskip("triton")
pytestmark = pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)

from dsattn import formats
from dsattn.ops._triton import allow_runtime_loop_bounds
from dsattn.ops.cache.reference import write_kv_cache_reference
from dsattn.ops.gather import (gather_indexer_keys, gather_latent, gather_slots, positions_to_offsets,
                               positions_to_slots)
from dsattn.ops.gather import reference as ref

allow_runtime_loop_bounds()


@pytest.fixture(params=["kernel", "reference"])
def mode(request, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1" if request.param == "kernel" else "0")
    return request.param


def _table(nb=14, b=3, m=4):
    return torch.randperm(nb)[: b * m].view(b, m).to(torch.int32)


@pytest.mark.parametrize("bs", [1, 16, 64])
def test_positions_to_slots(mode, bs):
    table = _table()
    pos = torch.randint(-3, 4 * bs + bs // 2 + 2, (5, 37), dtype=torch.int32)  # -1s and positions past the table
    req = torch.randint(0, 3, (5,), dtype=torch.int32)
    out = torch.full_like(pos, -7)
    positions_to_slots(pos, req, table, bs, out=out)
    inside = pos.clamp_min(0) // bs < table.shape[1]
    want = ref.positions_to_slots_reference(torch.where(inside, pos, -1), req, table, bs)
    assert torch.equal(out, want)
    assert ((out == -1) == ((pos < 0) | ~inside)).all()
    # in place, on a row-strided view
    buf = torch.full((5, 50), -9, dtype=torch.int32)
    buf[:, :37] = pos
    positions_to_slots(buf[:, :37], req, table, bs, out=buf[:, :37])
    assert torch.equal(buf[:, :37], want) and (buf[:, 37:] == -9).all()


def test_positions_to_offsets(mode):
    pos = torch.randint(-2, 100, (4, 19), dtype=torch.int32)
    base = torch.randint(0, 1000, (4,), dtype=torch.int32)
    out = positions_to_offsets(pos, base)
    assert torch.equal(out, torch.where(pos >= 0, pos + base[:, None], -1))


def _pieces():
    req = torch.tensor([2, 0, 1], dtype=torch.int32)
    length = torch.tensor([45, 1, 30], dtype=torch.int32)
    offset = torch.tensor([0, 45, 50], dtype=torch.int32)  # rows 46..49 and 80.. are covered by no piece
    return req, length, offset, 45


def test_gather_indexer_keys(mode):
    nb, bs = 14, 16
    cache = torch.randint(0, 255, (nb, bs, formats.INDEX_ROW_BYTES), dtype=torch.uint8)
    table = _table(nb)
    req, length, offset, max_len = _pieces()
    k = torch.randint(0, 255, (90, 128), dtype=torch.uint8)
    s = torch.full((90,), float("nan"))
    want_k, want_s = k.clone(), s.clone()
    gather_indexer_keys(cache, table, req, length, offset, max_len, k.view(formats.FP8), s)
    ref.gather_indexer_keys_reference(cache, table, req, length, offset, want_k.view(formats.FP8), want_s)
    assert torch.equal(k, want_k) and torch.equal(s.view(torch.int32), want_s.view(torch.int32))
    # spot-check one row against the cache layout directly
    vals, scales = formats.indexer_cache_views(cache)
    slot = int(table[1, 0]) * bs + 7  # request 1, position 7 -> row 57
    assert torch.equal(k[57], vals[slot // bs, slot % bs].view(torch.uint8))
    assert torch.isnan(s[46:50]).all() and torch.isnan(s[80:]).all()


@pytest.mark.parametrize("layout, d_cache, d_out", [("fp8_ds_mla", 576, 576), ("fp8_ds_mla", 576, 512),
                                                    ("fp8_ds_mla_nope", 512, 512)])
def test_gather_latent(mode, layout, d_cache, d_out):
    nb, bs = 14, 16
    cache = formats.new_kv_cache(nb, bs, layout, d_cache)
    cache.copy_(torch.randint(0, 255, cache.shape, dtype=torch.uint8))  # poison: unwritten slots are NaN-ish
    table = _table(nb)
    req, length, offset, max_len = _pieces()
    slots = torch.cat([formats.slots_from_positions(table, torch.full((n,), r), torch.arange(n), bs)
                       for r, n in zip(req.tolist(), length.tolist())])
    write_kv_cache_reference(torch.randn(slots.numel(), d_cache), cache, slots, layout)
    out = torch.full((90, d_out), float("nan"), dtype=torch.bfloat16)
    gather_latent(cache, table, req, length, offset, max_len, out)
    want = formats.unpack_latent_rows(formats.kv_cache_flat(cache)[slots.long()], layout, d_out)
    covered = torch.cat([torch.arange(o, o + n) for o, n in zip(offset.tolist(), length.tolist())])
    assert torch.equal(out[covered], want.bfloat16())  # power-of-two scales: bf16 is exact
    assert torch.equal(out[covered].float(), want)
    assert torch.isnan(out[46:50]).all() and torch.isnan(out[80:]).all()


def test_gather_slots(mode):
    """Each piece position's slot through its block-table row, at the piece's offset (the bf16 path's key_slots);
    rows no piece covers keep the poison."""
    bs = 16
    table = _table()
    req, length, offset, max_len = _pieces()
    out = torch.full((90,), -7, dtype=torch.int32)
    gather_slots(table, req, length, offset, max_len, bs, out)
    want = torch.cat([formats.slots_from_positions(table, torch.full((n,), r), torch.arange(n), bs)
                      for r, n in zip(req.tolist(), length.tolist())])
    covered = torch.cat([torch.arange(o, o + n) for o, n in zip(offset.tolist(), length.tolist())])
    assert torch.equal(out[covered], want.to(torch.int32))
    assert (out[46:50] == -7).all() and (out[80:] == -7).all()


def test_rejects():
    table = _table()
    pos = torch.zeros(2, 3, dtype=torch.int32)
    with pytest.raises(ValueError, match="positions must have dtype"):
        positions_to_slots(pos.long(), torch.zeros(2, dtype=torch.int32), table, 16)
    with pytest.raises(ValueError, match="row_req must have shape"):
        positions_to_slots(pos, torch.zeros(3, dtype=torch.int32), table, 16)
    with pytest.raises(ValueError, match="block_size"):
        positions_to_slots(pos, torch.zeros(2, dtype=torch.int32), table, 0)
    with pytest.raises(ValueError, match="out must have shape"):
        positions_to_offsets(pos, torch.zeros(2, dtype=torch.int32), out=torch.zeros(2, 4, dtype=torch.int32))
    req, length, offset, _ = _pieces()
    cache = formats.new_kv_cache(14, 16, "fp8_ds_mla", 576)
    with pytest.raises(ValueError, match="max_len"):
        gather_latent(cache, table, req, length, offset, -1, torch.empty(90, 576, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="out must have 512 columns"):
        gather_latent(formats.new_kv_cache(14, 16, "fp8_ds_mla_nope", 512), table, req, length, offset, 45,
                      torch.empty(90, 576, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="kv_cache must have dtype"):
        gather_latent(formats.new_kv_cache(14, 16, "bf16", 576), table, req, length, offset, 45,
                      torch.empty(90, 576, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="out must have dtype"):
        gather_slots(table, req, length, offset, 45, 16, torch.empty(90))
    with pytest.raises(ValueError, match="block_size"):
        gather_slots(table, req, length, offset, 45, 0, torch.empty(90, dtype=torch.int32))
    with pytest.raises(ValueError, match="out must have a contiguous"):
        gather_slots(table, req, length, offset, 45, 16, torch.empty(180, dtype=torch.int32)[::2])
    with pytest.raises(ValueError, match="out_k must have dtype"):
        gather_indexer_keys(formats.new_indexer_cache(14, 16), table, req, length, offset, 45,
                            torch.empty(90, 128), torch.empty(90))
