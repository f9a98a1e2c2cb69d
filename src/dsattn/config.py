"""Model geometry of the DSA attention layer (SPEC section 1).

A preset is data: the shapes every op, cache and workspace is sized from. It can be built from one of
the named presets or read from a Hugging Face ``config.json`` (a path or an already-loaded dict).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any


@dataclasses.dataclass(frozen=True)
class DSAGeometry:
    """Shapes of one DSA attention layer, for the whole model (not per rank)."""

    name: str
    num_heads: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    kv_lora_rank: int
    index_n_heads: int
    index_head_dim: int
    index_topk: int
    kpool: int = 1
    # Which layers run their own indexer ("full") and which reuse the previous one ("shared").
    indexer_types: tuple[str, ...] = ()
    # Yarn rope parameters change the softmax scale (mscale ** 2); None for plain RoPE / NoPE.
    rope_parameters: dict | None = None

    def __post_init__(self):
        for field in ("num_heads", "kv_lora_rank", "index_n_heads", "index_head_dim", "index_topk", "kpool"):
            if getattr(self, field) <= 0:
                raise ValueError(f"{field} must be positive, got {getattr(self, field)}")
        if self.qk_rope_head_dim < 0:
            raise ValueError(f"qk_rope_head_dim must be >= 0, got {self.qk_rope_head_dim}")
        if self.index_topk % self.kpool != 0:
            raise ValueError(f"index_topk ({self.index_topk}) must be divisible by kpool ({self.kpool})")

    @property
    def d_qk(self) -> int:
        """Latent query/key width: kv_lora_rank plus the RoPE part (576, or 512 for NoPE models)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def d_v(self) -> int:
        """Latent value width (the sparse MLA output): kv_lora_rank."""
        return self.kv_lora_rank

    @property
    def has_rope(self) -> bool:
        return self.qk_rope_head_dim > 0

    @property
    def topk_width(self) -> int:
        """Width of the indexer's output rows: topk, plus the k-pool tail (kpool - 1)."""
        return self.index_topk + self.kpool - 1

    @property
    def softmax_scale(self) -> float:
        """Attention softmax scale as the model computes it: qk_head_dim ** -0.5, times yarn mscale ** 2."""
        scale = (self.qk_nope_head_dim + self.qk_rope_head_dim) ** -0.5
        rp = self.rope_parameters or {}
        if rp.get("rope_type", rp.get("type", "default")) not in ("default", None):
            mscale_all_dim = rp.get("mscale_all_dim", 0)
            factor = rp.get("factor", 1.0)
            if mscale_all_dim and factor > 1:
                mscale = 0.1 * mscale_all_dim * math.log(factor) + 1.0
                scale = scale * mscale * mscale
        return scale

    def heads_per_rank(self, tp: int) -> int:
        """Attention heads each tensor-parallel rank runs."""
        if tp <= 0 or self.num_heads % tp != 0:
            raise ValueError(f"tp must be a positive divisor of num_heads={self.num_heads}, got {tp}")
        return self.num_heads // tp

    def is_shared_layer(self, layer: int) -> bool:
        """True when `layer` reuses the previous full layer's top-k instead of running an indexer."""
        if self.indexer_types and not 0 <= layer < len(self.indexer_types):
            raise ValueError(f"layer must be in [0, {len(self.indexer_types)}), got {layer}")
        return bool(self.indexer_types) and self.indexer_types[layer] == "shared"

    def scaled(self, **changes: Any) -> "DSAGeometry":
        """A copy with some fields changed (tests and the demo shrink a preset this way)."""
        return dataclasses.replace(self, **changes)


