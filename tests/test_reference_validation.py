"""Bad input to the reference twins raises ValueError naming the argument, before anything runs; a
rejected cache write leaves the cache untouched. (The public ops check their own arguments; these are
the references kernels are judged against, so they must not silently compute on garbage either.)

Each case starts from valid arguments, breaks one (dtype, shape, device, a negative length, an
out-of-range value) and expects the argument's name in the message. "meta" stands in for another
device: its tensors have shapes and dtypes but no values.
"""
from __future__ import annotations

import math
import re

import pytest
import torch

from dsattn.formats import new_indexer_cache, new_kv_cache, pack_latent_rows, unpack_latent_rows
from dsattn.ops.cache.reference import write_indexer_cache_reference, write_kv_cache_reference
from dsattn.ops.indexer.reference import (indexer_logits_paged_reference, indexer_logits_reference,
                                          indexer_topk_reference, kpool_expand, kpool_pooled_keys, kpool_topk_reference)
from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference, sparse_mla_reference
from dsattn.ops.topk.reference import topk_reference

I32 = torch.int32
META = torch.device("meta")


def _meta(t):
    return torch.empty_like(t, device=META)


def _named(name):
    """A regex for the argument's name as a word of the message ("k" must not match "ke")."""
    return rf"(^|[^\w]){re.escape(name)}($|[^\w])"


def _check(fn, kwargs, name, **bad):
    with pytest.raises(ValueError, match=_named(name)):
        fn(**{**kwargs, **bad})


# ---------------------------------------------------------------------------------------------------

def _mla_args():
    return dict(q=torch.randn(3, 2, 576), kv=torch.randn(10, 576), indices=torch.randint(-1, 10, (3, 4), dtype=I32),
                sm_scale=0.1, d_v=512, topk_length=torch.tensor([4, 0, 2], dtype=I32))


MLA_BAD = [
    ("q", dict(q=torch.randn(3, 2, 576, dtype=torch.float64))),
    ("q", dict(q=torch.randn(3, 576))),
    ("q", dict(q=torch.randint(0, 5, (3, 2, 576)))),
    ("kv", dict(kv=torch.randn(10, 512))),  # narrower than q
    ("kv", dict(kv=torch.randn(10, 2, 576))),
    ("kv", dict(kv=torch.zeros(10, 576, dtype=torch.uint8))),
    ("indices", dict(indices=torch.zeros(3, 4))),  # float
    ("indices", dict(indices=torch.zeros(4, 4, dtype=I32))),  # rows != tokens
    ("indices", dict(indices=torch.zeros(3, 2, 4, dtype=I32))),
    ("indices", dict(indices=torch.zeros(12, dtype=I32))),
    ("sm_scale", dict(sm_scale=0.0)),
    ("sm_scale", dict(sm_scale=-0.1)),
    ("sm_scale", dict(sm_scale=math.nan)),
    ("sm_scale", dict(sm_scale="0.1")),
    ("d_v", dict(d_v=600)),
    ("d_v", dict(d_v=0)),
    ("topk_length", dict(topk_length=torch.tensor([4, 1], dtype=I32))),
    ("topk_length", dict(topk_length=torch.tensor([4.0, 1.0, 2.0]))),
    ("topk_length", dict(topk_length=torch.zeros(3, dtype=I32, device=META))),
    ("kv", dict(kv=torch.empty(10, 576, device=META))),
    ("indices", dict(indices=torch.zeros(3, 4, dtype=I32, device=META))),
]


@pytest.mark.parametrize("name,bad", MLA_BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(MLA_BAD)])
def test_sparse_mla_reference_rejects(name, bad):
    _check(sparse_mla_reference, _mla_args(), name, **bad)


def _paged_args(layout="fp8_ds_mla", d=576):
    row_d = 576 if layout == "fp8_ds_mla" else d
    return dict(q=torch.randn(3, 2, d), kv_cache=new_kv_cache(3, 4, layout, row_d),
                indices=torch.randint(-1, 12, (3, 4), dtype=I32), sm_scale=0.1, layout=layout)


PAGED_BAD = [
    ("layout", dict(layout="fp8")),
    ("kv_cache", dict(layout="bf16")),  # a 656-byte cache called bf16
    ("kv_cache", dict(kv_cache=new_kv_cache(3, 4, "fp8_ds_mla_nope", 512))),
    ("kv_cache", dict(kv_cache=torch.zeros(3, 4, 600, dtype=torch.uint8))),
    ("kv_cache", dict(kv_cache=torch.zeros(12, 656, dtype=torch.uint8))),
    ("q", dict(q=torch.randn(3, 2, 640))),
    ("q", dict(q=torch.randn(3, 2, 544))),
    ("kv_cache", dict(kv_cache=torch.empty(3, 4, 656, dtype=torch.uint8, device=META))),
]


