"""DSAAttention over randomly composed steps (reference ops on the CPU): every path of SPEC 7 and the k-pool indexer,
against the reference stack run request by request.

The other backend tests run a few hand-picked steps; here each seed draws a model, cache layout and heads per rank,
a block size, the decode threshold (speculative decodes), how many decodes and prefill chunks and their contexts (0,
block-aligned, one past a block, random), the indexer and gather caps (small ones split requests across chunks), the
list or batch form of the requests, micro-batch slots, the bf16 path's decode-kernel setting and keyed prefill calls,
and a graph step's layout for decode-only steps, then checks the outputs, the selected slots and the cache writes as
tests/test_backend.py's run_and_check does, and a shared layer where the model has one.
"""
import random

import pytest
import torch
from _backend_helpers import import_all_ops

from dsattn.backend.attention import DSAAttention
from dsattn.backend.metadata import RequestBatch
from dsattn.backend.synthetic import indices_as_slots, make_step, reference_step
from dsattn.config import preset

import_all_ops()

CONFIGS = [  # preset, cache layout, heads per rank
    ("glm-5", "bf16", 8), ("glm-5", "bf16", 32), ("deepseek-v3.2", "bf16", 128),
    ("glm-5", "fp8_ds_mla", 8), ("glm-5", "fp8_ds_mla", 16), ("glm-5", "fp8_ds_mla", 32),
    ("deepseek-v3.2", "fp8_ds_mla", 128), ("glm-5.3-flash", "fp8_ds_mla_nope", 8),
    ("glm-5.3-flash", "fp8_ds_mla_nope", 64), ("glm-5.3-flash", "bf16", 16), ("glm-5.3-flash", "fp8_ds_mla", 32),
]
TOPK = 16
MAX_LEN = 96


