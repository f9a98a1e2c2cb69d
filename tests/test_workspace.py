"""Workspace manager (SPEC 6): regions per consumer, phases aliasing, 256-byte alignment, lock, report."""
import pytest
import torch

from dsattn.memory.workspace import ALIGN, Workspace, WorkspaceLockedError, specs_nbytes


def _offset(ws, t):
    return t.data_ptr() - ws._buffer.data_ptr()


def test_views_are_aligned_and_shaped():
    ws = Workspace("cpu")
    specs = {"a": ((3, 5), torch.float32), "b": ((7,), torch.int32), "c": ((2, 3, 4), torch.bfloat16)}
    ws.reserve("x", specs)
    v = ws.views("x", specs)
    for name, (shape, dtype) in specs.items():
        assert v[name].shape == shape and v[name].dtype == dtype and v[name].is_contiguous()
        assert _offset(ws, v[name]) % ALIGN == 0
    # buffers of one consumer never overlap
    spans = sorted((_offset(ws, t), _offset(ws, t) + t.numel() * t.element_size()) for t in v.values())
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert ws.nbytes == specs_nbytes(specs) == 3 * ALIGN


def test_phases_alias_and_step_consumers_do_not():
    ws = Workspace("cpu")
    ws.reserve("meta", {"m": ((100,), torch.int32)})                      # step-long
    ws.reserve("idx.logits", {"l": ((1000,), torch.float32)}, phase="indexer")
    ws.reserve("idx.scratch", {"s": ((10,), torch.int32)}, phase="indexer")
    ws.reserve("attn.lse", {"l": ((300,), torch.float32)}, phase="attention")
    meta = ws.view("meta", (100,), torch.int32)
    logits = ws.view("idx.logits", (1000,), torch.float32)
    scratch = ws.view("idx.scratch", (10,), torch.int32)
    lse = ws.view("attn.lse", (300,), torch.float32)
    assert _offset(ws, meta) == 0
    assert _offset(ws, logits) == _offset(ws, lse) == 512        # phases start after step-long consumers
    assert _offset(ws, scratch) == 512 + 4096                     # same phase: one after the other
    assert ws.nbytes == 512 + 4096 + 256                          # max over phases
    meta.fill_(7)
    lse.fill_(1.0)
    logits.fill_(2.0)                                             # overwrites lse, never meta
    assert (meta == 7).all() and (lse == 2.0).all()


def test_region_is_the_largest_declaration_and_views_may_be_smaller():
    ws = Workspace("cpu")
    ws.reserve("c", {"a": ((10, 10), torch.float32)}, phase="p")
    ws.reserve("c", {"a": ((4, 4), torch.float32)}, phase="p")
    assert ws.nbytes == 512
    ws.lock()
    v = ws.views("c", {"a": ((3, 7), torch.float32), "b": ((5,), torch.int32)})  # 2 x 256 bytes: fits
    assert v["a"].shape == (3, 7) and v["b"].shape == (5,)


def test_locked_workspace_names_the_consumer_and_bytes():
    ws = Workspace("cpu")
    ws.reserve("indexer.chunk", {"logits": ((64, 64), torch.float32)}, phase="indexer")
    ws.lock()
    with pytest.raises(WorkspaceLockedError, match=r"'indexer.chunk' needs 32768 bytes but 16384") as e:
        ws.views("indexer.chunk", {"logits": ((64, 128), torch.float32)})
    assert isinstance(e.value, RuntimeError)
    assert (e.value.consumer, e.value.requested, e.value.reserved) == ("indexer.chunk", 32768, 16384)
    with pytest.raises(WorkspaceLockedError, match="'new'"):
        ws.reserve("new", {"x": ((1,), torch.int32)})
    with pytest.raises(WorkspaceLockedError):
        ws.reserve_bytes("indexer.chunk", 16385, phase="indexer")
    ws.reserve_bytes("indexer.chunk", 16384, phase="indexer")    # no growth: fine


