"""DSAAttention end to end on the CPU with the reference ops (SPEC 6, 7): mixed batches of decodes and
prefill chunks over the three paths against the reference stack run request by request, shared
layers, chunked indexer and gathered context, the policy following a table, batch / argument
rejection before anything is written, the locked workspace, workspace reserved per path, micro-batch slots.

tests/test_backend_interpreted.py runs the same steps with the Triton kernels under the interpreter;
tests/gpu/test_backend_gpu.py at real sizes with allocation counters.
"""

import dataclasses

import pytest
import torch
from _backend_helpers import import_all_ops

from dsattn.backend import attention as attention_mod
from dsattn.backend.attention import DECODE_SCRATCH, GATHERED, INDICES, PREFILL_SPLIT, DSAAttention
from dsattn.backend.indexer import CHUNK
from dsattn.backend.metadata import Request, RequestBatch
from dsattn.backend.policy import Path
from dsattn.backend.synthetic import indices_as_slots, make_step, reference_step
from dsattn.config import preset
from dsattn.memory.workspace import WorkspaceLockedError
from dsattn.ops.cache.reference import write_kv_cache_reference
from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference

import_all_ops()  # at collection, before the reference_ops fixture below switches the ops to their twins

BS = 16
# decodes first (one with no context), then prefill chunks with and without cached context;
# contexts are not multiples of the block size
SPANS = [(37, 1), (5, 1), (0, 1), (40, 7), (0, 23), (17, 9)]


@pytest.fixture(autouse=True)
def reference_ops(monkeypatch):
    """The public ops run their reference twins here, whatever other test modules set."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")


def geometry(name, heads, topk=16, **kw):
    return preset(name).scaled(index_topk=topk, index_n_heads=4, num_heads=heads, **kw)


def backend(geo, layout, heads, **kw):
    args = dict(kv_layout=layout, block_size=BS, max_num_tokens=64, max_num_reqs=8, max_model_len=128)
    args.update(kw)
    return DSAAttention(geo, tp=geo.num_heads // heads, **args)


def assert_same_sets(a, b):
    assert torch.equal(a.sort(dim=1).values, b.sort(dim=1).values)


def run_and_check(attn, s, ref, layer=0, atol=2e-2, batch=False):
    step = attn.prepare(RequestBatch.from_requests(s.requests) if batch else s.requests)
    out = torch.full((step.host.num_tokens, attn.heads, 512), float("nan"), dtype=torch.bfloat16)
    res = attn.forward(step, s.q, s.latent, s.kv_cache, s.indexer, layer=layer, out=out)
    assert res is out
    torch.testing.assert_close(out.float(), ref.out, atol=atol, rtol=2e-2)
    indices = attn.workspace.view(INDICES, (step.host.num_tokens, attn.width), torch.int32)
    assert_same_sets(indices_as_slots(attn, step, indices), ref.slots)
    # the step wrote its rows exactly as the reference writes do
    assert torch.equal(s.kv_cache.view(torch.uint8), ref.step.kv_cache.view(torch.uint8))
    assert torch.equal(s.indexer.cache, ref.step.indexer.cache)
    return step, out


CASES = [  # preset, cache layout, heads per rank, expected path
    ("glm-5", "bf16", 8, Path.BF16_PREFILL),
    ("deepseek-v3.2", "bf16", 128, Path.BF16_PREFILL),
    ("glm-5", "fp8_ds_mla", 8, Path.FP8_MIXED),
    ("glm-5", "fp8_ds_mla", 16, Path.FP8_MIXED),
    ("glm-5", "fp8_ds_mla", 32, Path.FP8_GATHERED),
    ("deepseek-v3.2", "fp8_ds_mla", 128, Path.FP8_GATHERED),
    ("glm-5.3-flash", "fp8_ds_mla_nope", 8, Path.FP8_MIXED),
    ("glm-5.3-flash", "fp8_ds_mla_nope", 64, Path.FP8_GATHERED),
    ("glm-5.3-flash", "bf16", 16, Path.BF16_PREFILL),
]


@pytest.mark.parametrize("name, layout, heads, path", CASES)
def test_mixed_batch_matches_reference(name, layout, heads, path):
    geo = geometry(name, heads)
    s = make_step(geo, heads, layout, SPANS, block_size=BS)
    attn = backend(geo, layout, heads)
    assert attn.path is path
    run_and_check(attn, s, reference_step(s))


@pytest.mark.parametrize("name, layout, heads", [("glm-5", "fp8_ds_mla", 8), ("glm-5", "fp8_ds_mla", 32),
                                                 ("glm-5.3-flash", "fp8_ds_mla_nope", 8)])
def test_request_batch_step_matches_reference(name, layout, heads):
    """The step prepared from a RequestBatch (the requests as tensors) runs as the list's does."""
    geo = geometry(name, heads)
    s = make_step(geo, heads, layout, SPANS, block_size=BS)
    run_and_check(backend(geo, layout, heads), s, reference_step(s), batch=True)


@pytest.mark.parametrize("name, layout, heads", [("glm-5", "fp8_ds_mla", 32), ("glm-5.3-flash", "fp8_ds_mla_nope", 8)])
def test_small_caps_chunk_the_indexer_and_the_context(name, layout, heads):
    geo = geometry(name, heads)
    s = make_step(geo, heads, layout, SPANS, block_size=BS)
    attn = backend(geo, layout, heads, max_model_len=48)
    most = attn.limits.max_keys
    attn_small = backend(geo, layout, heads, max_model_len=48, gather_cap_tokens=48,
                         indexer_cap_bytes=attn.indexer.chunk_bytes(4, most, most))
    ref = reference_step(s)
    step, _ = run_and_check(attn_small, s, ref)
    # requests split across chunks, and chunks holding several requests' keys
    assert len(step.host.prefill_chunks) > 2 and any(len(c.pieces) > 1 for c in step.host.prefill_chunks)
    if attn.path is Path.FP8_GATHERED:
        assert len(step.host.gather_chunks) == 3
    # the backend with the default caps ran the same step in one chunk each
    s2 = make_step(geo, heads, layout, SPANS, block_size=BS)
    step2, _ = run_and_check(attn, s2, reference_step(s2))
    assert len(step2.host.prefill_chunks) == 1


