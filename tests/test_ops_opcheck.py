"""torch.library.opcheck on every dsattn custom op (the 15 `dsattn::` ops that torch.compile and CUDA-graph capture see):
the schema (every tensor the op writes is declared in mutates_args, nothing else is written, no output aliases an
input), the fake implementation against the real one (FakeTensor mode), and AOT dispatch (what torch.compile's
aot_eager path runs); and, by bytes (fp8 tensors included, which the schema check cannot compare on the CPU), that every
tensor argument an op changes is declared written. A wrong mutates_args declaration would let a compiled graph
reorder or drop a cache write; dropping one declaration (kpool_update's tail_state, gather_indexer_keys' out_k) fails
this file.

Each op is called with the arguments its public function passes it, captured from one valid call of that function
(tests/test_public_op_args.py's makers: small random CPU inputs, every optional tensor given). The reference path runs
(TRITON_INTERPRET=0): the declarations are the same on the GPU.
"""
from __future__ import annotations

import importlib

import pytest
import torch
from torch.library import opcheck

import test_public_op_args as valid

MAKERS = {
    "sparse_mla_prefill": valid._prefill, "sparse_mla_decode": valid._decode,
    "indexer_logits-fp8": valid._logits_fp8, "indexer_logits-bf16": valid._logits_bf16,
    "indexer_logits_paged": valid._paged, "kpool_update": valid._kpool_update, "kpool_expand": valid._kpool_expand,
    "topk": valid._topk, "write_kv_cache-fp8": valid._write_kv_fp8, "write_kv_cache-bf16": valid._write_kv_bf16,
    "write_indexer_cache": valid._write_indexer, "write_kv_and_indexer_cache": valid._write_both,
    "positions_to_slots": valid._to_slots, "positions_to_offsets": valid._to_offsets,
    "gather_indexer_keys": valid._gather_keys, "gather_latent": valid._gather_latent,
    "gather_slots": valid._gather_slots,
}
PACKAGES = ("topk", "indexer", "cache", "sparse_mla", "gather")
# opcheck's checks; test_autograd_registration is left out: the ops have no autograd formula (inference ops) and
# take no tensor that requires grad
UTILS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


@pytest.fixture(autouse=True)
def _reference_path(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")


def _captured_op_calls(make, monkeypatch):
    """[(op name, positional args)] of the custom ops the public function calls (its op_or_body calls)."""
    calls = []
    for pkg in PACKAGES:
        mod = importlib.import_module(f"dsattn.ops.{pkg}")
        # copies taken before the body runs: an op run again on its own outputs may write the values they hold
        monkeypatch.setattr(mod, "op_or_body", lambda name, body: lambda *args: calls.append(
            (name, tuple(_fresh(a) for a in args))) or body(*args))
    fn, kwargs, _ = make()
    fn(**kwargs)
    return calls


def _fresh(x):
    """A copy of an argument (tensors cloned, the rest as is)."""
    return x.clone() if isinstance(x, torch.Tensor) else x


def test_every_custom_op_is_covered(monkeypatch):
    ops = {name for m in MAKERS.values() for name, _ in _captured_op_calls(m, monkeypatch)}
    registered = {name for name in dir(torch.ops.dsattn) if not name.startswith("_")
                  and isinstance(getattr(torch.ops.dsattn, name), torch._ops.OpOverloadPacket)}
    assert ops == registered, f"not exercised: {sorted(registered - ops)}"


@pytest.mark.parametrize("case", list(MAKERS))
def test_opcheck(case, monkeypatch):
    calls = _captured_op_calls(MAKERS[case], monkeypatch)
    assert calls, f"{case}: no custom op called"
    for name, args in calls:
        utils = UTILS
        if any(isinstance(a, torch.Tensor) and a.dtype in FP8_DTYPES for a in args):
            # SchemaCheckMode compares fp8 tensors with ops the CPU lacks for them ("mul_cpu_reduced_float" not
            # implemented for 'Float8_e4m3fn', torch 2.13); the fake and AOT checks still run
            utils = tuple(u for u in UTILS if u != "test_schema")
        op = getattr(torch.ops.dsattn, name)
        opcheck(op, args, test_utils=utils)
        _writes_only_declared(op, args)


def _bytes(x):
    return x.detach().reshape(-1).view(torch.uint8).clone()


def _writes_only_declared(op, args):
    """test_schema's core by bytes (so fp8 tensors too): every tensor argument the op changes is declared written."""
    schema = op.default._schema
    args = tuple(_fresh(a) for a in args)
    before = [_bytes(a) if isinstance(a, torch.Tensor) else None for a in args]
    op(*args)
    for arg, a, b in zip(schema.arguments, args, before):
        if b is not None and not torch.equal(_bytes(a), b):
            assert arg.alias_info is not None and arg.alias_info.is_write, \
                f"{schema.name}: {arg.name} written but not declared in mutates_args"