@pytest.mark.parametrize("name,bad", PAGED_BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(PAGED_BAD)])
def test_sparse_mla_paged_reference_rejects(name, bad):
    _check(sparse_mla_paged_reference, _paged_args(), name, **bad)


def test_sparse_mla_paged_nope_layout_needs_512():
    _check(sparse_mla_paged_reference, _paged_args("fp8_ds_mla_nope", 512), "q", q=torch.randn(3, 2, 576))
    _check(sparse_mla_paged_reference, _paged_args("bf16", 512), "q", q=torch.randn(3, 2, 576))


# ---------------------------------------------------------------------------------------------------

def _logits_args():
    return dict(q=torch.randn(3, 4, 128), weights=torch.randn(3, 4), k=torch.randn(9, 128),
                ks=torch.tensor([0, 2, 5], dtype=I32), ke=torch.tensor([1, 6, 9], dtype=I32))


LOGITS_BAD = [
    ("q", dict(q=torch.randn(3, 128))),
    ("q", dict(q=torch.randint(0, 3, (3, 4, 128)))),
    ("weights", dict(weights=torch.randn(3, 5))),
    ("weights", dict(weights=torch.randn(3, 4, dtype=torch.float64))),
    ("k", dict(k=torch.randn(9, 64))),
    ("k", dict(k=torch.randn(9, 1, 128))),
    ("ks", dict(ks=torch.tensor([0, -1, 5], dtype=I32))),
    ("ke", dict(ke=torch.tensor([1, 6, 10], dtype=I32))),  # past the keys
    ("ke - ks", dict(ke=torch.tensor([1, 1, 9], dtype=I32))),  # a negative length
    ("ks", dict(ks=torch.tensor([0, 2], dtype=I32))),
    ("ke", dict(ke=torch.tensor([1.0, 6.0, 9.0]))),
    ("k", dict(k=torch.empty(9, 128, device=META))),
    ("ks", dict(ks=torch.zeros(3, dtype=I32, device=META))),
]


@pytest.mark.parametrize("name,bad", LOGITS_BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(LOGITS_BAD)])
def test_indexer_logits_reference_rejects(name, bad):
    _check(indexer_logits_reference, _logits_args(), name, **bad)


def test_indexer_topk_reference_rejects_topk():
    for topk in (0, -3, 2.5, True):
        _check(indexer_topk_reference, {**_logits_args(), "topk": topk}, "topk")


def test_indexer_accepts_fp8_queries_and_keys():
    a = _logits_args()
    q8, k8 = a["q"].to(torch.float8_e4m3fn), a["k"].to(torch.float8_e4m3fn)
    got = indexer_logits_reference(q8, a["weights"], k8, a["ks"], a["ke"])
    want = indexer_logits_reference(q8.float(), a["weights"], k8.float(), a["ks"], a["ke"])
    assert torch.equal(got, want)


def _paged_logits_args():
    return dict(q=torch.randn(3, 4, 128), weights=torch.randn(3, 4), indexer_cache=new_indexer_cache(4, 5).fill_(0),
                block_table=torch.tensor([[2, 0, -1], [3, 1, -1]], dtype=I32), row_req=torch.tensor([0, 1, 1], dtype=I32),
                row_len=torch.tensor([7, 0, 10], dtype=I32))


PAGED_LOGITS_BAD = [
    ("q", dict(q=torch.randn(3, 4, 64))),
    ("weights", dict(weights=torch.randn(4, 4))),
    ("indexer_cache", dict(indexer_cache=torch.zeros(4, 5, 128, dtype=torch.uint8))),
    ("indexer_cache", dict(indexer_cache=torch.zeros(4, 5, 132))),
    ("indexer_cache", dict(indexer_cache=torch.zeros(4, 6, 132, dtype=torch.uint8)[:, :5])),  # not contiguous
    ("block_table", dict(block_table=torch.tensor([2, 0, 3], dtype=I32))),
    ("block_table", dict(block_table=torch.tensor([[2, 0, -1], [3, 9, -1]], dtype=I32))),  # block 9 of 4, in use
    ("block_table", dict(block_table=torch.tensor([[2, -1, -1], [3, 1, -1]], dtype=I32))),  # -1 in use (pos 5, 6)
    ("row_req", dict(row_req=torch.tensor([0, 2, 1], dtype=I32))),
    ("row_req", dict(row_req=torch.tensor([0, -1, 1], dtype=I32))),
    ("row_len", dict(row_len=torch.tensor([7, -2, 10], dtype=I32))),  # a negative length
    ("row_len", dict(row_len=torch.tensor([7, 0, 16], dtype=I32))),  # more than the table holds
    ("row_len", dict(row_len=torch.tensor([7, 0], dtype=I32))),
    ("max_len", dict(max_len=-1)),
    ("max_len", dict(max_len=3.0)),
    ("block_table", dict(block_table=torch.zeros(2, 3, dtype=I32, device=META))),
]