def test_shared_layer_reuses_the_previous_indices():
    heads = 8
    geo = geometry("glm-5.3-flash", heads, indexer_types=("full", "shared", "full"))
    s0 = make_step(geo, heads, "fp8_ds_mla_nope", SPANS, block_size=BS)
    attn = backend(geo, "fp8_ds_mla_nope", heads)
    ref0 = reference_step(s0)
    step = attn.prepare(s0.requests)
    with pytest.raises(ValueError, match="no full layer ran earlier"):
        attn.forward(step, s0.q, None, s0.kv_cache, None, layer=1)
    attn.forward(step, s0.q, s0.latent, s0.kv_cache, s0.indexer, layer=0)
    # layer 1: its own cache (every slot holds a row, as if written) and queries; no indexer inputs
    kv1 = s0.kv_cache.clone()
    n = kv1.shape[0] * kv1.shape[1]
    write_kv_cache_reference(torch.randn(n, geo.d_qk), kv1, torch.arange(n), "fp8_ds_mla_nope")
    q1 = torch.randn_like(s0.q, dtype=torch.float32).bfloat16()
    with pytest.raises(ValueError, match="indexer must be None on shared layer 1"):
        attn.forward(step, q1, None, kv1, s0.indexer, layer=1)
    out1 = attn.forward(step, q1, None, kv1, None, layer=1)
    want, _ = sparse_mla_paged_reference(q1, kv1, ref0.slots, geo.softmax_scale, "fp8_ds_mla_nope")
    torch.testing.assert_close(out1.float(), want, atol=2e-2, rtol=2e-2)
    with pytest.raises(ValueError, match="indexer must be IndexerInputs"):
        attn.forward(step, q1, None, kv1, None, layer=2)


class _Spy:
    def __init__(self, fn):
        self.fn, self.variants = fn, []

    def __call__(self, *args, **kw):
        self.variants.append(kw["variant"])
        return self.fn(*args, **kw)


def test_policy_follows_the_calibration_table(monkeypatch):
    heads = 8
    geo = geometry("glm-5", heads)
    spy = _Spy(attention_mod.sparse_mla_decode)
    monkeypatch.setattr(attention_mod, "sparse_mla_decode", spy)
    table = {"table": {"decode/fp8_ds_mla": {"8": [{"max_tokens": 41, "variant": "native"},
                                                    {"max_tokens": None, "variant": "pad64"}]}}}
    s = make_step(geo, heads, "fp8_ds_mla", SPANS, block_size=BS)   # 42 tokens
    ref = reference_step(s)
    run_and_check(backend(geo, "fp8_ds_mla", heads, calibration=table), s, ref)
    s = make_step(geo, heads, "fp8_ds_mla", SPANS[:-1], block_size=BS)   # 33 tokens
    run_and_check(backend(geo, "fp8_ds_mla", heads, calibration=table), s, reference_step(s))
    s = make_step(geo, heads, "fp8_ds_mla", SPANS[:-1], block_size=BS)
    run_and_check(backend(geo, "fp8_ds_mla", heads), s, reference_step(s))  # no table: SPEC 7 (<= 132: pad64)
    assert spy.variants == ["pad64", "native", "pad64"]


def test_calibration_from_a_path(tmp_path):
    import json
    import pathlib
    table = {"table": {"decode/fp8_ds_mla": {"8": [{"max_tokens": None, "variant": "native"}]}}}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(table))
    geo = geometry("glm-5", 8)
    for arg in (path, str(path)):
        assert isinstance(arg, (str, pathlib.Path))
        assert backend(geo, "fp8_ds_mla", 8, calibration=arg).table == table
    path.write_text("{}")
    with pytest.raises(ValueError, match="path must be a calibration table"):
        backend(geo, "fp8_ds_mla", 8, calibration=path)


def test_workspace_holds_only_what_the_path_uses():
    def consumers(layout, heads, name="glm-5"):
        return {r["consumer"] for r in backend(geometry(name, heads), layout, heads).workspace.report()}
    assert DECODE_SCRATCH not in consumers("bf16", 8) and GATHERED not in consumers("bf16", 8)
    assert DECODE_SCRATCH in consumers("fp8_ds_mla", 8) and GATHERED not in consumers("fp8_ds_mla", 8)
    assert {DECODE_SCRATCH, GATHERED} <= consumers("fp8_ds_mla", 64)
    assert {"metadata", INDICES, CHUNK, "attention.lse"} <= consumers("bf16", 8)


def _run_locked(attn, geo):
    """A bf16 step (SPANS, 8 heads) through the locked backend, against the reference: the workspace does not grow."""
    attn.lock()
    predicted = attn.workspace_bytes
    s = make_step(geo, 8, "bf16", SPANS, block_size=BS)
    run_and_check(attn, s, reference_step(s))
    assert attn.workspace_bytes == predicted


def test_prefill_split_partials_are_workspace(monkeypatch):
    """A short prefill's split partials (dispatch.prefill_splits; on the bf16 path every step runs the prefill kernel)
    come from the workspace: reserved for the largest call that can split, handed to the op as views, so a locked
    workspace runs such a step without growing. The fp8 mixed path (< 32 heads) runs no prefill kernel."""
    from dsattn.memory.workspace import specs_nbytes
    import dsattn.ops.sparse_mla as sm
    from dsattn.ops.sparse_mla import prefill_split_spec
    geo = geometry("glm-5", 8, topk=1024)
    attn = backend(geo, "bf16", 8)
    sizes = {r["consumer"]: r["bytes"] for r in attn.workspace.report()}
    want = max(specs_nbytes(dict(enumerate(prefill_split_spec(t, 8, 1024, attn._prefill_split(t, decodes)[0]))))
               for t in range(1, 65) for decodes in (False, True))
    assert want > 0 and sizes[PREFILL_SPLIT] >= want
    assert PREFILL_SPLIT not in {r["consumer"] for r in backend(geo, "fp8_ds_mla", 8).workspace.report()}
    assert PREFILL_SPLIT in {r["consumer"] for r in backend(geometry("glm-5", 64, topk=1024), "fp8_ds_mla",
                                                                     64).workspace.report()}
    seen = []
    real = sm.sparse_mla_prefill
    monkeypatch.setattr(attention_mod, "sparse_mla_prefill",
                        lambda *a, **kw: seen.append((a[0].shape[0], kw["variant"], kw["split_scratch"])) or
                        real(*a, **kw))
    _run_locked(attn, geo)
    # the decode rows in a call of their own (policy.bf16_decode_variant), then the prefill chunks' rows
    d = sum(n for _, n in SPANS if n == 1)
    assert [(n, v) for n, v, _ in seen] == [(d, "pad64"), (sum(n for _, n in SPANS) - d, attn._prefill_split(d)[0])]
    for n, v, split in seen:
        want = prefill_split_spec(n, 8, 1024, v)
        assert want and split is not None and tuple(split[0].shape) == want[0][0]


def test_bf16_decodes_together_as_before(monkeypatch):
    """DSAAttention.bf16_decodes_apart False: every row in one call with the calibrated variant (before session 45)."""
    geo = geometry("glm-5", 8)
    attn = backend(geo, "bf16", 8)
    monkeypatch.setattr(attn, "bf16_decodes_apart", False)
    seen = []
    real = attention_mod.sparse_mla_prefill
    monkeypatch.setattr(attention_mod, "sparse_mla_prefill",
                        lambda *a, **kw: seen.append(a[0].shape[0]) or real(*a, **kw))
    s = make_step(geo, 8, "bf16", SPANS, block_size=BS)
    run_and_check(attn, s, reference_step(s))
    assert seen == [sum(n for _, n in SPANS)]


@pytest.mark.parametrize("kernel, variant", [("decode", "pad64"), ("decode:native", "native"),
                                             ("decode:pad64", "pad64")])