PRESETS: dict[str, DSAGeometry] = {
    "deepseek-v3.2": DSAGeometry(
        name="deepseek-v3.2", num_heads=128, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        kv_lora_rank=512, index_n_heads=64, index_head_dim=128, index_topk=2048, kpool=1,
        rope_parameters={"rope_type": "yarn", "factor": 40.0, "mscale_all_dim": 1.0}),
    "glm-5": DSAGeometry(
        name="glm-5", num_heads=64, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
        kv_lora_rank=512, index_n_heads=32, index_head_dim=128, index_topk=2048, kpool=1),
    "glm-5.3-flash": DSAGeometry(
        name="glm-5.3-flash", num_heads=64, qk_nope_head_dim=256, qk_rope_head_dim=0, v_head_dim=256,
        kv_lora_rank=512, index_n_heads=32, index_head_dim=128, index_topk=2048, kpool=4),
}


def preset(name: str) -> DSAGeometry:
    """The named preset (one of PRESETS)."""
    if name not in PRESETS:
        raise ValueError(f"name must be one of {sorted(PRESETS)}, got {name!r}")
    return PRESETS[name]


def _derived_indexer_types(cfg: dict, model_type: str) -> tuple[str, ...]:
    """GLM configs may give the shared-layer schedule as a pattern ("FSS...") or as index_topk_freq /
    index_skip_topk_offset instead of indexer_types; derived as GlmMoeDsaConfig does."""
    if "glm_moe_dsa" not in model_type and "glm5_next" not in model_type:
        return ()
    pattern = cfg.get("index_topk_pattern")
    if pattern is not None:
        return tuple({"F": "full", "S": "shared"}[c] for c in pattern) if isinstance(pattern, str) else tuple(pattern)
    if "num_hidden_layers" not in cfg:
        return ()
    freq = max(cfg.get("index_topk_freq", 1), 1)
    offset = cfg.get("index_skip_topk_offset", 2)
    return tuple("full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(cfg["num_hidden_layers"]))


def from_hf_config(config: str | os.PathLike | dict) -> DSAGeometry:
    """Geometry from a Hugging Face ``config.json`` (path, or the parsed dict).

    Multimodal configs keep the language model under ``text_config``; that part is read. Defaults
    follow transformers 5.24.0: a ``glm5_next`` config without ``index_kpool`` pools by 16, without
    ``qk_rope_head_dim`` has no RoPE part, and its attention ignores rope parameters (NoPE: the softmax
    scale is qk_head_dim ** -0.5).
    """
    if not isinstance(config, dict):
        with open(config) as f:
            config = json.load(f)
    cfg = config.get("text_config", config)
    try:
        # a hand-written multimodal config may name its type only at the top level
        model_type = cfg.get("model_type") or config.get("model_type", "")
        is_glm5_next = "glm5_next" in model_type
        # Glm5NextTextConfig's own defaults when the fields are absent (NoPE, pools of 16)
        rope = cfg.get("qk_rope_head_dim", 0 if is_glm5_next else 64)
        kpool = cfg.get("index_kpool", 16 if is_glm5_next else 1)
        if kpool > 1 and not cfg.get("index_kpool_always_select_tail", True):
            raise ValueError("config sets index_kpool_always_select_tail = false; dsattn's k-pool indexer "
                             "always appends the incomplete tail (SPEC section 5)")
        indexer_types = cfg.get("indexer_types") or _derived_indexer_types(cfg, model_type)
        rope_parameters = None if is_glm5_next else (cfg.get("rope_parameters") or cfg.get("rope_scaling"))
        return DSAGeometry(
            name=cfg.get("_name_or_path") or model_type or "hf",
            num_heads=cfg["num_attention_heads"],
            qk_nope_head_dim=cfg["qk_nope_head_dim"],
            qk_rope_head_dim=rope,
            v_head_dim=cfg["v_head_dim"],
            kv_lora_rank=cfg["kv_lora_rank"],
            index_n_heads=cfg["index_n_heads"],
            index_head_dim=cfg["index_head_dim"],
            index_topk=cfg["index_topk"],
            kpool=kpool,
            indexer_types=tuple(indexer_types),
            rope_parameters=rope_parameters,
        )
    except KeyError as e:
        raise ValueError(f"config is missing the field {e.args[0]!r}") from None
