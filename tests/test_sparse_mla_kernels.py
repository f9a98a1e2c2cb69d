"""Sparse MLA Triton kernels under TRITON_INTERPRET=1 against the reference twin, at tiny sizes.

Random inputs, outputs poisoned with NaN, invalid entries pointing at NaN rows (SPEC 3 edge cases:
-1, past the cache, huge, topk_length cuts, rows with no valid entry, repeated slots), every head-count
class under every variant, D_qk 576 / 512, the three cache layouts, page sizes 1 / 16 / 64 / 128,
strided outputs, padded cache rows and the split-K path (decode, and a short prefill's split_scratch). tests/gpu/test_sparse_mla_gpu.py runs the
same at real sizes.
"""

import dataclasses

import pytest
import torch

pytest.importorskip("triton")
pytestmark = pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)

from dsattn.ops.sparse_mla import decode_scratch_spec, sparse_mla_decode, sparse_mla_prefill
from dsattn.ops.sparse_mla.testing import check_close, make_case, poisoned_outputs

# One head count per dispatch class: tiny, 8, the 16 boundary, odd between 16 and 32, 32, padded
# 33..63, one block, a partial second block, two blocks.
HEADS = [1, 8, 16, 20, 32, 40, 64, 100, 128]


def _run_prefill(case, variant, out_row_pad=0):
    t, h, _ = case.q.shape
    out, lse = poisoned_outputs(t, h, out_row_pad=out_row_pad)
    res = sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, topk_length=case.topk_length,
                             out=out, lse=lse, variant=variant)
    assert res[0] is out and res[1] is lse
    return out, lse


def _run_decode(case, variant, scratch=None, out_row_pad=0):
    t, h, _ = case.q.shape
    out, lse = poisoned_outputs(t, h, out_row_pad=out_row_pad)
    sparse_mla_decode(case.q, case.cache, case.indices, case.sm_scale, topk_length=case.topk_length, out=out,
                      lse=lse, variant=variant, scratch=scratch)
    return out, lse


@pytest.mark.parametrize("h", HEADS)
@pytest.mark.parametrize("d_qk", [576, 512])
def test_prefill_every_head_count(h, d_qk):
    case = make_case(3, h, d_qk, num_slots=80, topk=40, layout="bf16", block_size=1, with_length=True,
                     seed=h * 7 + d_qk)
    ref = case.reference()
    for variant in ("native", "pad64") if h <= 32 else (None,):
        check_close(*_run_prefill(case, variant, out_row_pad=8), *ref)


@pytest.mark.parametrize("h", [1, 8, 20, 64, 100])
@pytest.mark.parametrize("splits", [2, 3])
def test_prefill_splits(h, splits):
    """A split prefill (split_scratch of `splits` parts, poisoned: the combine reads every partial, so an unwritten
    one shows as NaN): topk_length with an empty row (every part empty: out 0, lse -inf), NaN rows behind invalid
    entries, every variant. 40 keys in 16-entry blocks: with 3 splits the last part is short."""
    case = make_case(3, h, 576, num_slots=80, topk=40, layout="bf16", block_size=1, with_length=True, empty_rows=1,
                     seed=h * 5 + splits)
    ref = case.reference()
    for variant in ("native", "pad64") if h <= 32 else (None,):
        part = [torch.full((3, splits, h, 512), float("nan")), torch.full((3, splits, h), float("nan"))]
        out, lse = poisoned_outputs(3, h, out_row_pad=8)
        sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, topk_length=case.topk_length, out=out,
                           lse=lse, variant=variant, split_scratch=part)
        check_close(out, lse, *ref)


@pytest.mark.parametrize("layout, d_qk", [("bf16", 576), ("bf16", 512), ("fp8_ds_mla", 576), ("fp8_ds_mla", 512),
                                          ("fp8_ds_mla_nope", 512)])
@pytest.mark.parametrize("h", [8, 32, 64])
def test_decode_layouts(layout, d_qk, h):
    case = make_case(4, h, d_qk, num_slots=100, topk=48, layout=layout, block_size=16, with_length=True,
                     empty_rows=1, seed=h + d_qk)
    ref = case.reference()
    for variant in ("native", "pad64") if h <= 32 else ("native",):
        check_close(*_run_decode(case, variant), *ref)


