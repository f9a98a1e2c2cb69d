"""Tiny random DSA attention layers from transformers 5.24.0, and the pieces of their own forward pass
that dsattn's references consume.

Three kinds: ``deepseek_v32`` (indexer RoPE half-split), ``glm_moe_dsa`` (indexer RoPE interleaved,
shared layers), ``glm5_next`` (NoPE, k-pool indexer). Every piece below is computed with the module's
own sub-layers and transformers' own RoPE functions, so a mismatch with the module's output is a
mismatch in dsattn, not in how the test re-derives the inputs.

Batch size is always 1: a padding-free ragged batch is several requests run one by one through
transformers and concatenated for dsattn.
"""
from __future__ import annotations

import dataclasses
import inspect
import math

import torch
import torch.nn.functional as F

KINDS = ("deepseek_v32", "glm_moe_dsa", "glm5_next")
HIDDEN = 64
HEADS = 4
INDEX_HEADS = 8  # with 4, all heads' relu is 0 for 1 key in 16: exact-zero ties everywhere


def cache_kw(cache) -> dict:
    """transformers' keyword argument for a cache: ``cache`` in 5.24 (``past_key_values`` deprecated there), but
    ``past_key_values`` in the GPU machine's 5.17, whose functions have no ``cache``."""
    from transformers.masking_utils import create_causal_mask
    name = "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"
    return {name: cache}


def _modules(kind):
    if kind == "deepseek_v32":
        from transformers.models.deepseek_v32 import modeling_deepseek_v32 as m
        return m.DeepseekV32Config, m.DeepseekV32Attention, m.DeepseekV32RotaryEmbedding, m
    if kind == "glm_moe_dsa":
        from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as m
        return m.GlmMoeDsaConfig, m.GlmMoeDsaAttention, m.GlmMoeDsaRotaryEmbedding, m
    if kind == "glm5_next":
        from transformers.models.glm5_next import modeling_glm5_next as m
        return m.Glm5NextTextConfig, m.Glm5NextTextAttention, None, m
    raise ValueError(kind)


