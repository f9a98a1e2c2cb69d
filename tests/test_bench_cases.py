"""The sparse MLA benchmark's decode cases (dsattn.bench.kernels_mla.decode_case), on the CPU at tiny sizes; and
bench.common.call_spans (a call's span from GPU events)."""
from __future__ import annotations

import pytest
import torch

from dsattn.bench import kernels_mla as km


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(km, "DECODE_SLOTS", 256)
    monkeypatch.setattr(km, "DECODE_BLOCK", 16)
    monkeypatch.setattr(km, "TOPK", 64)
    monkeypatch.setattr(km, "_CACHE", {})
    return torch.device("cpu")


@pytest.mark.parametrize("layout", ["fp8_ds_mla", "fp8_ds_mla_nope"])
def test_decode_own_context(tiny, layout):
    tokens, context = 5, 128
    case = km.decode_case(tokens, 8, layout, tiny, context=context)
    pool = km.decode_case(tokens, 8, layout, tiny)  # the shared pool the big cache repeats
    idx = case.indices.long()
    assert idx.shape == (tokens, 64) and case.indices.dtype == torch.int32
    owner = torch.arange(tokens)[:, None]
    assert bool(((idx >= owner * context) & (idx < (owner + 1) * context)).all())
    assert torch.unique(idx).numel() == idx.numel()  # no row gathered twice in a call
    assert case.kv.shape[0] * case.kv.shape[1] == tokens * context and case.kv.shape[1:] == pool.kv.shape[1:]
    flat, base = case.kv.flatten(0, 1), pool.kv.flatten(0, 1)
    slots = torch.arange(tokens * context)
    assert torch.equal(flat, base[slots % base.shape[0]])
    assert case.dist == f"uniform, own {context} slots a request" and pool.dist == "uniform"
    assert case.valid == tokens * 64


def test_decode_shared_pool_unchanged(tiny):
    case = km.decode_case(4, 8, "fp8_ds_mla", tiny)
    assert case.kv.shape[0] * case.kv.shape[1] == 256
    assert bool(((case.indices >= 0) & (case.indices < 256)).all())
    assert all(torch.unique(r).numel() == 64 for r in case.indices)


@pytest.mark.parametrize("context", [32, 100])
def test_decode_context_refused(tiny, context):
    with pytest.raises(ValueError, match="context"):
        km.decode_case(2, 8, "fp8_ds_mla", tiny, context=context)


def test_cli_flag():
    args = km.parse_args(["--cases", "decode", "--decode-context", "16384"])
    assert args.decode_context == 16384
    assert km.parse_args([]).decode_context == 0


@pytest.mark.parametrize("bad", ["100", "-64", "2050"])
def test_cli_flag_refused(bad, capsys):
    with pytest.raises(SystemExit):
        km.parse_args(["--decode-context", bad])
    assert "--decode-context" in capsys.readouterr().err


def test_decode_ascending(tiny):
    rnd = km.decode_case(4, 8, "fp8_ds_mla", tiny, context=128)
    asc = km.decode_case(4, 8, "fp8_ds_mla", tiny, context=128, ascending=True)
    assert torch.equal(asc.indices, rnd.indices.sort(dim=1).values) and not torch.equal(asc.indices, rnd.indices)
    assert asc.dist.endswith(", ascending") and asc.kv is rnd.kv
    assert km.parse_args(["--ascending"]).ascending and not km.parse_args([]).ascending


def test_decode_own_context_one_at_a_time(tiny):
    """Only the newest own-context cache stays in the module's cache; a Case built earlier keeps its own rows."""
    first = km.decode_case(4, 8, "fp8_ds_mla", tiny, context=128)
    assert km.decode_case(4, 16, "fp8_ds_mla", tiny, context=128).kv is first.kv  # same case, other heads: reused
    second = km.decode_case(2, 8, "fp8_ds_mla_nope", tiny, context=128)
    own = [k for k in km._CACHE if k[0] == "decode-kv-own"]
    assert own == [("decode-kv-own", km.KVLayout.FP8_DS_MLA_NOPE, 512, 2, 128)]
    assert first.kv.shape[0] * first.kv.shape[1] == 4 * 128 and second.kv.shape[0] * second.kv.shape[1] == 2 * 128
    again = km.decode_case(4, 8, "fp8_ds_mla", tiny, context=128)  # rebuilt with the same rows
    assert again.kv is not first.kv and torch.equal(again.kv, first.kv)


def test_call_spans_from_gpu_events():
    """bench.common.call_spans: a call's span counts the gap between its kernels once and an overlap once."""
    from dsattn.bench.common import call_spans
    # two calls of two kernels each: call 1 has a 1 us gap, call 2 overlaps its kernels by 2 us
    events = [(0.0, 5.0, "a"), (6.0, 8.0, "b"), (10.0, 15.0, "a"), (13.0, 16.0, "b")]
    span, own = call_spans(events, 2)
    assert span == (8.0 + 6.0) / 2
    assert own == {"a": 5.0, "b": 2.5}
    with pytest.raises(ValueError, match="not a whole number a call"):
        call_spans(events[:3], 2)
    with pytest.raises(ValueError):
        call_spans([], 1)


def test_impl_of_kernel():
    """`--impl gluon_rx` keeps the rows whose kernel is gluon_rxb (bf16 rows at 32-head programs run by gluon_rx,
    session 61): every kernel name launch.kernel_name gives maps to an --impl value parse_args takes."""
    names = ("gluon_prefill", "gluon64", "gluon_ws", "gluon_rx", "gluon_rxb", "gluon", "triton")
    impls = km.parse_args(["--impl", "auto,triton,gluon,gluon_ws,gluon_rx,gluon64,gluon_prefill"]).impl
    assert all(km.IMPL_OF_KERNEL.get(n, n) in impls for n in names)
    assert km.IMPL_OF_KERNEL["gluon_rxb"] == "gluon_rx"
