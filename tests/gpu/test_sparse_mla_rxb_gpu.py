"""gluon_rxb.py (the ping-pong keys-on-M kernel over bf16 rows, session 61; DSATTN_SPARSE_MLA_IMPL=gluon_rx takes it
for bf16-row launches of 32-head programs) on the GPU against the reference twin and within rounding of the default
kernels (the grouped gluon_prefill for prefills, gluon_small for bf16 decode). Skipped without an sm_90 GPU.

test_rxb_hang_guard runs first: a tiny launch in a child process with a time limit, so that a deadlocked pipeline
(mbarrier phases) fails one test in seconds instead of hanging the session; the other tests skip after it fails.
"""
import os
import subprocess
import sys

import pytest
import torch

from dsattn.ops.sparse_mla import decode_scratch_spec, sparse_mla_decode, sparse_mla_prefill
from dsattn.ops.sparse_mla.launch import kernel_name
from dsattn.ops.sparse_mla.testing import check_close, make_case, poisoned_outputs, widen_latents

pytestmark = pytest.mark.gpu
DEV = "cuda"
_STATE = {}


def _is_sm90():
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


@pytest.fixture(autouse=True)
def rxb(request, monkeypatch):
    if not _is_sm90():
        pytest.skip("the Gluon kernels run on sm_90 only")
    if request.node.originalname != "test_rxb_hang_guard" and _STATE.get("guard"):
        pytest.skip(f"test_rxb_hang_guard failed: {_STATE['guard']}")
    monkeypatch.setenv("DSATTN_SPARSE_MLA_IMPL", "gluon_rx")


_CHILD = r"""
import os, torch
os.environ["DSATTN_SPARSE_MLA_IMPL"] = "gluon_rx"
from dsattn.ops.sparse_mla import sparse_mla_prefill
from dsattn.ops.sparse_mla.launch import kernel_name
from dsattn.ops.sparse_mla.testing import check_close, make_case, poisoned_outputs
for topk in (200, 64, 1):  # a partial last block and one empty row; one block (consumer 1 idle); one entry
    case = make_case(3, 32, 576, num_slots=3000, topk=topk, layout="bf16", block_size=1, with_length=True,
                     empty_rows=1, seed=1, device="cuda")
    assert kernel_name(case.q, case.flat, case.layout, "native", prefill=True) == "gluon_rxb"
    out, lse = poisoned_outputs(3, 32, "cuda")
    sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, topk_length=case.topk_length, out=out, lse=lse,
                       variant="native")
    torch.cuda.synchronize()
    print(topk, check_close(out, lse, *case.reference()))
"""


def test_rxb_hang_guard():
    """Tiny launches (3 tokens, 32 heads, topk 200 / 64 / 1, topk_length, one empty row) in a child process, 60 s."""
    env = dict(os.environ, DSATTN_SPARSE_MLA_IMPL="gluon_rx")
    try:
        res = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        _STATE["guard"] = "the tiny launch did not finish in 60 s (pipeline deadlock?)"
        pytest.fail(_STATE["guard"])
    if res.returncode:
        _STATE["guard"] = "the tiny launch failed: " + (res.stderr or res.stdout)[-1500:]
        pytest.fail(_STATE["guard"])
    print(res.stdout)


def _prefill(case, out_row_pad=0):
    t, h, _ = case.q.shape
    out, lse = poisoned_outputs(t, h, DEV, out_row_pad)
    sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, topk_length=case.topk_length, out=out,
                       lse=lse, variant="native")
    return out, lse


def _decode(case, scratch=None):
    t, h, _ = case.q.shape
    out, lse = poisoned_outputs(t, h, DEV)
    sparse_mla_decode(case.q, case.cache, case.indices, case.sm_scale, topk_length=case.topk_length, out=out,
                      lse=lse, variant="native", scratch=scratch)
    return out, lse


def _vs_default(case, got, monkeypatch, label, run):
    """got within rounding of what the default kernels give on the same inputs (same operand values but for V's
    conversion, which the default prefill rounds twice below 2^-14; another accumulation order)."""
    monkeypatch.delenv("DSATTN_SPARSE_MLA_IMPL")
    ref = run(case)
    monkeypatch.setenv("DSATTN_SPARSE_MLA_IMPL", "gluon_rx")
    diff = (got[0].float() - ref[0].float()).abs().max().item()
    ldiff = ((got[1] - ref[1]).abs() / ref[1].abs().clamp_min(1)).nan_to_num(0, 0, 0).max().item()
    print(f"gluon_rxb vs default {label}: max |out diff| {diff:.3g}, lse rel {ldiff:.3g}")
    assert diff <= 1e-2 and ldiff <= 1e-6, (diff, ldiff)


