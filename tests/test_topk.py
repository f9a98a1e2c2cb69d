"""Top-k radix select (ops/topk) under TRITON_INTERPRET=1 against the reference twin, at tiny sizes."""
import os

os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported (see conftest.py)

from dsattn.ops._triton import allow_runtime_loop_bounds  # noqa: E402

allow_runtime_loop_bounds()

import pytest  # noqa: E402
import torch  # noqa: E402

from dsattn.ops.topk import topk, topk_scratch_spec  # noqa: E402
from dsattn.ops.topk.reference import topk_reference  # noqa: E402
from dsattn.ops.topk.select import candidate_capacity, launch_topk  # noqa: E402


def _expected(logits, lengths, k):
    ends = lengths.long().clamp(0, logits.shape[1])
    return topk_reference(logits, torch.zeros_like(ends), ends, k)


def _assert_same_sets(got, want):
    assert got.shape == want.shape
    assert torch.equal(got.sort(dim=1).values, want.sort(dim=1).values)


def _run(logits, lengths, k, **kw):
    t, w = logits.shape
    out = torch.full((t, k), -7, dtype=torch.int32)  # poison: every entry must be written
    cap = kw.get("cap") or candidate_capacity(k)
    scratch = torch.full((t, 2 * cap), -5, dtype=torch.int32)
    launch_topk(logits, lengths, k, out, scratch, **kw)
    assert (out != -7).all()
    return out


@pytest.mark.parametrize("k, w", [(4, 12), (8, 16), (8, 40), (16, 31)])
def test_rows_in_registers(k, w):
    t = 6
    logits = torch.randn(t, w)
    lengths = torch.tensor([0, 1, k - 1, k, min(w, k + 3), w], dtype=torch.int32)
    _assert_same_sets(_run(logits, lengths, k), _expected(logits, lengths, k))


def test_sample_path_and_fallback():
    """Rows longer than the capacity: random rows take the sampled candidates, tie-heavy ones fall back."""
    k, w = 8, 300
    logits = torch.randn(5, w)
    logits[1] = torch.randint(0, 3, (w,)).float()  # few distinct values: the candidate count overflows
    logits[2, 200:] = 5.0  # the best keys sit in one stretch: the sample may miss them
    logits[3] = float("-inf")  # valid -inf logits still rank, lowest columns first
    logits[4, ::2] = float("-inf")
    lengths = torch.tensor([w, w, w, 290, 250], dtype=torch.int32)
    _assert_same_sets(_run(logits, lengths, k, cap=32, sample=16), _expected(logits, lengths, k))


def test_ties_go_to_lower_columns():
    k, w = 4, 64
    logits = torch.zeros(2, w)
    logits[0, [3, 9, 20]] = 1.0  # 3 strict winners, then ties among zeros: columns 0 wins
    lengths = torch.tensor([w, 50], dtype=torch.int32)
    got = _run(logits, lengths, k, cap=16, sample=8)
    assert sorted(got[0].tolist()) == [0, 3, 9, 20]
    assert sorted(got[1].tolist()) == [0, 1, 2, 3]


def test_public_op_strides_and_lengths():
    k = 8
    base = torch.randn(4, 90)
    logits = base[:, 5:75]  # row stride 90, width 70
    lengths = torch.tensor([70, 100, -3, 9], dtype=torch.int32)  # past W reads as W, negative as 0
    out_base = torch.full((4, 20), -9, dtype=torch.int32)
    out = out_base[:, 2:2 + k]
    got = topk(logits, lengths, k, out=out)
    assert got.data_ptr() == out.data_ptr()
    _assert_same_sets(got, _expected(logits, lengths, k))
    assert (out_base[:, :2] == -9).all() and (out_base[:, 2 + k:] == -9).all()


def test_scratch_spec_and_rejects():
    assert topk_scratch_spec(7, 100, 2048) == [((7, 0), torch.int32)]
    assert topk_scratch_spec(7, 65536, 2048) == [((7, 8192), torch.int32)]
    x = torch.randn(3, 10)
    n = torch.full((3,), 10, dtype=torch.int32)
    with pytest.raises(ValueError, match="logits must have dtype"):
        topk(x.double(), n, 4)
    with pytest.raises(ValueError, match="lengths must have dtype"):
        topk(x, n.long(), 4)
    with pytest.raises(ValueError, match="k must be"):
        topk(x, n, 0)
    with pytest.raises(ValueError, match="out must have shape"):
        topk(x, n, 4, out=torch.empty(3, 5, dtype=torch.int32))
    with pytest.raises(ValueError, match="scratch must be at least"):
        topk(torch.randn(3, 100), n, 4, scratch=torch.empty(3, 4, dtype=torch.int32))