@pytest.mark.parametrize("name,bad", PAGED_LOGITS_BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(PAGED_LOGITS_BAD)])
def test_indexer_logits_paged_reference_rejects(name, bad):
    _check(indexer_logits_paged_reference, _paged_logits_args(), name, **bad)


def test_indexer_logits_paged_reference_empty_batch():
    a = _paged_logits_args()
    out = indexer_logits_paged_reference(a["q"][:0], a["weights"][:0], a["indexer_cache"], a["block_table"],
                                         a["row_req"][:0], a["row_len"][:0])
    assert out.shape == (0, 0)


# ---------------------------------------------------------------------------------------------------

def _topk_args():
    return dict(logits=torch.randn(3, 10), starts=torch.tensor([0, 2, 4], dtype=I32),
                ends=torch.tensor([5, 10, 4], dtype=I32), k=4)


TOPK_BAD = [
    ("logits", dict(logits=torch.randn(30))),
    ("logits", dict(logits=torch.randint(0, 4, (3, 10)))),
    ("starts", dict(starts=torch.tensor([0, -2, 4], dtype=I32))),
    ("starts", dict(starts=torch.tensor([0.0, 2.0, 4.0]))),
    ("ends", dict(ends=torch.tensor([5, 11, 4], dtype=I32))),
    ("ends - starts", dict(ends=torch.tensor([5, 1, 4], dtype=I32))),
    ("ends", dict(ends=torch.tensor([5, 10], dtype=I32))),
    ("k", dict(k=0)),
    ("k", dict(k=None)),
    ("starts", dict(starts=torch.zeros(3, dtype=I32, device=META))),
]


@pytest.mark.parametrize("name,bad", TOPK_BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(TOPK_BAD)])
def test_topk_reference_rejects(name, bad):
    _check(topk_reference, _topk_args(), name, **bad)


# ---------------------------------------------------------------------------------------------------

def _kpool_args():
    return dict(q=torch.randn(3, 4, 128), weights=torch.randn(3, 4), pooled=torch.randn(5, 128),
                pool_start=torch.tensor([0, 0, 2], dtype=I32), positions=torch.tensor([3, 8, 13], dtype=I32),
                topk=8, kpool=4)


KPOOL_BAD = [
    ("kpool", dict(kpool=0)),
    ("topk", dict(topk=6)),  # not a multiple of kpool
    ("topk", dict(topk=2)),
    ("positions", dict(positions=torch.tensor([3, -1, 13], dtype=I32))),
    ("positions", dict(positions=torch.tensor([3, 8], dtype=I32))),
    ("pool_start", dict(pool_start=torch.tensor([0, -1, 2], dtype=I32))),
    ("pool_start", dict(pool_start=torch.tensor([0, 0, 3], dtype=I32))),  # request 2 would need pools 3..6
    ("pooled", dict(pooled=torch.randn(5, 64))),
    ("pooled", dict(pooled=torch.empty(5, 128, device=META))),
]


@pytest.mark.parametrize("name,bad", KPOOL_BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(KPOOL_BAD)])
def test_kpool_topk_reference_rejects(name, bad):
    _check(kpool_topk_reference, _kpool_args(), name, **bad)


def test_kpool_helpers_reject():
    keys, gates, ape = torch.randn(3, 4, 128), torch.randn(3, 4, 128), torch.randn(4, 128)
    _check(kpool_pooled_keys, dict(keys=keys, gates=gates, ape=ape), "gates", gates=torch.randn(3, 4, 64))
    _check(kpool_pooled_keys, dict(keys=keys, gates=gates, ape=ape), "ape", ape=torch.randn(16, 128))
    _check(kpool_pooled_keys, dict(keys=keys, gates=gates, ape=ape), "keys", keys=torch.randn(12, 128))
    args = dict(pool_topk=torch.tensor([[0, -1], [1, 0]], dtype=I32), positions=torch.tensor([4, 9], dtype=I32),
                kpool=4)
    _check(kpool_expand, args, "kpool", kpool=0)
    _check(kpool_expand, args, "positions", positions=torch.tensor([4, -9], dtype=I32))
    _check(kpool_expand, args, "positions", positions=torch.tensor([4], dtype=I32))
    _check(kpool_expand, args, "pool_topk", pool_topk=torch.tensor([[0.0, 1.0], [1.0, 0.0]]))


