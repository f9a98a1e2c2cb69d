"""Index and scale arguments that a kernel reads at stride 1 are refused when strided (SPEC 7: a non-contiguous
last dimension is bad input), with a ValueError naming the argument, before anything is written. Before session 35
the 1-D ones were accepted and the kernels read the wrong elements (a token written into another token's slot)."""
import pytest
import torch

from dsattn.formats import FP8
from dsattn.ops.cache import write_indexer_cache, write_kv_cache
from dsattn.ops.gather import positions_to_offsets, positions_to_slots
from dsattn.ops.indexer import indexer_logits, indexer_logits_paged, kpool_expand, kpool_update

I32 = torch.int32


def _strided(x):
    """x's values in a tensor of the same shape whose first dimension is 2 elements apart."""
    big = torch.zeros((2 * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype)
    big[::2] = x
    return big[::2]


def _cache_write(arg):
    kv = torch.randn(4, 4, 576).bfloat16()
    slots = torch.tensor([3, 5, 9], dtype=I32)
    return write_kv_cache, dict(latent=torch.randn(3, 576).bfloat16(), kv_cache=kv, slot_mapping=slots), [kv]


def _indexer_cache_write(arg):
    cache = torch.randint(0, 255, (4, 4, 132), dtype=torch.uint8)
    return (write_indexer_cache, dict(k=torch.randn(3, 128), indexer_cache=cache,
                                      slot_mapping=torch.tensor([3, 5, 9], dtype=I32)), [cache])


def _to_slots(arg):
    out = torch.full((2, 3), -7, dtype=I32)
    return (positions_to_slots, dict(positions=torch.tensor([[0, 1, 5], [2, 3, -1]], dtype=I32),
                                     row_req=torch.tensor([1, 0], dtype=I32),
                                     block_table=torch.tensor([[0, 1], [2, 3]], dtype=I32), block_size=4, out=out),
            [out])


def _to_offsets(arg):
    out = torch.full((2, 3), -7, dtype=I32)
    return (positions_to_offsets, dict(positions=torch.tensor([[0, 1, 5], [2, 3, -1]], dtype=I32),
                                       row_base=torch.tensor([100, 200], dtype=I32), out=out), [out])


def _logits(arg):
    out = torch.full((2, 5), -7.0)
    fp8 = arg == "k_scale"
    k = torch.randn(5, 128).to(FP8) if fp8 else torch.randn(5, 128).bfloat16()
    return (indexer_logits, dict(q=torch.randn(2, 2, 128).bfloat16(), weights=torch.randn(2, 2), k=k,
                                 k_scale=torch.rand(5) if fp8 else None, ks=torch.tensor([0, 1], dtype=I32),
                                 ke=torch.tensor([3, 5], dtype=I32), out=out), [out])


def _paged(arg):
    out = torch.full((2, 8), -7.0)
    return (indexer_logits_paged, dict(q=torch.randn(2, 2, 128).bfloat16(), weights=torch.randn(2, 2),
                                       indexer_cache=torch.randint(0, 100, (4, 4, 132), dtype=torch.uint8),
                                       block_table=torch.tensor([[0, 1], [2, 3]], dtype=I32),
                                       row_req=torch.tensor([1, 0], dtype=I32), row_len=torch.tensor([5, 8], dtype=I32),
                                       out=out), [out])


def _kpool_update(arg):
    pooled = torch.randint(0, 255, (4, 2, 132), dtype=torch.uint8)
    tail = torch.randn(2, 3, 256)
    return (kpool_update, dict(k=torch.randn(3, 128), gate=torch.randn(3, 128), ape=torch.randn(4, 128),
                               positions=torch.tensor([1, 2, 3], dtype=I32),
                               token_req=torch.tensor([0, 0, 0], dtype=I32),
                               block_table=torch.tensor([[0, 1], [2, 3]], dtype=I32), pooled_cache=pooled,
                               tail_state=tail, state_slot=torch.tensor([1, 0], dtype=I32)), [pooled, tail])


def _kpool_expand(arg):
    out = torch.full((2, 11), -7, dtype=I32)
    return (kpool_expand, dict(pool_topk=torch.tensor([[0, 1], [2, -1]], dtype=I32),
                               positions=torch.tensor([9, 12], dtype=I32), kpool=4, out=out), [out])


CASES = [
    (_cache_write, "slot_mapping"), (_indexer_cache_write, "slot_mapping"),
    (_to_slots, "row_req"), (_to_offsets, "row_base"),
    (_logits, "ks"), (_logits, "ke"), (_logits, "k_scale"),
    (_paged, "row_req"), (_paged, "row_len"),
    (_kpool_update, "positions"), (_kpool_update, "token_req"), (_kpool_update, "state_slot"),
    (_kpool_expand, "positions"),
]


@pytest.mark.parametrize("make, arg", CASES, ids=[f"{m.__name__[1:]}-{a}" for m, a in CASES])
def test_strided_1d_argument_is_refused(make, arg):
    fn, kwargs, written = make(arg)
    before = [w.clone() for w in written]
    kwargs[arg] = _strided(kwargs[arg])
    with pytest.raises(ValueError, match=f"{arg} must have a contiguous last dimension"):
        fn(**kwargs)
    assert all(torch.equal(w, b) for w, b in zip(written, before))


def test_column_strided_pool_topk_and_row_strided_ape_are_refused():
    fn, kwargs, written = _kpool_expand("pool_topk")
    kwargs["pool_topk"] = torch.zeros(2, 4, dtype=I32)[:, ::2]
    with pytest.raises(ValueError, match="pool_topk must have a contiguous last dimension"):
        fn(**kwargs)
    fn, kwargs, written = _kpool_update("ape")
    before = [w.clone() for w in written]
    kwargs["ape"] = torch.randn(4, 256)[:, :128]  # the kernel reads ape rows 128 apart
    with pytest.raises(ValueError, match="ape must be contiguous"):
        fn(**kwargs)
    assert all(torch.equal(w, b) for w, b in zip(written, before))