@pytest.mark.parametrize("block_size", [1, 16, 64, 128])
def test_decode_page_sizes(block_size):
    # 200 slots: no page size here divides it, so the last block is partly unused.
    case = make_case(2, 16, 576, num_slots=200, topk=32, layout="fp8_ds_mla", block_size=block_size, seed=block_size)
    check_close(*_run_decode(case, "native"), *case.reference())


@pytest.mark.parametrize("h", [1, 20, 128])
def test_decode_every_head_count_fp8(h):
    case = make_case(2, h, 576, num_slots=64, topk=32, layout="fp8_ds_mla", seed=h)
    ref = case.reference()
    for variant in ("native", "pad64") if h <= 32 else (None,):
        check_close(*_run_decode(case, variant, out_row_pad=64), *ref)


@pytest.mark.parametrize("h, variant", [(8, "native"), (64, "native")])
def test_decode_split_k(h, variant):
    """Few tokens: the plan splits the top-k list across programs and merges them through the scratch."""
    case = make_case(2, h, 576, num_slots=300, topk=640, layout="fp8_ds_mla", with_length=True, seed=3)
    spec = decode_scratch_spec(2, h, 640, variant, "fp8_ds_mla")
    assert spec, "the plan should split 2 tokens"
    scratch = [torch.full(shape, float("nan"), dtype=dt) for shape, dt in spec]
    check_close(*_run_decode(case, variant, scratch=scratch), *case.reference())


def test_repeated_slots_count_twice():
    idx = torch.tensor([[5, 5, 5, 9, -1, 9, 3, 3, 3, 3, 200, 7, 7, 7, 7, 7]], dtype=torch.int32)
    case = make_case(1, 8, 576, num_slots=32, topk=16, layout="bf16", block_size=1, indices=idx)
    check_close(*_run_prefill(case, "native"), *case.reference())


def test_no_valid_entry_gives_zero_and_neg_inf():
    case = make_case(2, 16, 512, num_slots=32, topk=16, layout="fp8_ds_mla_nope", empty_rows=2)
    out, lse = _run_decode(case, "native")
    assert (out == 0).all() and torch.isneginf(lse).all()


@pytest.mark.parametrize("layout, d_qk", [("bf16", 576), ("fp8_ds_mla", 576), ("fp8_ds_mla_nope", 512)])
def test_padded_cache_rows(layout, d_qk):
    """A cache whose rows sit in wider (16-byte aligned) slots: read through its strides, never copied."""
    case = make_case(3, 8, d_qk, num_slots=64, topk=32, layout=layout, with_length=True, seed=11)
    nb, bs, row = case.cache.shape
    pad = 16 // case.cache.element_size()
    buf = torch.full((nb, bs, row + pad), float("nan"), dtype=case.cache.dtype) if layout == "bf16" else \
        torch.full((nb, bs, row + pad), 0xFF, dtype=torch.uint8)
    buf[..., :row] = case.cache
    ref = case.reference()
    check_close(*_run_decode(dataclasses.replace(case, cache=buf[..., :row]), "native"), *ref)
    if layout == "bf16":
        check_close(*_run_prefill(dataclasses.replace(case, cache=buf[..., :row]), "native"), *ref)


def test_widen_latents():
    """testing.widen_latents (the GPU tests' latents past fp16's range): the channels hold positive values over 65504
    in every row, q's part of them is +-2^-14, the rest of the case is untouched and the reference stays finite."""
    from dsattn.ops.sparse_mla.testing import widen_latents
    case = make_case(4, 8, 576, num_slots=64, topk=32, layout="bf16", block_size=16, seed=2)
    before_q, before_kv = case.q.clone(), case.flat.clone()
    widen_latents(case, seed=1)
    w = case.flat[:64, 100:108].float()
    assert (w >= 0).all() and w.max() > 65504
    assert set(case.q[..., 100:108].float().abs().unique().tolist()) == {2.0 ** -14}
    assert torch.equal(case.flat[:, :100], before_kv[:, :100]) and torch.equal(case.q[..., :100], before_q[..., :100])
    out, lse = case.reference()
    assert torch.isfinite(out).all() and not torch.isnan(lse).any()