# ---------------------------------------------------------------------------------------------------
# cache writes: rejected before anything is written

def _assert_untouched(cache, before):
    assert torch.equal(cache.view(torch.uint8), before.view(torch.uint8))


WRITE_BAD = [
    ("slot_mapping", dict(slot_mapping=torch.tensor([0, 12, 3], dtype=I32))),  # one past the last slot
    ("slot_mapping", dict(slot_mapping=torch.tensor([0, 1], dtype=I32))),
    ("slot_mapping", dict(slot_mapping=torch.tensor([0.0, 1.0, 2.0]))),
    ("latent", dict(latent=torch.randn(3, 512))),  # a 576-wide bf16 cache
    ("latent", dict(latent=torch.randn(3, 576).to(torch.float64))),
    ("kv_cache", dict(layout="fp8_ds_mla")),
    ("layout", dict(layout="int8")),
    ("slot_mapping", dict(slot_mapping=torch.zeros(3, dtype=I32, device=META))),
]


@pytest.mark.parametrize("name,bad", WRITE_BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(WRITE_BAD)])
def test_write_kv_cache_reference_rejects_and_writes_nothing(name, bad):
    cache = new_kv_cache(3, 4, "bf16", 576).normal_()
    before = cache.clone()
    args = dict(latent=torch.randn(3, 576), kv_cache=cache, slot_mapping=torch.tensor([0, 5, 3], dtype=I32),
                layout="bf16")
    _check(write_kv_cache_reference, args, name, **bad)
    _assert_untouched(cache, before)


def test_write_kv_cache_fp8_rejects_wrong_width():
    cache = new_kv_cache(3, 4, "fp8_ds_mla_nope", 512).fill_(7)
    before = cache.clone()
    _check(write_kv_cache_reference, dict(latent=torch.randn(2, 576), kv_cache=cache,
                                          slot_mapping=torch.tensor([1, 2], dtype=I32), layout="fp8_ds_mla_nope"),
           "latent")
    _assert_untouched(cache, before)


WRITE_INDEX_BAD = [
    ("slot_mapping", dict(slot_mapping=torch.tensor([0, 20, 3], dtype=I32))),
    ("slot_mapping", dict(slot_mapping=torch.tensor([0, 3], dtype=I32))),
    ("k", dict(k=torch.randn(3, 64))),
    ("k", dict(k=torch.randint(0, 3, (3, 128)))),
    ("indexer_cache", dict(indexer_cache=torch.zeros(4, 5, 136, dtype=torch.uint8))),
    ("indexer_cache", dict(indexer_cache=torch.zeros(4, 5, 132, dtype=torch.uint8, device=META))),
]


@pytest.mark.parametrize("name,bad", WRITE_INDEX_BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(WRITE_INDEX_BAD)])
def test_write_indexer_cache_reference_rejects_and_writes_nothing(name, bad):
    cache = new_indexer_cache(4, 5).random_(0, 256)
    before = cache.clone()
    args = dict(k=torch.randn(3, 128), indexer_cache=cache, slot_mapping=torch.tensor([0, 19, -1], dtype=I32))
    _check(write_indexer_cache_reference, args, name, **bad)
    _assert_untouched(cache, before)


def test_pack_unpack_reject():
    with pytest.raises(ValueError, match=_named("latent")):
        pack_latent_rows(torch.randn(2, 600), "fp8_ds_mla")
    with pytest.raises(ValueError, match=_named("latent")):
        pack_latent_rows(torch.randn(2, 576), "fp8_ds_mla_nope")
    with pytest.raises(ValueError, match=_named("latent")):
        pack_latent_rows(torch.randn(576), "fp8_ds_mla")
    with pytest.raises(ValueError, match=_named("rows")):
        unpack_latent_rows(torch.zeros(2, 528, dtype=torch.uint8), "fp8_ds_mla")
    with pytest.raises(ValueError, match=_named("rows")):
        unpack_latent_rows(torch.zeros(2, 576), "bf16")
    with pytest.raises(ValueError, match=_named("d_qk")):
        unpack_latent_rows(torch.zeros(2, 528, dtype=torch.uint8), "fp8_ds_mla_nope", 576)