def test_bf16_decode_rows_through_the_decode_kernel(kernel, variant, monkeypatch):
    """DSAAttention.bf16_decode_kernel: the bf16 path's decode rows through sparse_mla_decode over the paged cache
    ('decode': the policy's variant, pad64 at 3 tokens by SPEC 7; or the one named), the prefill rows as before; its
    split-K scratch reserved at construction, so the locked workspace runs the step without growing."""
    monkeypatch.setattr(DSAAttention, "bf16_decode_kernel", kernel)
    geo = geometry("glm-5", 8)
    attn = backend(geo, "bf16", 8)
    assert DECODE_SCRATCH in {r["consumer"] for r in attn.workspace.report()}
    seen = []
    for name in ("sparse_mla_prefill", "sparse_mla_decode"):
        real = getattr(attention_mod, name)
        monkeypatch.setattr(attention_mod, name, lambda *a, _n=name, _r=real, **kw:
                            seen.append((_n, a[0].shape[0], kw["variant"], a[1].dim())) or _r(*a, **kw))
    _run_locked(attn, geo)
    d = sum(n for _, n in SPANS if n == 1)
    # the decode call reads the paged cache [blocks, block_size, row]; the prefill call the flat view
    assert seen == [("sparse_mla_decode", d, variant, 3),
                    ("sparse_mla_prefill", sum(n for _, n in SPANS) - d, attn._prefill_split(39)[0], 2)]


def test_bf16_decode_kernel_follows_the_table(monkeypatch):
    """'decode' takes the variant of the calibration table's decode/bf16 entry (dsattn calibrate --kernels
    decode/bf16), SPEC 7's fallback without one."""
    monkeypatch.setattr(DSAAttention, "bf16_decode_kernel", "decode")
    geo = geometry("glm-5", 8)
    table = {"table": {"decode/bf16": {"8": [{"max_tokens": 2, "variant": "pad64"},
                                             {"max_tokens": None, "variant": "native"}]}}}
    attn = backend(geo, "bf16", 8, calibration=table)
    assert [attn._decode_scratch(t)[0] for t in (1, 2, 3, 8)] == ["pad64", "pad64", "native", "native"]
    assert [backend(geo, "bf16", 8)._decode_scratch(t)[0] for t in (3, 200)] == ["pad64", "native"]


def test_bf16_decode_kernel_checked(monkeypatch):
    monkeypatch.setattr(DSAAttention, "bf16_decode_kernel", "decode:pad32")
    with pytest.raises(ValueError, match="bf16_decode_kernel must be one of"):
        backend(geometry("glm-5", 8), "bf16", 8)
    # the default: no decode scratch on the bf16 path
    monkeypatch.setattr(DSAAttention, "bf16_decode_kernel", "prefill")
    assert DECODE_SCRATCH not in {r["consumer"] for r in backend(geometry("glm-5", 8), "bf16", 8).workspace.report()}


def _caches(s):
    return s.kv_cache.clone(), s.indexer.cache.clone()


def _unchanged(s, before):
    return torch.equal(s.kv_cache.view(torch.uint8), before[0].view(torch.uint8)) and \
        torch.equal(s.indexer.cache, before[1])


def test_oversize_batch_is_rejected_before_anything_runs():
    heads = 8
    geo = geometry("glm-5", heads)
    attn = backend(geo, "fp8_ds_mla", heads, max_num_tokens=41)
    s = make_step(geo, heads, "fp8_ds_mla", SPANS, block_size=BS)   # 42 tokens
    before = _caches(s)
    with pytest.raises(ValueError, match="42 scheduled tokens, more than max_num_tokens=41"):
        attn.prepare(s.requests)
    with pytest.raises(ValueError, match="more than max_num_reqs=2"):
        backend(geo, "fp8_ds_mla", heads, max_num_reqs=2).prepare(s.requests)
    with pytest.raises(ValueError, match="more than max_model_len=32"):
        backend(geo, "fp8_ds_mla", heads, max_model_len=32).prepare(s.requests)
    assert _unchanged(s, before)


@pytest.mark.parametrize("what, change, match", [
    ("q", lambda s: s.q.float(), "q must have dtype"),
    ("q", lambda s: s.q[:, :4], r"q must have shape \[42, 8, 576\]"),
    ("latent", lambda s: s.latent[:-1], "latent must have shape"),
    ("kv_cache", lambda s: s.kv_cache[:, :8], "kv_cache must have block_size 16"),
    ("kv_cache", lambda s: s.kv_cache[:2], "kv_cache has 2 blocks but the block tables use block"),
    ("kv_cache", lambda s: torch.zeros(8, 16, 576, dtype=torch.bfloat16), "kv_cache must hold fp8_ds_mla rows"),
    ("indexer.weights", lambda s: s.indexer.weights.double(), "indexer.weights must have dtype"),
    ("indexer.q", lambda s: s.indexer.q[:, :2], "indexer.q must have shape"),
    ("indexer.k", lambda s: s.indexer.k[:3], "indexer.k must have shape"),
    ("indexer.cache", lambda s: s.indexer.cache[:1], "indexer.cache has 1 blocks"),
    ("out", lambda s: torch.empty(42, 8, 512), "out must have dtype"),
])
def test_bad_arguments_are_rejected_before_anything_is_written(what, change, match):
    heads = 8
    geo = geometry("glm-5", heads)
    attn = backend(geo, "fp8_ds_mla", heads)
    s = make_step(geo, heads, "fp8_ds_mla", SPANS, block_size=BS)
    before = _caches(s)
    step = attn.prepare(s.requests)
    args = dict(step=step, q=s.q, latent=s.latent, kv_cache=s.kv_cache, indexer=s.indexer, out=None)
    if what.startswith("indexer."):
        args["indexer"] = dataclasses.replace(s.indexer, **{what.split(".")[1]: change(s)})
    else:
        args[what] = change(s)
    with pytest.raises(ValueError, match=match):
        attn.forward(**args)
    assert _unchanged(s, before)
    other = backend(geo, "fp8_ds_mla", heads)
    with pytest.raises(ValueError, match="step must be the StepMetadata"):
        other.forward(step, s.q, s.latent, s.kv_cache, s.indexer)


def test_padded_bf16_cache_is_rejected_not_copied():
    """The bf16 path reads the cache as one flat view: a padded cache ([blocks, bs + pad, row][:, :bs]),
    which reshape would copy on every layer, is rejected before anything is written."""
    heads = 8
    geo = geometry("glm-5", heads)
    attn = backend(geo, "bf16", heads)
    s = make_step(geo, heads, "bf16", SPANS, block_size=BS)
    padded = torch.randn(s.kv_cache.shape[0], BS + 1, s.kv_cache.shape[2]).bfloat16()[:, :BS]
    padded.copy_(s.kv_cache)
    before = padded.clone()
    with pytest.raises(ValueError, match="kv_cache must hold its blocks back to back"):
        attn.forward(attn.prepare(s.requests), s.q, s.latent, padded, s.indexer)
    assert torch.equal(padded, before)


