"""The serving backend (DSAAttention) against transformers 5.24.0's DSA layers, step by step.

tests/test_transformers_{prefill,decode}.py check dsattn's reference ops against transformers; the backend tests check
DSAAttention against that reference stack. Here the backend itself runs a short serving sequence of two requests, fed
from a tiny random transformers attention module's own sub-layers (tests/_hf_models.pieces), and each step's output,
projected back through the module's value and output projections, is compared with what the module computes for the
same tokens with its own cache (each request alone, batch 1):

    step 0   A's prompt (20 tokens) and the first chunk of B's (17 of 37)        prefill only
    step 1   A decodes 1 token, B's second chunk (20)                             a mixed step, decodes first
    step 2   A decodes 2 tokens (speculative, decode_threshold 2), B decodes 1
    step 3+  both decode 1 token

over paged caches that start poisoned (NaN latent rows, 0xFF indexer bytes and NaN k-pool tail state: any read of a slot
or state no step wrote shows up), shuffled block tables and a block size that divides no length (k-pool: 8). Per step:
- the backend's top-k (its cache slots mapped back to positions, each in its own request) equals transformers'
  selection in most rows: fp8 indexer keys and bf16 queries flip near ties at the k-th place, so where the sets differ
  (k-pool 1) every swapped position's exact logit must lie within NEAR_TIE of the k-th largest, and over the sequence
  at least 85% of the rows agree with a recall of at least 0.97 (the numbers measured: at the end of the test);
- in the rows where the selections agree the layer output is within the cache format's error of transformers'
  (REL_STORED, as in test_transformers_decode); every row's attention equals the paged reference over the backend's
  own selection, and no output is NaN (a poisoned slot or state read);
- GLM-5's shared layers (SHARED_CASES): a second layer reuses the first's top-k, in the backend from its indices
  region, in transformers passed on as prev_topk_indices; its output is checked the same way.
The reference ops run (TRITON_INTERPRET=0): this checks the backend's plumbing (metadata, paths, chunking, cache and
state writes, position to slot mapping) against the models, not the kernels (tests/gpu/ does that).
"""
from __future__ import annotations

import pytest
import torch

from conftest import needs_transformers

pytestmark = needs_transformers

import _hf_models as hf  # noqa: E402
from dsattn.backend.attention import DSAAttention  # noqa: E402
from dsattn.backend.indexer import IndexerInputs  # noqa: E402
from dsattn.backend.metadata import Request  # noqa: E402
from dsattn.backend.synthetic import indices_as_slots  # noqa: E402
from dsattn.config import from_hf_config  # noqa: E402
from dsattn.formats import KVLayout, new_indexer_cache, new_kv_cache  # noqa: E402
from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference  # noqa: E402

# layer output vs transformers' fp32, relative to its largest value: the cache's rounding (test_transformers_decode's
# REL_STORED: measured 2.7e-3 to 3.1e-3 bf16, 4.4e-2 to 4.6e-2 fp8) plus bf16 queries here (the backend takes q in bf16)
REL_STORED = {KVLayout.BF16: 1e-2, KVLayout.FP8_DS_MLA: 0.1, KVLayout.FP8_DS_MLA_NOPE: 0.1}
NUM_BLOCKS = 64
PROMPTS = (20, 37)
FIRST_CHUNK = 17  # not a multiple of kpool: the second chunk starts inside a pool (its first members in the tail state)
DECODE_STEPS = 3
NEAR_TIE = 0.06  # a swapped position's exact logit from the k-th largest, relative to the row's largest magnitude

# (kind, kpool, topk, heads, cache layout, block size): heads 4 run the bf16 path or the fp8 mixed path, 32 the fp8
# gathered path (SPEC 7)
CASES = [
    ("deepseek_v32", 1, 8, 4, "bf16", 5),
    ("deepseek_v32", 1, 8, 4, "fp8_ds_mla", 5),
    ("glm_moe_dsa", 1, 8, 32, "fp8_ds_mla", 5),
    ("glm_moe_dsa", 1, 8, 32, "bf16", 3),
    ("glm5_next", 4, 8, 4, "fp8_ds_mla_nope", 8),
    ("glm5_next", 4, 8, 32, "fp8_ds_mla_nope", 8),
    ("glm5_next", 4, 8, 4, "bf16", 8),
]
# GLM-5's shared layers: layer 1 reuses layer 0's top-k (the backend's from its indices region, transformers' passed on)
SHARED_CASES = [("glm_moe_dsa", 1, 8, 4, "fp8_ds_mla", 5), ("glm_moe_dsa", 1, 8, 32, "bf16", 3)]