def tiny_config(kind: str, *, index_topk: int = 8, kpool: int = 4, num_layers: int = 1, yarn: bool = False,
                **overrides):
    """A small config of the given kind: real latent width (512) and indexer head dim (128), so the
    cache layouts apply unchanged; few heads, small hidden size, small top-k."""
    cfg_cls = _modules(kind)[0]
    kw = dict(hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=HEADS, q_lora_rank=32,
              kv_lora_rank=512, v_head_dim=32, index_n_heads=INDEX_HEADS, index_head_dim=128,
              index_topk=index_topk, num_hidden_layers=num_layers, vocab_size=128, intermediate_size=64,
              moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2)
    if kind == "glm5_next":
        kw.update(qk_nope_head_dim=64, qk_rope_head_dim=0, index_kpool=kpool, pad_token_id=None,
                  layer_types=["full_attention"] * num_layers)  # the config renames it (5.24 and 5.17 alike)
    else:
        kw.update(qk_nope_head_dim=32, qk_rope_head_dim=64)
        rope = {"rope_type": "default", "rope_theta": 10000.0}
        if yarn:
            rope = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "mscale": 1.0,
                    "mscale_all_dim": 1.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
                    "beta_slow": 1.0}
        kw["rope_parameters"] = rope
    kw.update(overrides)
    cfg = cfg_cls(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def _randomize_(module: torch.nn.Module) -> None:
    """Random weights of unit-scale activations (bare modules keep zero-initialized k-pool params)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("index_kpool_compress_ape"):
                p.normal_(0.0, 1.0)
            elif p.dim() >= 2:
                p.normal_(0.0, p.shape[-1] ** -0.5)
            elif name.endswith("weight"):  # norms
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.2)


def build_attention(cfg, layer_idx: int = 0):
    """The kind's attention module (with its indexer), random fp32 weights, eval mode."""
    kind = cfg.model_type.replace("_text", "")
    attn = _modules(kind)[1](cfg, layer_idx).float().eval()
    _randomize_(attn)
    return attn


def kind_of(cfg) -> str:
    return {"deepseek_v32": "deepseek_v32", "glm_moe_dsa": "glm_moe_dsa", "glm5_next_text": "glm5_next"}[
        cfg.model_type]


def position_embeddings(cfg, x: torch.Tensor, positions: torch.Tensor):
    """(cos, sin) as the model computes them for x [1, S, hidden] at positions [S]; None for NoPE."""
    rot_cls = _modules(kind_of(cfg))[2]
    if rot_cls is None:
        return None
    return rot_cls(cfg)(x, positions[None])


@dataclasses.dataclass
class Pieces:
    """What dsattn's references take, for S tokens of one request (fp32)."""

    q_latent: torch.Tensor  # [S, H, kv_lora_rank + rope]: absorbed queries
    latent: torch.Tensor  # [S, kv_lora_rank + rope]: the latent cache rows
    iq: torch.Tensor | None  # [S, Hi, 128]: indexer queries after RoPE (None: shared layer)
    iw: torch.Tensor | None  # [S, Hi]: indexer head weights with n_heads**-0.5 * softmax_scale folded in
    ik: torch.Tensor | None  # [S, 128]: indexer keys after RoPE
    gate: torch.Tensor | None  # [S, 128]: k-pool gate scores (glm5_next)


@torch.no_grad()
def pieces(attn, x: torch.Tensor, positions: torch.Tensor) -> Pieces:
    """x [1, S, hidden], positions [S] -> Pieces, from the module's own sub-layers."""
    kind = kind_of(attn.config)
    m = _modules(kind)[3]
    s = x.shape[1]
    h, nope, rope = attn.num_heads, attn.qk_nope_head_dim, attn.qk_rope_head_dim
    q_resid = attn.q_a_layernorm(attn.q_a_proj(x))
    q = attn.q_b_proj(q_resid).view(1, s, h, nope + rope).transpose(1, 2)  # [1, H, S, nope + rope]
    q_pass, q_rot = torch.split(q, [nope, rope], dim=-1)
    kv_pass, k_rot = torch.split(attn.kv_a_proj_with_mqa(x), [attn.kv_lora_rank, rope], dim=-1)
    k_pass = attn.kv_a_layernorm(kv_pass)  # [1, S, 512]
    k_rot = k_rot.view(1, 1, s, rope)
    pe = position_embeddings(attn.config, x, positions)
    if rope:
        q_rot, k_rot = m.apply_rotary_pos_emb_interleave(q_rot, k_rot, *pe)
    # Absorb the key half of kv_b_proj into the query: <q_nope, W_k c> = <W_k^T q_nope, c>.
    w = attn.kv_b_proj.weight.view(h, nope + attn.v_head_dim, attn.kv_lora_rank)
    q_lat = torch.einsum("hsn,hnc->shc", q_pass[0], w[:, :nope])
    q_latent = torch.cat([q_lat, q_rot[0].transpose(0, 1)], dim=-1)
    latent = torch.cat([k_pass[0], k_rot[0, 0]], dim=-1)

    ix = attn.indexer
    if ix is None:  # a shared layer: no indexer of its own
        return Pieces(q_latent=q_latent.float(), latent=latent.float(), iq=None, iw=None, ik=None, gate=None)
    iq = ix.wq_b(q_resid).view(1, s, ix.n_heads, ix.head_dim)
    ik = ix.k_norm(ix.wk(x)).view(1, s, 1, ix.head_dim)
    gate = None
    if kind == "glm5_next":
        gate = F.linear(x, ix.index_kpool_compress_gate)[0]
    else:
        r = ix.qk_rope_head_dim
        iq_rot, iq_pass = torch.split(iq, [r, ix.head_dim - r], dim=-1)
        ik_rot, ik_pass = torch.split(ik, [r, ix.head_dim - r], dim=-1)
        rope_fn = m.apply_rotary_pos_emb if kind == "deepseek_v32" else m.apply_rotary_pos_emb_interleave
        iq_rot, ik_rot = rope_fn(iq_rot, ik_rot, *pe, unsqueeze_dim=2)
        iq, ik = torch.cat([iq_rot, iq_pass], dim=-1), torch.cat([ik_rot, ik_pass], dim=-1)
    iw = ix.weights_proj(x).float() * ix.n_heads ** -0.5 * ix.softmax_scale
    return Pieces(q_latent=q_latent.float(), latent=latent.float(), iq=iq[0].float(), iw=iw[0],
                  ik=ik[0, :, 0].float(), gate=gate)


@torch.no_grad()
def project_output(attn, out_latent: torch.Tensor) -> torch.Tensor:
    """Sparse MLA's latent output [S, H, 512] -> the layer's output [S, hidden] (value half of
    kv_b_proj per head, then o_proj)."""
    h, nope = attn.num_heads, attn.qk_nope_head_dim
    w = attn.kv_b_proj.weight.view(h, nope + attn.v_head_dim, attn.kv_lora_rank)
    o = torch.einsum("shc,hvc->shv", out_latent.float(), w[:, nope:])
    return attn.o_proj(o.reshape(o.shape[0], -1))


@torch.no_grad()
def run_hf(attn, x: torch.Tensor, positions: torch.Tensor, cache=None, prev_topk=None):
    """The module's forward on x [1, S, hidden] at positions [S] (continuing `cache` if given).

    Returns (output [S, hidden], top-k int32 [S, W] as the indexer returned it, or `prev_topk` for a
    shared layer).
    """
    kind = kind_of(attn.config)
    captured = {}
    handle = None
    if attn.indexer is not None:
        handle = attn.indexer.register_forward_hook(lambda mod, args, out: captured.__setitem__("topk", out))
    try:
        kw = {}
        if prev_topk is not None:
            kw["prev_topk_indices"] = prev_topk[None]
        if kind == "glm5_next":
            mask = torch.ones(1, x.shape[1], dtype=torch.bool)
            out = attn(x, attention_mask=mask, **cache_kw(cache), **kw)[0]
        else:
            from transformers.masking_utils import create_causal_mask
            mask = create_causal_mask(config=attn.config, inputs_embeds=x, attention_mask=None, **cache_kw(cache),
                                      position_ids=positions[None], allow_is_causal_skip=False)
            pe = position_embeddings(attn.config, x, positions)
            out = attn(x, pe, mask, **cache_kw(cache), position_ids=positions[None], **kw)[0]
    finally:
        if handle is not None:
            handle.remove()
    topk = captured["topk"][0] if "topk" in captured else prev_topk
    return out[0], topk


def new_hf_cache(cfg):
    from transformers.cache_utils import DynamicCache
    return DynamicCache(config=cfg)


def assert_valid_row(row: torch.Tensor, limit: int) -> None:
    """A dsattn top-k row names only visible positions [0, limit), each once; the rest is -1."""
    vals = row.tolist()
    used = [v for v in vals if v != -1]
    assert all(0 <= v < limit for v in used), f"positions outside [0, {limit}): {vals}"
    assert len(set(used)) == len(used), f"duplicate positions: {vals}"


def visible_set(row: torch.Tensor, limit: int) -> set[int]:
    """Entries of a top-k row that name a position in [0, limit) (transformers also returns masked
    positions when the context is shorter than top-k; -1 pads)."""
    return {int(v) for v in row.tolist() if 0 <= v < limit}


def assert_same_selection(hf_row: torch.Tensor, mine_row: torch.Tensor, scores: torch.Tensor, limit: int,
                          k: int, tol: float = 1e-5) -> bool:
    """Top-k sets of one row agree: both hold min(k, limit) of the positions [0, limit), and they may
    differ only among positions whose score ties the k-th largest (within tol * max |score|).

    scores [>= limit]: dsattn's logits of the row by position. Returns True when the sets are equal.
    """
    assert_valid_row(mine_row, limit)
    a, b = visible_set(hf_row, limit), visible_set(mine_row, limit)
    n = min(k, limit)
    assert len(a) == n and len(b) == n, f"selected {len(a)} (transformers) / {len(b)} (dsattn), want {n}"
    if a == b:
        return True
    sc = scores[:limit].double()
    thr = torch.sort(sc, descending=True).values[n - 1]
    band = {int(p) for p in torch.nonzero((sc - thr).abs() <= tol * max(sc.abs().max().item(), 1e-30))}
    assert a - band == b - band, f"sets differ outside ties: {sorted(a ^ b)} (tied: {sorted(band)})"
    return False


def pool_split(row: torch.Tensor, limit: int, kpool: int) -> tuple[set[int], set[int]]:
    """A k-pool top-k row over positions [0, limit) -> (selected pools, tail positions); every
    selected pool must be present with all its kpool members."""
    toks = visible_set(row, limit)
    n_pools = limit // kpool
    pools = {t // kpool for t in toks if t < n_pools * kpool}
    tail = {t for t in toks if t >= n_pools * kpool}
    for p in pools:
        assert set(range(p * kpool, (p + 1) * kpool)) <= toks, f"pool {p} only partly selected"
    return pools, tail


def assert_close_rel(actual: torch.Tensor, expected: torch.Tensor, rel: float) -> None:
    """max |actual - expected| <= rel * max |expected| (one scale for the whole tensor)."""
    err = (actual.float() - expected.float()).abs().max().item()
    ref = expected.float().abs().max().item()
    assert err <= rel * max(ref, 1e-30), f"max abs error {err:.3e} > {rel:.1e} * {ref:.3e}"
    assert not math.isnan(err)