def test_locked_workspace_raises_the_documented_error():
    heads = 8
    geo = geometry("glm-5", heads)
    attn = backend(geo, "fp8_ds_mla", heads)
    s = make_step(geo, heads, "fp8_ds_mla", SPANS, block_size=BS)
    attn.forward(attn.prepare(s.requests), s.q, s.latent, s.kv_cache, s.indexer)  # warm-up
    predicted = attn.workspace_bytes
    attn.lock()
    # a second backend sharing the locked workspace, for a larger batch, cannot grow it
    with pytest.raises(WorkspaceLockedError, match=r"consumer 'indexer.chunk' needs \d+ bytes but \d+ are reserved"):
        backend(geo, "fp8_ds_mla", heads, max_num_tokens=4096, workspace=attn.workspace)
    with pytest.raises(WorkspaceLockedError, match=f"'{CHUNK}'"):
        attn.workspace.views(CHUNK, attn.indexer.chunk_specs(64, 4096, 0))
    # within the reservation, steps keep running, and the workspace never grew
    s = make_step(geo, heads, "fp8_ds_mla", SPANS[:4], block_size=BS)
    run_and_check(attn, s, reference_step(s))
    assert attn.workspace_bytes == predicted


def test_decode_only_and_prefill_only_steps():
    heads = 32
    geo = geometry("glm-5", heads)
    attn = backend(geo, "fp8_ds_mla", heads)
    for spans in ([(30, 1), (0, 1), (64, 1)], [(0, 30), (20, 5)]):
        s = make_step(geo, heads, "fp8_ds_mla", spans, block_size=BS)
        run_and_check(attn, s, reference_step(s))


@pytest.mark.parametrize("name, layout, heads", [("glm-5", "fp8_ds_mla", 8), ("glm-5", "bf16", 8),
                                                 ("glm-5", "fp8_ds_mla", 32), ("glm-5.3-flash", "fp8_ds_mla_nope", 8),
                                                 ("glm-5.3-flash", "bf16", 16)])
def test_prefix_cache_hit_shares_blocks(name, layout, heads):
    """An engine's prefix cache: request B starts at a block boundary inside request A's cached blocks (its block table
    begins with A's block ids; the indexer's pooled keys live in the same blocks), and B's k-pool state slot was never
    written (NaN). Nothing of B's own history exists elsewhere: the step must read A's blocks for B's context and no
    tail state (a block-aligned context holds no incomplete pool: block_size is a multiple of kpool)."""
    geo = geometry(name, heads)
    s = make_step(geo, heads, layout, [(35, 1), (2 * BS, 7)], block_size=BS, seed=3)
    a, b = s.requests
    table_b = torch.cat([torch.as_tensor(a.block_table)[:2], torch.as_tensor(b.block_table)[2:]]).to(torch.int32)
    s.requests = [a, Request(b.num_cached, b.num_scheduled, table_b, b.state_slot)]
    if s.indexer.tail_state is not None:
        s.indexer.tail_state[b.state_slot] = float("nan")
    ref = reference_step(s)
    step, out = run_and_check(backend(geo, layout, heads), s, ref)
    assert torch.isfinite(out).all()


def _rows(s, a, b):
    """The step inputs of tokens [a, b) (one request's), over the same caches."""
    ix = s.indexer
    sl = slice(a, b)
    return dataclasses.replace(s, q=s.q[sl], latent=s.latent[sl], indexer=dataclasses.replace(
        ix, q=ix.q[sl], weights=ix.weights[sl], k=ix.k[sl], gate=None if ix.gate is None else ix.gate[sl]))


ROLLBACKS = [(c, r) for r in (1, 2, 3) for c in range(8) if r == 1 or (c + 1) % 4 == 0 or r <= 4 - (c + 1) % 4]


@pytest.mark.parametrize("cached, rejected", ROLLBACKS)
@pytest.mark.parametrize("layout", ["fp8_ds_mla_nope", "bf16"])
def test_rejected_speculative_tokens_roll_back(cached, rejected, layout):
    """Speculative decoding's rollback: a step schedules positions c .. c + r (one token and r drafts), the engine
    rejects the r drafts and schedules position c + 1 again next step (num_cached c + 1) with other inputs, then
    decodes on. Everything after must equal a run that never saw the rejected tokens: each later step's output, and
    every cache byte once the later steps have rewritten the rejected positions. With the k-pool indexer (P 4) a
    rejected token may have completed a pool whose earlier members arrived in the same step: they must still be in
    the request's tail state for the pool to be built again (kpool_update's docstring: any r = 1; deeper rollbacks
    while they do not reach back over an index of the pool being rebuilt, the cases here)."""
    check_rollback(cached, rejected, layout)


def check_rollback(cached, rejected, layout, device="cpu", geo=None, heads=8):
    """The body of test_rejected_speculative_tokens_roll_back (device and geometry: tests/gpu/ runs it with the
    kernels)."""
    geo = geo or geometry("glm-5.3-flash", heads)
    spec = make_step(geo, heads, layout, [(cached, 1 + rejected)], block_size=BS, seed=11 + cached, device=device)
    later = make_step(geo, heads, layout, [(cached + 1, 4)], block_size=BS, seed=99, device=device)  # later inputs
    (req,) = spec.requests
    runs = []
    for rollback in (True, False):
        s = spec.clone_caches()
        attn = backend(geo, layout, heads, decode_threshold=1 + rejected, device=device)
        first = s if rollback else _rows(s, 0, 1)
        step = attn.prepare([Request(cached, 1 + rejected if rollback else 1, req.block_table, req.state_slot)])
        attn.forward(step, first.q, first.latent, s.kv_cache, first.indexer)
        outs = []
        for j in range(4):  # positions c + 1 .. c + 4, past every rejected one
            nxt = _rows(later, j, j + 1)
            ix = dataclasses.replace(nxt.indexer, cache=s.indexer.cache, ape=s.indexer.ape,
                                     tail_state=s.indexer.tail_state)
            step = attn.prepare([Request(cached + 1 + j, 1, req.block_table, req.state_slot)])
            outs.append(attn.forward(step, nxt.q, nxt.latent, s.kv_cache, ix))
        runs.append((outs, s.kv_cache.clone(), s.indexer.cache.clone()))
    (o1, kv1, ix1), (o2, kv2, ix2) = runs
    assert all(torch.equal(a, b) for a, b in zip(o1, o2))
    assert torch.equal(ix1, ix2) and torch.equal(kv1.view(torch.uint8), kv2.view(torch.uint8))


def test_speculative_decodes():
    heads = 8
    geo = geometry("glm-5", heads)
    attn = backend(geo, "fp8_ds_mla", heads, decode_threshold=3)
    s = make_step(geo, heads, "fp8_ds_mla", [(30, 3), (9, 2), (0, 12)], block_size=BS)
    step, _ = run_and_check(attn, s, reference_step(s))
    assert step.host.num_decodes == 2 and step.host.num_decode_tokens == 5
    with pytest.raises(ValueError, match="decodes"):
        attn.prepare([Request(0, 12, [0]), Request(30, 3, [1, 2, 3])])