@pytest.fixture(autouse=True)
def reference_ops(monkeypatch):
    """The public ops run their reference twins (fast), whatever other test modules set."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")


def _context(rng: random.Random, bs: int, most: int) -> int:
    """A cached context: none, whole blocks, one past a block, or any length (at most `most`)."""
    kind = rng.randrange(4)
    if kind == 0 or most < 1:
        return 0
    if kind == 1:
        return min(most, bs * rng.randint(1, max(1, most // bs))) // bs * bs
    if kind == 2:
        return min(most, bs * rng.randint(0, max(0, (most - 1) // bs)) + 1)
    return rng.randint(1, most)


def _draw(seed: int):
    rng = random.Random(seed)
    name, layout, heads = CONFIGS[seed % len(CONFIGS)]
    geo = preset(name).scaled(index_topk=TOPK, index_n_heads=4, num_heads=heads,
                              **({"indexer_types": ("full", "shared")} if name == "glm-5.3-flash" else {}))
    bs = rng.choice([4, 8, 16]) if geo.kpool == 4 else rng.choice([1, 2, 8, 16])
    threshold = rng.choice([1, 1, 2, 3])
    decodes = [(_context(rng, bs, MAX_LEN - threshold), rng.randint(1, threshold)) for _ in range(rng.randint(0, 5))]
    prefills = []
    for _ in range(rng.randint(0 if decodes else 1, 3)):
        n = rng.randint(threshold + 1, 24)
        prefills.append((_context(rng, bs, MAX_LEN - n), n))
    spans = decodes + prefills
    return rng, geo, heads, layout, bs, threshold, spans


@pytest.mark.parametrize("seed", range(66))
def test_random_step_matches_reference(seed, monkeypatch):
    rng, geo, heads, layout, bs, threshold, spans = _draw(seed)
    tokens = sum(n for _, n in spans)
    kw = dict(kv_layout=layout, block_size=bs, max_num_tokens=tokens + rng.randint(0, 8),
              max_num_reqs=len(spans) + rng.randint(0, 2), max_model_len=MAX_LEN, decode_threshold=threshold,
              tp=geo.num_heads // heads, micro_batches=rng.choice([1, 2]))
    probe = DSAAttention(geo, **kw)
    if rng.random() < 0.5:  # small caps: the indexer's chunks and the gathered contexts split
        most = probe.limits.max_keys
        kw["indexer_cap_bytes"] = probe.indexer.chunk_bytes(rng.randint(2, 6), most, most)
        kw["gather_cap_tokens"] = MAX_LEN
    if layout == "bf16":
        monkeypatch.setattr(DSAAttention, "bf16_decode_kernel", rng.choice(["prefill", "decode", "decode:native"]))
        if rng.random() < 0.5:  # keyed prefill calls, as where the shared-memory union lists run (a GPU)
            from dsattn.ops.sparse_mla import grouping_smem
            monkeypatch.setattr(grouping_smem, "usable", lambda device: True)
            kw["calibration"] = {"table": {"prefill": {str(heads): [{"max_tokens": None, "variant": "native"}]}}}
    attn = DSAAttention(geo, **kw)
    s = make_step(geo, heads, layout, spans, block_size=bs, seed=seed, spare_blocks=rng.randint(0, 6))
    ref = reference_step(s)
    requests = RequestBatch.from_requests(s.requests) if rng.random() < 0.5 else s.requests
    decode_only = all(n <= threshold for _, n in spans)
    graph = decode_only and rng.random() < 0.5
    micro = rng.randrange(attn.micro_batches)
    step = attn.prepare(requests, micro_batch=micro, graph=graph)
    assert step.host.num_tokens == tokens and step.host.num_decodes == sum(n <= threshold for _, n in spans)
    out = torch.full((tokens, heads, 512), float("nan"), dtype=torch.bfloat16)
    assert attn.forward(step, s.q, s.latent, s.kv_cache, s.indexer, layer=0, out=out) is out
    torch.testing.assert_close(out.float(), ref.out, atol=2e-2, rtol=2e-2)
    slots = indices_as_slots(attn, step, attn.indices(step))
    assert torch.equal(slots.sort(dim=1).values, ref.slots.sort(dim=1).values)
    assert torch.equal(s.kv_cache.view(torch.uint8), ref.step.kv_cache.view(torch.uint8))
    if geo.kpool == 1:
        assert torch.equal(s.indexer.cache, ref.step.indexer.cache)
    if geo.indexer_types:  # a shared layer reuses layer 0's selection: the same outputs for the same queries
        shared = torch.full_like(out, float("nan"))
        attn.forward(step, s.q, None, s.kv_cache, None, layer=1, out=shared)
        assert torch.equal(shared, out)


@pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)
@pytest.mark.parametrize("seed", range(0, 66, 6))
def test_random_step_with_interpreted_kernels(seed, monkeypatch):
    """A sample of the draws above with the Triton kernels under TRITON_INTERPRET=1: against the reference, and the
    workspace-staged outputs bit-equal to an allocating run of the same kernels (synthetic.allocating_attention)."""
    pytest.importorskip("triton")
    from dsattn.backend.synthetic import allocating_attention
    from dsattn.ops._triton import allow_runtime_loop_bounds
    allow_runtime_loop_bounds()
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    rng, geo, heads, layout, bs, threshold, spans = _draw(seed)
    tokens = sum(n for _, n in spans)
    attn = DSAAttention(geo, kv_layout=layout, block_size=bs, max_num_tokens=tokens, max_num_reqs=len(spans),
                        max_model_len=MAX_LEN, decode_threshold=threshold, tp=geo.num_heads // heads)
    s = make_step(geo, heads, layout, spans, block_size=bs, seed=seed)
    ref = reference_step(s)
    step = attn.prepare(s.requests)
    out = torch.full((tokens, heads, 512), float("nan"), dtype=torch.bfloat16)
    attn.forward(step, s.q, s.latent, s.kv_cache, s.indexer, layer=0, out=out)
    torch.testing.assert_close(out.float(), ref.out, atol=2e-2, rtol=2e-2)
    # on the backend's own selection (the same q, cache and slots): issue 3's bound
    from dsattn.backend.synthetic import indices_as_slots
    from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference
    from dsattn.ops.sparse_mla.testing import check_out_close
    want, _ = sparse_mla_paged_reference(s.q, s.kv_cache, indices_as_slots(attn, step, attn.indices(step)),
                                         geo.softmax_scale, layout)
    check_out_close(out, want)
    assert torch.equal(s.kv_cache.view(torch.uint8), ref.step.kv_cache.view(torch.uint8))
    indices = attn.indices(step).clone()
    assert torch.equal(allocating_attention(attn, step, s, indices), out)