def test_only_reserve_grows():
    ws = Workspace("cpu")
    ws.reserve("a", {"x": ((8,), torch.float32)})
    first = ws.view("a", (8,), torch.float32)
    with pytest.raises(ValueError, match="'a' needs 4096 bytes but 256 are reserved for it; reserve"):
        ws.view("a", (1000,), torch.float32)  # a view never reallocates (step-long data would be lost)
    ws.reserve("a", {"x": ((1000,), torch.float32)})
    bigger = ws.view("a", (1000,), torch.float32)
    assert ws.nbytes == specs_nbytes({"x": ((1000,), torch.float32)}) and bigger.shape == (1000,)
    assert bigger.untyped_storage().data_ptr() != first.untyped_storage().data_ptr()  # `first` is stale


def test_errors():
    ws = Workspace("cpu")
    with pytest.raises(ValueError, match="'nobody' needs 256 bytes but 0 are reserved"):
        ws.view("nobody", (1,), torch.int32)
    ws.reserve("a", {"x": ((1,), torch.int32)}, phase="p")
    with pytest.raises(ValueError, match="phase"):
        ws.reserve("a", {"x": ((1,), torch.int32)}, phase="q")
    with pytest.raises(ValueError, match="shape"):
        ws.reserve("b", {"x": ((-1,), torch.int32)})


def test_report_lists_bytes_per_consumer():
    ws = Workspace("cpu")
    ws.reserve("meta", {"m": ((10,), torch.int32)})
    ws.reserve("logits", {"l": ((1000,), torch.float32)}, phase="indexer")
    rows = {r["consumer"]: r for r in ws.report()}
    assert rows["meta"]["bytes"] == 256 and rows["meta"]["phase"] == "step"
    assert rows["logits"]["bytes"] == 4096 and rows["logits"]["phase"] == "indexer"
    assert rows["logits"]["offset"] == 256
    text = ws.format_report()
    assert "logits" in text and "total" in text
    assert ws.nbytes == 256 + 4096


def test_zero_sized_views():
    ws = Workspace("cpu")
    ws.reserve("z", {"a": ((0, 128), torch.float8_e4m3fn), "b": ((0,), torch.float32)})
    v = ws.views("z", {"a": ((0, 128), torch.float8_e4m3fn), "b": ((0,), torch.float32)})
    assert v["a"].shape == (0, 128) and v["b"].numel() == 0


def test_views_are_reused_until_the_buffer_moves():
    """The same (consumer, specs) gets the same views back while the buffer stays (the layers of a step ask for the
    same ones); the dict is the caller's own; a reservation that grows the buffer gives views of the new buffer."""
    ws = Workspace("cpu")
    specs = {"a": ((4, 8), torch.float32), "b": ((16,), torch.int32)}
    ws.reserve("x", specs)
    v1 = ws.views("x", specs)
    v1["c"] = None                                    # the caller's dict: the next call does not see it
    v2 = ws.views("x", dict(specs))
    assert v2.keys() == {"a", "b"} and v2["a"] is v1["a"] and v2["b"] is v1["b"]
    assert ws.views("x", {"a": ((2, 8), torch.float32)})["a"].shape == (2, 8)   # other specs: their own views
    ws.reserve("y", {"big": ((1 << 16,), torch.uint8)})   # the buffer is laid out again and reallocated
    v3 = ws.views("x", specs)
    new = ws._buffer.untyped_storage().data_ptr()
    assert v3["a"] is not v1["a"] and v3["a"].untyped_storage().data_ptr() == new
    assert v1["a"].untyped_storage().data_ptr() != new   # (the old buffer, alive while v1 holds it)
    ws.lock()
    assert ws.views("x", specs)["b"] is v3["b"]
    with pytest.raises(WorkspaceLockedError):
        ws.views("x", {"a": ((100, 100), torch.float32)})
