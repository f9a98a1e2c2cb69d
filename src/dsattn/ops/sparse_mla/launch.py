"""Kernel launches for sparse MLA: views of the cache rows, tile configs, grids. Nothing is allocated here:
outputs and split-K scratch come from the caller (sparse_mla_prefill / sparse_mla_decode).
"""
from __future__ import annotations

import dataclasses

import torch

from ...formats import FP8, LATENT_DIM, KVLayout
from .._triton import allow_runtime_loop_bounds, interpreting, triton
from .dispatch import heads_per_program
from .kernels import combine_splits_kernel, sparse_mla_kernel

LOG2E = 1.4426950408889634


@dataclasses.dataclass(frozen=True)
class TileConfig:
    """One launch configuration: keys per block, warps, pipeline stages, and how rows are fetched ahead
    (prefetch: the next block's rows are loaded into registers while a block computes; else Triton's
    software pipeliner stages them through shared memory, num_stages deep)."""
    block_n: int = 32
    num_warps: int = 8
    num_stages: int = 2
    prefetch: bool = False
    keys_m: bool | None = None  # force the orientation (None: keys on M below 64 heads per program)


# Defaults per (heads per program, fp8 rows?): the fastest of bench/mla_sweep.py's configs on the H200.
# (32, fp8) and the 64-head ones: bench/results/sparse_mla_sweep.json (device call 2); the others came
# from call 3's sweep, which was not kept (notes/sparse_mla.md). Each default's time at the benchmark
# sizes: bench/results/sparse_mla.json. bench/mla_compile_check.py shows registers, spills and shared
# memory of each. 16- and 32-head programs put keys on M, 64-head programs heads.
CONFIGS: dict[tuple[int, bool], TileConfig] = {
    (16, False): TileConfig(block_n=64, num_warps=4, num_stages=2),
    (16, True): TileConfig(block_n=32, num_warps=4, num_stages=3),
    (32, False): TileConfig(block_n=64, num_warps=8, num_stages=2),
    (32, True): TileConfig(block_n=16, num_warps=4, num_stages=2),
    (64, False): TileConfig(block_n=64, num_warps=8, num_stages=2),
    (64, True): TileConfig(block_n=64, num_warps=8, num_stages=2),
}


def default_config(variant: str, num_heads: int, layout: KVLayout) -> TileConfig:
    """The launch configuration the public functions use (for the record in benchmark results)."""
    return CONFIGS[(heads_per_program(variant, num_heads), layout.is_fp8)]


def _row_views(flat: torch.Tensor, layout: KVLayout, d_qk: int):
    """(latent, scales, rope) views of the cache rows with their row strides in elements.

    flat [N, row] (bf16 values or uint8 bytes). Unused views alias `flat`.
    """
    if layout is KVLayout.BF16:
        rope = flat[:, LATENT_DIM:] if d_qk > LATENT_DIM else flat
        return (flat, flat.stride(0)), (flat, 0), (rope, flat.stride(0))
    row_bytes = flat.stride(0)
    if row_bytes % 16:
        raise ValueError(f"kv_cache slots must be 16-byte aligned, got a stride of {row_bytes} bytes")
    lat = flat.view(FP8)
    scales = flat.view(torch.float32)[:, LATENT_DIM // 4:]
    rope = flat.view(torch.bfloat16)[:, (LATENT_DIM + 16) // 2:] if layout is KVLayout.FP8_DS_MLA else flat
    return (lat, row_bytes), (scales, row_bytes // 4), (rope, row_bytes // 2)


def _config(heads_per_program: int, layout: KVLayout, config: TileConfig | None) -> TileConfig:
    if config is not None:
        return config
    cfg = CONFIGS[(heads_per_program, layout.is_fp8)]
    # The interpreter runs one block at a time on the CPU: small blocks keep the tests quick; the
    # arithmetic and the prefetch structure stay the GPU's.
    return dataclasses.replace(cfg, block_n=16, num_stages=1) if interpreting() else cfg


def run_attention(q, flat, layout: KVLayout, indices, sm_scale, topk_length, out, lse, variant: str,
                  splits: int = 1, part_o=None, part_lse=None, config: TileConfig | None = None) -> None:
    """Sparse MLA over rows `flat` [N, row] for every token of q [T, H, D_qk] into out / lse.

    With splits > 1 each program walks topk / splits entries and writes part_o [T, splits, H, 512] /
    part_lse [T, splits, H] (fp32), then one combine launch writes out / lse.
    """
    if interpreting():
        allow_runtime_loop_bounds()  # the kernels loop to topk_length, a runtime scalar
    t, h, d = q.shape
    topk = indices.shape[1]
    hp = heads_per_program(variant, h)
    cfg = _config(hp, layout, config)
    keys_m = hp < 64 if cfg.keys_m is None else cfg.keys_m
    (lat, s_lat), (scales, s_scale), (rope, s_rope) = _row_views(flat, layout, d)
    if splits > 1:
        keys_per_split = -(-topk // splits)
        keys_per_split = -(-keys_per_split // cfg.block_n) * cfg.block_n
        o_dst, o_st, o_ss, o_sh = part_o, part_o.stride(0), part_o.stride(1), part_o.stride(2)
        l_dst, l_st, l_ss, l_sh = part_lse, part_lse.stride(0), part_lse.stride(1), part_lse.stride(2)
    else:
        keys_per_split = topk
        o_dst, o_st, o_ss, o_sh = out, out.stride(0), 0, out.stride(1)
        l_dst, l_st, l_ss, l_sh = lse, lse.stride(0), 0, lse.stride(1)
    lengths = topk_length if topk_length is not None else indices
    grid = (t, -(-h // hp), splits)
    sparse_mla_kernel[grid](
        q, q.stride(0), q.stride(1),
        lat, scales, rope,
        indices, indices.stride(0), lengths,
        o_dst, o_st, o_ss, o_sh,
        l_dst, l_st, l_ss, l_sh,
        flat.shape[0], h, topk, keys_per_split, float(sm_scale) * LOG2E,
        s_lat, s_scale, s_rope,
        layout.is_fp8, d > LATENT_DIM, topk_length is not None,
        keys_m, hp, cfg.block_n, cfg.prefetch,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    if splits > 1:
        combine_splits_kernel[(t, h)](part_o, part_lse, out, out.stride(0), out.stride(1), lse, lse.stride(0),
                                      lse.stride(1), h, splits, triton.next_power_of_2(splits), num_warps=4)


def launch_prefill(q, kv, indices, sm_scale, topk_length, out, lse, variant, config=None):
    """kv [N, D_qk] bf16 flat view; the rest as sparse_mla_prefill (already validated)."""
    run_attention(q, kv, KVLayout.BF16, indices, sm_scale, topk_length, out, lse, variant, config=config)


def launch_decode(q, kv_flat, indices, sm_scale, layout, topk_length, out, lse, variant, scratch_o, scratch_lse,
                  config=None):
    """kv_flat [slots, row] (bf16 or uint8 rows of `layout`); scratch_o / scratch_lse: split-K partials or None."""
    splits = scratch_o.shape[1] if scratch_o is not None else 1
    run_attention(q, kv_flat, layout, indices, sm_scale, topk_length, out, lse, variant, splits, scratch_o,
                  scratch_lse, config=config)