@pytest.fixture(autouse=True)
def reference_ops(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")


def _schedule():
    """Per step, per request: the positions scheduled (A then B; decodes first in every step)."""
    a, b = PROMPTS
    c = FIRST_CHUNK
    steps = [[range(0, a), range(0, c)], [range(a, a + 1), range(c, b)], [range(a + 1, a + 3), range(b, b + 1)]]
    for i in range(DECODE_STEPS):
        steps.append([range(a + 3 + i, a + 4 + i), range(b + 1 + i, b + 2 + i)])
    return steps


@pytest.mark.parametrize("kind,kpool,topk,heads,layout,bs,shared",
                         [c + (False,) for c in CASES] + [c + (True,) for c in SHARED_CASES],
                         ids=[f"{c[0]}-P{c[1]}-h{c[3]}-{c[4]}" for c in CASES] +
                             [f"{c[0]}-h{c[3]}-{c[4]}-shared" for c in SHARED_CASES])
def test_backend_steps_match_transformers(kind, kpool, topk, heads, layout, bs, shared):
    run_sequence(kind, kpool, topk, heads, layout, bs, shared)


def run_sequence(kind, kpool, topk, heads, layout, bs, shared, device="cpu"):
    """The test's body; device: where the backend runs (tests/gpu/test_transformers_backend_gpu.py runs it on CUDA
    with the kernels). transformers' modules run on the CPU in fp32, their pieces are moved to `device`."""
    torch.manual_seed(0)
    dev = torch.device(device)
    extra = {"num_layers": 2, "indexer_types": ["full", "shared"]} if shared else {}
    cfg = hf.tiny_config(kind, index_topk=topk, kpool=kpool, num_attention_heads=heads, num_key_value_heads=heads,
                         **extra)
    geo = from_hf_config(cfg.to_dict())
    modules = [hf.build_attention(cfg, layer) for layer in range(2 if shared else 1)]
    module = modules[0]
    layout = KVLayout(layout)
    steps = _schedule()
    max_len = max(r.stop for step in steps for r in step)
    attn = DSAAttention(geo, tp=1, kv_layout=layout, block_size=bs, max_num_tokens=48, max_num_reqs=2,
                        max_model_len=max_len, decode_threshold=2, device=dev)
    kv_caches = [new_kv_cache(NUM_BLOCKS, bs, layout, geo.d_qk, dev) for _ in modules]
    for c in kv_caches:
        c.fill_(float("nan")) if layout is KVLayout.BF16 else c.fill_(255)
    kv_cache = kv_caches[0]
    icache = new_indexer_cache(NUM_BLOCKS, bs // kpool, dev).fill_(255)
    tail = torch.full((2, kpool - 1, 256), float("nan"), device=dev) if kpool > 1 else None
    ape = module.indexer.index_kpool_compress_ape.detach().float().contiguous().to(dev) if kpool > 1 else None
    per_req = -(-max_len // bs)
    tables = torch.randperm(NUM_BLOCKS)[:2 * per_req].view(2, per_req).to(torch.int32)
    xs = [[torch.randn(1, max_len, hf.HIDDEN) for _ in range(2)] for _ in modules]  # [layer][request]
    hf_caches = [hf.new_hf_cache(cfg) for _ in range(2)]
    hits = total = agree = rows = 0
    keys = [torch.full((max_len, 128), float("nan")) for _ in range(2)]  # each request's fp32 indexer keys so far

    for step_no, scheduled in enumerate(steps):
        hf_out, hf_top, parts, hf_out1, parts1 = [], [], [], [], []
        for r, pos in enumerate(scheduled):
            pos = torch.tensor(list(pos))
            x = xs[0][r][:, pos]
            if shared:  # the model's mask, made once before its layers run (run_hf makes it from the cache: after
                # layer 0 has grown it)
                from transformers.masking_utils import create_causal_mask
                mask = create_causal_mask(config=cfg, inputs_embeds=x, attention_mask=None,
                                          **hf.cache_kw(hf_caches[r]), position_ids=pos[None],
                                          allow_is_causal_skip=False)
            out, top = hf.run_hf(module, x, pos, cache=hf_caches[r])
            hf_out.append(out)
            hf_top.extend(top)
            parts.append(hf.pieces(module, x, pos))
            if shared:
                x1 = xs[1][r][:, pos]
                with torch.no_grad():
                    hf_out1.append(modules[1](x1, hf.position_embeddings(cfg, x1, pos), mask,
                                              **hf.cache_kw(hf_caches[r]), position_ids=pos[None],
                                              prev_topk_indices=top[None])[0][0])
                parts1.append(hf.pieces(modules[1], x1, pos))
        requests = [Request(pos.start, len(pos), tables[r, :-(-pos.stop // bs)], state_slot=r)
                    for r, pos in enumerate(scheduled)]
        step = attn.prepare(requests)
        cat = lambda name: torch.cat([getattr(p, name) for p in parts])  # noqa: E731
        iq, iw = cat("iq"), cat("iw")
        for r, (pos, piece) in enumerate(zip(scheduled, parts)):
            keys[r][pos.start:pos.stop] = piece.ik
        ix = IndexerInputs(q=iq.bfloat16().to(dev), weights=iw.float().contiguous().to(dev), k=cat("ik").to(dev),
                           cache=icache, gate=cat("gate").float().contiguous().to(dev) if kpool > 1 else None,
                           ape=ape, tail_state=tail)
        q = cat("q_latent").bfloat16().to(dev)
        out = torch.full((q.shape[0], heads, 512), float("nan"), dtype=torch.bfloat16, device=dev)
        attn.forward(step, q, cat("latent").to(dev), kv_cache, ix, out=out)
        assert torch.isfinite(out).all(), f"step {step_no}: a poisoned row or state was read"

        # the backend's selection: its slots, and back to positions of each row's request
        slots = indices_as_slots(attn, step, attn.indices(step))
        want, _ = sparse_mla_paged_reference(q, kv_cache, slots, geo.softmax_scale, layout)
        torch.testing.assert_close(out.float(), want, atol=2e-2, rtol=2e-2)
        slots, out = slots.cpu(), out.cpu()
        positions = step.host.positions.tolist()
        rows_req = step.host.token_req.tolist()
        equal = []
        for t, (r, p) in enumerate(zip(rows_req, positions)):
            slot_pos = {int(tables[r, i // bs]) * bs + i % bs: i for i in range(p + 1)}
            mine = {slot_pos[s] for s in slots[t].tolist() if s >= 0}
            assert len(mine) == (slots[t] >= 0).sum(), f"step {step_no} row {t}: a slot outside its request"
            theirs = hf.visible_set(hf_top[t], p + 1)
            if kpool > 1:  # transformers lists whole pools and the tail as positions: the same sets either way
                theirs = {v for v in theirs if v <= p}
            equal.append(mine == theirs)
            if mine != theirs and kpool == 1:
                # a flip at the k-th place: every swapped position's exact logit (fp32 keys and queries) within
                # NEAR_TIE of the k-th largest, relative to the row's largest magnitude
                lg = (iw[t] * torch.relu(keys[r][:p + 1] @ iq[t].T)).sum(-1)
                kth = lg.sort(descending=True).values[topk - 1]
                off = (lg[sorted(mine ^ theirs)] - kth).abs().max() / lg.abs().max()
                assert off <= NEAR_TIE, f"step {step_no} row {t}: {sorted(mine ^ theirs)} swapped, {off:.3f} off"
            hits, total = hits + len(mine & theirs), total + len(theirs)
        equal = torch.tensor(equal)
        agree, rows = agree + int(equal.sum()), rows + len(equal)
        expected = torch.cat(hf_out)
        got = hf.project_output(module, out.float())
        if equal.any():
            hf.assert_close_rel(got[equal], expected[equal], REL_STORED[layout])
        if shared:  # layer 1 on layer 0's selection: where it agreed with transformers', so does the output
            q1 = torch.cat([p.q_latent for p in parts1]).bfloat16().to(dev)
            out1 = torch.full_like(out, float("nan"), device=dev)
            attn.forward(step, q1, torch.cat([p.latent for p in parts1]).to(dev), kv_caches[1], None, layer=1,
                         out=out1)
            want1, _ = sparse_mla_paged_reference(q1, kv_caches[1], slots.to(dev), geo.softmax_scale, layout)
            torch.testing.assert_close(out1.float(), want1, atol=2e-2, rtol=2e-2)
            out1 = out1.cpu()
            if equal.any():
                got1 = hf.project_output(modules[1], out1.float())
                hf.assert_close_rel(got1[equal], torch.cat(hf_out1)[equal], REL_STORED[layout])

    # fp8 indexer keys: SPEC 4's recall bound against transformers' selection, and most rows the very same set
    # fp8 indexer keys and bf16 queries: near ties flip at the k-th place. Measured here (CPU, torch 2.13, these seeds):
    # recall 0.978-0.993 against transformers' selection, 58-66 of 67 rows the same sets, the swapped positions' exact
    # logits at most 0.042 of the row's largest from the k-th. SPEC 4's 0.98 is for 2048 of long contexts; with k 8 of
    # at most 41 keys one flip costs a row 1/8 of its selection, so the bound here is 0.97.
    assert hits / total >= 0.97, f"recall {hits / total:.3f}"
    assert agree >= 0.85 * rows, f"{rows - agree} of {rows} rows select other positions than transformers"