@pytest.mark.parametrize("d_qk", [576, 512])
@pytest.mark.parametrize("h", [17, 24, 32])
def test_rxb_prefill(monkeypatch, d_qk, h):
    """Prefill, topk 2048 over 20000 slots: topk_length (cut-off entries point at NaN rows), invalid entries (-1,
    past the cache: NaN rows, huge), an empty row, padded output rows; against the reference and the default."""
    case = make_case(40, h, d_qk, num_slots=20000, topk=2048, layout="bf16", block_size=1, with_length=True,
                     empty_rows=1, seed=h + d_qk, device=DEV)
    assert kernel_name(case.q, case.flat, case.layout, "native", prefill=True) == "gluon_rxb"
    got = _prefill(case, out_row_pad=16)
    print(check_close(*got, *case.reference()))
    _vs_default(case, got, monkeypatch, f"prefill h={h} d={d_qk}", _prefill)


def test_rxb_prefill_peaked():
    """q x 6 (a peaked softmax, where bf16 P alone misses the tolerance: notes/sparse_mla.md, Numerics)."""
    case = make_case(24, 32, 576, num_slots=8000, topk=2048, layout="bf16", block_size=1, seed=5, device=DEV)
    case.q = (case.q.float() * 6).to(torch.bfloat16)
    print(check_close(*_prefill(case), *case.reference()))


@pytest.mark.parametrize("topk", [1, 63, 64, 65, 100, 127, 128, 2048 + 64])
def test_rxb_odd_topk(topk):
    """Lists of one entry, within one block (consumer 1 takes none), around block edges, an odd block count."""
    case = make_case(10, 32, 576, num_slots=9000, topk=topk, layout="bf16", block_size=1, with_length=True,
                     seed=topk, device=DEV)
    check_close(*_prefill(case), *case.reference())


def test_rxb_repeated_slots_and_no_valid_rows():
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 64, (8, 2048), generator=g, dtype=torch.int32)  # many repeats
    case = make_case(8, 32, 576, num_slots=64, topk=2048, layout="bf16", block_size=1, indices=idx, empty_rows=2,
                     device=DEV)
    out, lse = _prefill(case)
    check_close(out, lse, *case.reference())
    assert (out[:2] == 0).all() and torch.isneginf(lse[:2]).all()


@pytest.mark.parametrize("block_size", [1, 16, 64, 128])
def test_rxb_decode_page_sizes(monkeypatch, block_size):
    """bf16-cache decode (paged) through the same kernel, page sizes 1 / 16 / 64 / 128, against the reference and
    the default (gluon_small)."""
    case = make_case(48, 32, 576, num_slots=12000, topk=2048, layout="bf16", block_size=block_size,
                     with_length=True, empty_rows=1, seed=block_size, device=DEV)
    got = _decode(case)
    check_close(*got, *case.reference())
    _vs_default(case, got, monkeypatch, f"decode page {block_size}", _decode)


def test_rxb_decode_split_k():
    """A short decode (4 tokens) splits each list across programs: split partials into NaN-poisoned scratch, then
    the combine."""
    case = make_case(4, 32, 576, num_slots=12000, topk=2048, layout="bf16", block_size=64, with_length=True,
                     seed=9, device=DEV)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    spec = decode_scratch_spec(4, 32, 2048, "native", case.layout, sms)
    scratch = [torch.full(s, float("nan"), dtype=dt, device=DEV) for s, dt in spec]
    assert scratch and scratch[0].shape[1] > 1, spec  # it does split
    check_close(*_decode(case, scratch), *case.reference())


def test_rxb_large_latents():
    """V by _bf16_to_f16_scaled: latent values past fp16's range (eight channels up to ~4e5, positive; q's part of
    them +-2^-14, so the softmax is not one-hot) stay finite and match the reference."""
    case = make_case(24, 32, 576, num_slots=6000, topk=2048, layout="bf16", block_size=1, with_length=True,
                     empty_rows=1, seed=3, device=DEV)
    widen_latents(case, seed=3)
    print(check_close(*_prefill(case), *case.reference()))