def test_indexer_logits_rows_are_16_aligned():
    from dsattn.backend.indexer import logits_stride
    assert [logits_stride(w) for w in (0, 1, 15, 16, 17, 2051, 262143)] == [0, 16, 16, 16, 32, 2064, 262144]
    geo = geometry("glm-5", 8)
    attn = backend(geo, "fp8_ds_mla", 8)
    specs = attn.indexer.chunk_specs(3, 2051, 0)
    assert specs["logits"] == ((3, 2064), torch.float32)


def test_a_step_is_valid_until_the_next_prepare():
    heads = 8
    geo = geometry("glm-5", heads)
    s = make_step(geo, heads, "fp8_ds_mla", SPANS, block_size=BS)
    attn = backend(geo, "fp8_ds_mla", heads)
    old = attn.prepare(s.requests)
    new = attn.prepare(s.requests)   # two prepares in a row use both pinned staging buffers in turn
    assert attn._uploads == 2
    kv_before = s.kv_cache.clone()
    with pytest.raises(ValueError, match="latest prepare"):
        attn.forward(old, s.q, s.latent, s.kv_cache, s.indexer, layer=0)
    assert torch.equal(s.kv_cache.view(torch.uint8), kv_before.view(torch.uint8))  # nothing written
    assert new.step_id > old.step_id
    run_and_check(attn, s, reference_step(s))  # a third prepare reuses the first buffer


def test_backends_sharing_a_workspace_see_each_others_prepare():
    """Two backends on one workspace share its step-long regions (metadata, indices): a step stays valid only
    until the next prepare() on the workspace, whichever backend runs it, and a shared layer needs a full layer of
    its own step since. Nothing is written on a rejected call."""
    heads = 8
    geo = geometry("glm-5.3-flash", heads, indexer_types=("full", "shared"))
    a = backend(geo, "bf16", heads)
    b = backend(geo, "bf16", heads, workspace=a.workspace)
    sa = make_step(geo, heads, "bf16", SPANS, block_size=BS, seed=1)
    sb = make_step(geo, heads, "bf16", [(60, 1), (2, 1), (20, 7)], block_size=BS, seed=2)
    step_a = a.prepare(sa.requests)
    full, shared = 0, 1
    a.forward(step_a, sa.q, sa.latent, sa.kv_cache, sa.indexer, layer=full)
    step_b = b.prepare(sb.requests)
    before = _caches(sa)
    with pytest.raises(ValueError, match="latest prepare"):
        a.forward(step_a, sa.q, None, sa.kv_cache, None, layer=shared)
    assert _unchanged(sa, before)
    b.forward(step_b, sb.q, sb.latent, sb.kv_cache, sb.indexer, layer=full)
    step_a = a.prepare(sa.requests)  # a new step of A: B's indices are not A's
    with pytest.raises(ValueError, match="no full layer ran earlier in this step"):
        a.forward(step_a, sa.q, None, sa.kv_cache, None, layer=shared)
    assert _unchanged(sa, before)


def _layer_inputs(geo, s, layer):
    """Layer `layer`'s cache and queries for step s: layer 0 is the step's own; a later layer gets its own cache
    (every slot holding a row, as if written) and queries, seeded by the layer."""
    if layer == 0:
        return s.q, s.kv_cache
    g = torch.Generator().manual_seed(100 + layer)
    kv = s.kv_cache.clone()
    n = kv.shape[0] * kv.shape[1]
    write_kv_cache_reference(torch.randn(n, geo.d_qk, generator=g), kv, torch.arange(n), s.layout)
    return torch.randn(s.q.shape, generator=g).bfloat16(), kv


@pytest.mark.parametrize("name, layout, heads", [("glm-5.3-flash", "fp8_ds_mla_nope", 8), ("glm-5", "bf16", 8),
                                                 ("glm-5", "fp8_ds_mla", 32)])
def test_micro_batches_interleave_layer_by_layer(name, layout, heads):
    """Two micro-batches prepared into their own slots and run layer by layer in turn (A's layer, B's layer, ...;
    layers full, shared, full, shared) give bit for bit what each gives alone on a one-slot backend; the slots'
    step-long regions are apart and the per-call scratch is shared."""
    types = ("full", "shared", "full", "shared")
    geo = geometry(name, heads, indexer_types=types)
    spans_a, spans_b = SPANS, [(60, 1), (2, 1), (20, 7)]
    want = []
    for spans, seed in ((spans_a, 1), (spans_b, 2)):
        s = make_step(geo, heads, layout, spans, block_size=BS, seed=seed)
        attn = backend(geo, layout, heads)
        step = attn.prepare(s.requests)
        outs = []
        for layer in range(len(types)):
            q, kv = _layer_inputs(geo, s, layer)
            full = types[layer] == "full"
            outs.append(attn.forward(step, q, s.latent if full else None, kv, s.indexer if full else None,
                                     layer=layer))
        want.append(outs)
    attn = backend(geo, layout, heads, micro_batches=2)
    sa = make_step(geo, heads, layout, spans_a, block_size=BS, seed=1)
    sb = make_step(geo, heads, layout, spans_b, block_size=BS, seed=2)
    a, b = attn.prepare(sa.requests, micro_batch=0), attn.prepare(RequestBatch.from_requests(sb.requests),
                                                                    micro_batch=1)
    assert (a.micro_batch, b.micro_batch) == (0, 1)
    for layer in range(len(types)):
        full = types[layer] == "full"
        for i, (s, step) in enumerate(((sa, a), (sb, b))):
            q, kv = _layer_inputs(geo, s, layer)
            out = attn.forward(step, q, s.latent if full else None, kv, s.indexer if full else None, layer=layer)
            assert torch.equal(out, want[i][layer]), (layer, i)
    assert not torch.equal(attn.indices(a)[:3], attn.indices(b)[:3])


def test_micro_batch_slots_are_checked():
    """A prepare replaces its own slot's step only; a shared layer needs a full layer of its own step; a bad slot
    or count is a ValueError before anything runs; each slot adds exactly its metadata and indices regions."""
    heads = 8
    geo = geometry("glm-5.3-flash", heads, indexer_types=("full", "shared"))
    attn = backend(geo, "fp8_ds_mla_nope", heads, micro_batches=2)
    sa = make_step(geo, heads, "fp8_ds_mla_nope", SPANS, block_size=BS, seed=1)
    sb = make_step(geo, heads, "fp8_ds_mla_nope", [(60, 1), (2, 1), (20, 7)], block_size=BS, seed=2)
    a = attn.prepare(sa.requests)  # slot 0 by default
    b = attn.prepare(sb.requests, micro_batch=1)
    attn.forward(a, sa.q, sa.latent, sa.kv_cache, sa.indexer, layer=0)
    a2 = attn.prepare(sa.requests, micro_batch=0)
    before = _caches(sa)
    with pytest.raises(ValueError, match=r"latest prepare\(\) of its micro-batch \(0\)"):
        attn.forward(a, sa.q, None, sa.kv_cache, None, layer=1)
    with pytest.raises(ValueError, match="no full layer ran earlier in this step"):
        attn.forward(a2, sa.q, None, sa.kv_cache, None, layer=1)
    assert _unchanged(sa, before)
    attn.forward(b, sb.q, sb.latent, sb.kv_cache, sb.indexer, layer=0)   # slot 1's step is still valid
    attn.forward(b, sb.q, None, sb.kv_cache, None, layer=1)
    for bad in (2, -1, True, 1.0):
        with pytest.raises(ValueError, match="micro_batch must be an int in \\[0, 2\\)"):
            attn.prepare(sa.requests, micro_batch=bad)
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match="micro_batches must be an int >= 1"):
            backend(geo, "fp8_ds_mla_nope", heads, micro_batches=bad)
    one = backend(geo, "fp8_ds_mla_nope", heads)
    extra = {r["consumer"]: r["bytes"] for r in attn.workspace.report()}
    assert attn.workspace_bytes - one.workspace_bytes == extra["metadata.1"] + extra[INDICES + ".1"]
    assert extra["metadata.1"] == extra["metadata"] and extra[INDICES + ".1"] == extra[INDICES]


DECODE_SPANS = [(37, 1), (5, 1), (0, 1), (60, 1)]   # the longest request 61 tokens: bucket 64


@pytest.mark.parametrize("name, layout, heads, path", CASES)
def test_graph_steps_match_eager_steps(name, layout, heads, path):
    """prepare(graph=True) on a decode-only step: the block table and the indexer's logits widened to the bucket (the
    power of two at or above the longest request, 64 here), and a full and a shared layer's outputs and indices
    bit-equal to the same step prepared without it."""
    geo = geometry(name, heads, indexer_types=("full", "shared"))
    got = {}
    for graph in (False, True):
        s = make_step(geo, heads, layout, DECODE_SPANS, block_size=BS, seed=3)
        attn = backend(geo, layout, heads)
        step = attn.prepare(s.requests, graph=graph)
        o0 = attn.forward(step, s.q, s.latent, s.kv_cache, s.indexer, layer=0)
        o1 = attn.forward(step, s.q, None, s.kv_cache, None, layer=1)
        got[graph] = (o0, o1, attn.indices(step).clone(), step)
    plain, graph = got[False][3], got[True][3]
    w = 64 // geo.kpool
    assert plain.graph_key is None and graph.graph_key == (0, 4, 4, 64, ((0, 4, w),))
    assert graph.host.graph_bucket == 64 and graph.block_table.shape == (4, 64 // BS)
    assert [c.width for c in graph.host.decode_chunks] == [w] and plain.host.decode_chunks[0].width == 61 // geo.kpool
    for a, b in zip(got[False][:3], got[True][:3]):
        assert torch.equal(a, b)


def _logged(name, fn, log):
    def arg(v):
        if isinstance(v, torch.Tensor):
            return ("tensor", tuple(v.shape), v.stride(), v.dtype, v.data_ptr())
        if isinstance(v, (list, tuple)):
            return tuple(arg(x) for x in v)
        return repr(v)

    def call(*args, **kw):
        log.append((name, tuple(arg(a) for a in args), tuple((k, arg(v)) for k, v in sorted(kw.items()))))
        return fn(*args, **kw)
    return call


def _record_op_calls(monkeypatch) -> list:
    """Every call the backend makes into dsattn.ops (kernels, their host helpers): its name, each tensor argument's
    shape, strides, dtype and address, every other argument's value: what a CUDA graph would bake in."""
    from dsattn.backend import indexer as indexer_mod
    log = []
    for mod in (attention_mod, indexer_mod):
        for name, fn in list(vars(mod).items()):
            if callable(fn) and getattr(fn, "__module__", "").startswith("dsattn.ops"):
                monkeypatch.setattr(mod, name, _logged(name, fn, log))
    return log


@pytest.mark.parametrize("name, layout, heads, path", CASES)
def test_graph_key_fixes_every_launch(name, layout, heads, path, monkeypatch):
    """Two graph steps with the same graph_key (other contexts in the same bucket, other block ids, a RequestBatch)
    make the very same calls into the ops: names, shapes, strides, addresses and every other argument (the engine's
    inputs and outputs being the same tensors), so a graph captured over one replays the other; a step of another
    bucket gets another key and other calls."""
    geo = geometry(name, heads, indexer_types=("full", "shared"))
    s = make_step(geo, heads, layout, DECODE_SPANS, block_size=BS, seed=4)
    attn = backend(geo, layout, heads)
    out = torch.empty((4, heads, 512), dtype=torch.bfloat16)
    log = _record_op_calls(monkeypatch)
    n = s.kv_cache.shape[0]

    def run(requests):
        step = attn.prepare(requests, graph=True)
        log.clear()
        attn.forward(step, s.q, s.latent, s.kv_cache, s.indexer, layer=0, out=out)
        attn.forward(step, s.q, None, s.kv_cache, None, layer=1, out=out)
        return step.graph_key, list(log)

    key_a, calls_a = run(s.requests)
    assert calls_a and any(c[0] == "topk" for c in calls_a)
    other = [Request(50, 1, [n - 1, 2, 0, 1], 3), Request(0, 1, [n - 2], 0), Request(20, 1, [3, 4], 1),
             Request(33, 1, [5, 0, 6], 2)]
    for requests in (other, RequestBatch.from_requests(other)):
        key_b, calls_b = run(requests)
        assert key_b == key_a and calls_b == calls_a
    longer = [Request(70, 1, [0, 1, 2, 3, 4], 0)] + other[1:]   # 71 tokens: bucket 128
    key_c, calls_c = run(longer)
    assert key_c != key_a and calls_c != calls_a


@pytest.mark.parametrize("name, layout, heads", [("glm-5", "fp8_ds_mla", 8), ("glm-5.3-flash", "fp8_ds_mla_nope", 8),
                                                 ("glm-5", "bf16", 8)])
def test_graph_key_fixes_every_launch_with_speculative_decodes(name, layout, heads, monkeypatch):
    """Speculative decodes (decode_threshold 2): two graph steps of 6 tokens over 4 requests, the tokens spread over
    the requests differently, get one key and make the very same op calls."""
    geo = geometry(name, heads)
    s = make_step(geo, heads, layout, [(37, 2), (5, 1), (0, 1), (58, 2)], block_size=BS, seed=6)
    attn = backend(geo, layout, heads, decode_threshold=2)
    out = torch.empty((6, heads, 512), dtype=torch.bfloat16)
    log = _record_op_calls(monkeypatch)

    def run(requests):
        step = attn.prepare(requests, graph=True)
        log.clear()
        attn.forward(step, s.q, s.latent, s.kv_cache, s.indexer, out=out)
        return step.graph_key, list(log)

    key_a, calls_a = run(s.requests)
    n = s.kv_cache.shape[0]
    other = [Request(30, 1, [n - 1, 2], 3), Request(9, 2, [1], 0), Request(0, 2, [4], 1),
             Request(50, 1, [5, 0, 6, 3], 2)]
    key_b, calls_b = run(other)
    assert key_a == key_b == (0, 6, 4, 64, ((0, 6, 64 // geo.kpool),)) and calls_a == calls_b


def test_graph_steps_take_decodes_only():
    heads = 8
    geo = geometry("glm-5", heads)
    attn = backend(geo, "fp8_ds_mla", heads)
    s = make_step(geo, heads, "fp8_ds_mla", SPANS, block_size=BS)
    with pytest.raises(ValueError, match="a graph step takes decodes only"):
        attn.prepare(s.requests, graph=True)
    assert attn._uploads == 0   # rejected before the upload
    quarters = backend(geo, "fp8_ds_mla", heads, graph_bucket_steps=4)
    d = make_step(geo, heads, "fp8_ds_mla", [(37, 1), (40, 1)], block_size=BS)   # 41 tokens
    assert quarters.prepare(d.requests, graph=True).graph_key[3] == 48 and \
        attn.prepare(d.requests, graph=True).graph_key[3] == 64
    with pytest.raises(ValueError, match="graph_bucket_steps"):
        backend(geo, "fp8_ds_mla", heads, graph_bucket_steps=3)


@pytest.mark.parametrize("what", ["ape", "tail_state"])
def test_non_contiguous_kpool_inputs_are_rejected_before_the_cache_write(what):
    heads = 8
    geo = geometry("glm-5.3-flash", heads)
    attn = backend(geo, "fp8_ds_mla_nope", heads)
    s = make_step(geo, heads, "fp8_ds_mla_nope", SPANS, block_size=BS)
    x = getattr(s.indexer, what)
    strided = torch.empty((2 * x.shape[0],) + x.shape[1:], dtype=x.dtype)[::2]  # rows apart, last dim contiguous
    strided.copy_(x)
    before = _caches(s)
    with pytest.raises(ValueError, match=f"indexer.{what} must"):
        attn.forward(attn.prepare(s.requests), s.q, s.latent, s.kv_cache,
                     dataclasses.replace(s.indexer, **{what: strided}))
    assert _unchanged(s, before)


def test_fp8_cache_layout_is_checked_before_the_indexer_cache_write():
    """latent=None (rows already written): a padded fp8 cache, or [.., 2, row], fails before the indexer runs."""
    heads = 8
    geo = geometry("glm-5", heads)
    attn = backend(geo, "fp8_ds_mla", heads)
    s = make_step(geo, heads, "fp8_ds_mla", SPANS, block_size=BS)
    nb, _, row = s.kv_cache.shape
    padded = torch.zeros(nb, BS + 1, row, dtype=torch.uint8)[:, :BS]
    padded.copy_(s.kv_cache)
    for cache, match in ((padded, "blocks back to back"), (s.kv_cache[:, :, None].expand(nb, BS, 2, row), "row]")):
        before = _caches(s)
        with pytest.raises(ValueError, match=match):
            attn.forward(attn.prepare(s.requests), s.q, None, cache, s.indexer)
        assert _unchanged(s, before)
    wide = torch.zeros(nb, BS, row + 16, dtype=torch.uint8)[..., :row]  # padded rows: blocks back to back
    wide.copy_(s.kv_cache)
    with pytest.raises(ValueError, match="kv_cache must be contiguous"):  # this step writes latent rows into it
        attn.forward(attn.prepare(s.requests), s.q, s.latent, wide, s.indexer)
    assert _unchanged(s, before)


def test_unsupported_latent_width_is_rejected_at_construction():
    geo = geometry("glm-5", 8, kv_lora_rank=256)
    with pytest.raises(ValueError, match="geometry must have kv_lora_rank 512"):
        backend(geo, "bf16", 8)


@pytest.mark.parametrize("layout", ["bf16", "fp8_ds_mla"])
def test_32_head_prefills_past_the_dense_reach_run_pad64(layout, monkeypatch):
    """At 32 heads (G 2) a prefill call whose flat source is past the dense union lists' reach (policy.
    prefill_variant_for_slots; 512 slots at this test's topk 16) runs pad64, one within it the table's native: the
    bf16 path's flat cache view, and the gathered path's context (a request of 600 cached tokens). The table here
    says native at every size (SPEC 7's fallback would say pad64 at these token counts)."""
    from dsattn.ops.sparse_mla.grouping import dense_reach
    geo = geometry("glm-5", 32)
    table = {"table": {"prefill": {"32": [{"max_tokens": None, "variant": "native"}]}}}
    attn = backend(geo, layout, 32, max_model_len=1024, calibration=table)
    reach = dense_reach(2, 16, attn.device)
    seen = []
    real = attention_mod.sparse_mla_prefill
    monkeypatch.setattr(attention_mod, "sparse_mla_prefill",
                        lambda *a, **kw: seen.append((a[1].shape[0], a[0].shape[0], kw["variant"])) or
                        real(*a, **kw))
    for spans, spare in (([(37, 1), (5, 1), (0, 23), (17, 9)], 3), ([(37, 1), (600, 9), (0, 23)], 40)):
        seen.clear()
        s = make_step(geo, 32, layout, spans, block_size=BS, spare_blocks=spare)
        run_and_check(attn, s, reference_step(s))
        prefills = [(rows, v) for rows, _, v in (seen[1:] if layout == "bf16" else seen)]  # bf16: decodes first
        assert prefills and all(v == ("pad64" if rows > reach else "native") for rows, v in prefills), (seen, reach)
        assert any(rows > reach for rows, _ in prefills) == (spare == 40 or layout == "fp8_ds_mla" and
                                                             any(c > reach for c, _ in spans))


def _keyed_backend(monkeypatch, max_model_len=1024, **kw):
    """A glm-5 bf16 backend at 8 heads (G 8) as where the grouped kernel's shared-memory union lists run
    (grouping_smem.usable patched: the CPU runs none), its table 'native' for every prefill call."""
    from dsattn.ops.sparse_mla import grouping_smem
    monkeypatch.setattr(grouping_smem, "usable", lambda device: True)
    table = {"table": {"prefill": {"8": [{"max_tokens": None, "variant": "native"}]}}}
    geo = geometry("glm-5", 8)
    return geo, backend(geo, "bf16", 8, max_model_len=max_model_len, calibration=table, **kw)


def _spy_prefill(monkeypatch):
    seen = []
    real = attention_mod.sparse_mla_prefill
    monkeypatch.setattr(attention_mod, "sparse_mla_prefill",
                        lambda *a, **kw: seen.append((a[0].shape[0], kw["variant"], kw["key_slots"])) or
                        real(*a, **kw))
    return seen


def test_bf16_keyed_prefill(monkeypatch):
    """The bf16 path's prefill call numbers its requests' positions (keys) and passes their slots (key_slots) when
    its grouped variant runs; the step matches the reference, its indices (keys) map back to the same slots, and
    key_slots holds each prefill request's position slots after the previous request's."""
    from dsattn.backend.attention import KEY_SLOTS
    geo, attn = _keyed_backend(monkeypatch)
    assert attn._key_cap == 1024 and KEY_SLOTS in {r["consumer"] for r in attn.workspace.report()}
    seen = _spy_prefill(monkeypatch)
    s = make_step(geo, 8, "bf16", SPANS, block_size=BS, spare_blocks=5)
    step, _ = run_and_check(attn, s, reference_step(s))
    keys = sum(c + n for c, n in SPANS[3:])
    assert attn.keyed_prefill_keys(step) == [keys]
    (d, dv, dk), (p, pv, pk) = seen
    assert (d, dv, dk) == (3, "pad64", None) and (p, pv) == (39, "native") and pk.shape == (keys,)
    want = torch.cat([torch.as_tensor(r.block_table)[torch.arange(c + n) // BS] * BS + torch.arange(c + n) % BS
                      for r, (c, n) in zip(s.requests[3:], SPANS[3:])]).to(torch.int32)
    assert torch.equal(pk, want)


@pytest.mark.parametrize("on", [False, True])
def test_bf16_row_scratch_knob(on, monkeypatch):
    """bf16_row_scratch: the keyed prefill call gets sparse_mla_prefill's row_scratch, views of a workspace region of
    prefill_row_spec(_key_cap, D_qk) reserved at construction (exact bytes), sized to the call's keys; the decode
    rows' call (not keyed) gets none. Off: no region, no row_scratch (on is the default since session 69). The step
    matches the reference either way (on the CPU the rows are not converted: no Gluon kernel runs)."""
    from dsattn.backend.attention import ROW_SCRATCH
    from dsattn.memory.workspace import specs_nbytes
    from dsattn.ops.sparse_mla import prefill_row_spec
    monkeypatch.setattr(DSAAttention, "bf16_row_scratch", on)
    geo, attn = _keyed_backend(monkeypatch)
    regions = {r["consumer"]: r for r in attn.workspace.report()}
    assert (ROW_SCRATCH in regions) == on
    if on:
        want = specs_nbytes(dict(zip(("rows", "kmap"), prefill_row_spec(attn._key_cap, geo.d_qk))))
        assert regions[ROW_SCRATCH]["bytes"] == want
    seen = []
    real = attention_mod.sparse_mla_prefill
    monkeypatch.setattr(attention_mod, "sparse_mla_prefill",
                        lambda *a, **kw: seen.append((a[0].shape[0], kw["key_slots"], kw["row_scratch"])) or
                        real(*a, **kw))
    s = make_step(geo, 8, "bf16", SPANS, block_size=BS, spare_blocks=5)
    run_and_check(attn, s, reference_step(s))
    keys = sum(c + n for c, n in SPANS[3:])
    (d, dk, dr), (p, pk, pr) = seen
    assert dk is None and dr is None and pk.shape == (keys,)
    if on:
        assert [tuple(t.shape) for t in pr] == [(keys, geo.d_qk), (keys,)]
        assert [t.dtype for t in pr] == [torch.bfloat16, torch.int32]
    else:
        assert pr is None


@pytest.mark.parametrize("on", [False, True])
@pytest.mark.parametrize("cap", [None, 48])
def test_gathered_row_scratch_knob(on, cap, monkeypatch):
    """gathered_row_scratch: each gathered prefill call (fp8_gathered path) gets sparse_mla_prefill's row_scratch,
    views of a workspace region of prefill_row_spec(gather_tokens, D_qk) reserved at construction (exact bytes), sized
    to the chunk's context rows (with a gather cap of 48: three chunks); the step matches the reference either way.
    On by default (session 71); off: no region, no row_scratch."""
    from dsattn.backend.attention import ROW_SCRATCH
    from dsattn.memory.workspace import specs_nbytes
    from dsattn.ops.sparse_mla import prefill_row_spec
    monkeypatch.setattr(DSAAttention, "gathered_row_scratch", on)
    heads = 32
    geo = geometry("glm-5", heads)
    attn = backend(geo, "fp8_ds_mla", heads, **({"max_model_len": 48, "gather_cap_tokens": cap} if cap else {}))
    assert attn.path is Path.FP8_GATHERED
    regions = {r["consumer"]: r for r in attn.workspace.report()}
    assert (ROW_SCRATCH in regions) == on
    if on:
        want = specs_nbytes(dict(zip(("rows", "kmap"), prefill_row_spec(attn.limits.gather_tokens, geo.d_qk))))
        assert regions[ROW_SCRATCH]["bytes"] == want
    seen = []
    real = attention_mod.sparse_mla_prefill
    monkeypatch.setattr(attention_mod, "sparse_mla_prefill",
                        lambda *a, **kw: seen.append((a[1].shape[0], kw["row_scratch"])) or real(*a, **kw))
    s = make_step(geo, heads, "fp8_ds_mla", SPANS, block_size=BS)
    step, _ = run_and_check(attn, s, reference_step(s))
    assert [n for n, _ in seen] == [c.num_keys for c in step.host.gather_chunks] and len(seen) == (3 if cap else 1)
    for n, rs in seen:
        if on:
            assert [tuple(t.shape) for t in rs] == [(n, geo.d_qk), (n,)]
        else:
            assert rs is None


@pytest.mark.parametrize("case", ["off", "decodes_together", "pad64"])
def test_bf16_prefill_reads_slots_unless_keyed(case, monkeypatch):
    """bf16_keyed_prefill off, decodes in the prefill rows' call, or a variant other than the grouped one: one
    prefill call over slots, as before session 46."""
    if case == "off":
        monkeypatch.setattr(DSAAttention, "bf16_keyed_prefill", False)
    if case == "decodes_together":
        monkeypatch.setattr(DSAAttention, "bf16_decodes_apart", False)
    geo, attn = _keyed_backend(monkeypatch)
    if case == "pad64":
        attn.table = {"table": {"prefill": {"8": [{"max_tokens": None, "variant": "pad64"}]}}}
    seen = _spy_prefill(monkeypatch)
    s = make_step(geo, 8, "bf16", SPANS, block_size=BS, spare_blocks=5)
    step, _ = run_and_check(attn, s, reference_step(s))
    assert attn.keyed_prefill_keys(step) == [] and seen and all(ks is None for *_, ks in seen)
    assert [n for n, *_ in seen] == ([3, 39] if case != "decodes_together" else [42])


@pytest.mark.parametrize("cap", [64, 48])
def test_bf16_keyed_prefill_a_call_a_gather_chunk(cap, monkeypatch):
    """Prefill requests past the gather cap (64) in two chunks (47 and 49 keys): a keyed call each; with the keys'
    capacity at 48 the second chunk's call reads slots (its rows slots, the first chunk's keys)."""
    geo, attn = _keyed_backend(monkeypatch, max_model_len=64, gather_cap_tokens=64)
    attn._key_cap = cap
    seen = _spy_prefill(monkeypatch)
    s = make_step(geo, 8, "bf16", SPANS, block_size=BS, spare_blocks=5)
    step, _ = run_and_check(attn, s, reference_step(s))
    assert [c.num_keys for c in step.host.gather_chunks] == [47, 49]
    assert attn.keyed_prefill_keys(step) == ([47, 49] if cap == 64 else [47, 0])
    assert [(n, None if ks is None else ks.shape[0]) for n, _, ks in seen] == \
        [(3, None), (7, 47), (32, 49 if cap == 64 else None)]
