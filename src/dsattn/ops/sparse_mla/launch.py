"""Kernel launches for sparse MLA: views of the cache rows, tile configs, grids. Nothing is allocated here:
outputs and split-K scratch come from the caller (sparse_mla_prefill / sparse_mla_decode).
"""
from __future__ import annotations

import dataclasses
import importlib
import os

import torch

from ...formats import FP8, LATENT_DIM, KVLayout
from .._fastlaunch import KernelPointer
from .._fastlaunch import launch as _fast
from .._triton import allow_runtime_loop_bounds, interpreting, next_pow2, sm_count
from .dispatch import DEFAULT_SM_COUNT, default_variant, heads_per_program, prefill_converts_rows
from .grouping import group_shape
from .kernels import combine_splits_kernel, f16_rows, sparse_mla_kernel

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

    flat [N, row] (bf16 values or uint8 bytes). Unused views alias `flat`. On a CUDA device the column views are
    KernelPointers at the same addresses and dtypes (the kernels take nothing else from them).
    """
    if layout is KVLayout.BF16:
        if d_qk <= LATENT_DIM:
            rope = flat
        elif flat.is_cuda:
            rope = KernelPointer(flat.data_ptr() + LATENT_DIM * 2, torch.bfloat16)
        else:
            rope = flat[:, LATENT_DIM:]
        return (flat, flat.stride(0)), (flat, 0), (rope, flat.stride(0))
    row_bytes = flat.stride(0)
    if row_bytes % 16:
        raise ValueError(f"kv_cache slots must be 16-byte aligned, got a stride of {row_bytes} bytes")
    has_rope = layout is KVLayout.FP8_DS_MLA
    if flat.is_cuda:
        base = flat.data_ptr()
        lat = KernelPointer(base, FP8)
        scales = KernelPointer(base + LATENT_DIM, torch.float32)
        rope = KernelPointer(base + LATENT_DIM + 16, torch.bfloat16) if has_rope else flat
    else:
        lat = flat.view(FP8)
        scales = flat.view(torch.float32)[:, LATENT_DIM // 4:]
        rope = flat.view(torch.bfloat16)[:, (LATENT_DIM + 16) // 2:] if has_rope else flat
    return (lat, row_bytes), (scales, row_bytes // 4), (rope, row_bytes // 2)


def _config(heads_per_program: int, layout: KVLayout, config: TileConfig | None) -> TileConfig:
    if config is not None:
        return config
    cfg = CONFIGS[(heads_per_program, layout.is_fp8)]
    # The interpreter runs one block at a time on the CPU: small blocks keep the tests quick; the
    # arithmetic and the prefetch structure stay the GPU's.
    return dataclasses.replace(cfg, block_n=16, num_stages=1) if interpreting() else cfg


IMPLS = ("auto", "triton", "gluon", "gluon_ws", "gluon64", "gluon_prefill", "gluon_rx")


@dataclasses.dataclass(frozen=True)
class GluonConfig:
    """Launch configuration of gluon_small.sparse_mla_small_kernel: keys per block (wgmma M) and how many
    blocks the shared-memory ring holds (stages - 1 in flight while one computes)."""
    block_n: int = 64
    stages: int = 3
    num_warps: int = 4  # 4: one warpgroup; 8: two, splitting S^T's heads and O^T's latent rows
    cvt_asm: int = 1    # 1 (the default since session 62; bf16 rows only): V converted by _bf16_to_f16_scaled (one
    #                     rounding, finite below 2^24; 0's compiled conversion gives inf from 65520). H100, bf16
    #                     decode 512 tokens: 1.080x / 1.077x / 1.037x over 0 at 8 / 16 / 32 heads
    #                     (bench/time_small_bf16.py, bench/results/small_cvt_asm_time_s62_h100.json)


SMEM_LIMIT = 232448  # bytes of shared memory one CTA may use on sm_90 (227 KB)


def gluon_smem_bytes(layout: KVLayout, d_qk: int, hp: int, block_n: int, stages: int) -> int:
    """Shared memory the Gluon kernel allocates (bench/mla_gluon_check.py reports the compiler's figure,
    256 bytes more for its reduction scratch)."""
    rope = d_qk > LATENT_DIM
    if layout.is_fp8:
        stage = block_n * (LATENT_DIM + 16 + (2 * 64 if rope and layout is KVLayout.FP8_DS_MLA else 0))
        fixed = block_n * LATENT_DIM * 2  # the fp16 tile
    else:
        stage = block_n * 2 * d_qk
        fixed = 0  # bf16 stages are converted in place
    fixed += hp * LATENT_DIM * 2 + (hp * 64 * 2 if rope else 0) + block_n * hp * 2
    return stages * stage + fixed


def gluon_config(layout: KVLayout, num_heads: int, d_qk: int = 576) -> GluonConfig:
    """Default launch of the Gluon kernel, the fastest of bench/mla_gluon_sweep.py's configs on the H200
    (bench/results/sparse_mla_gluon_sweep.json, 512 decode tokens / s_q 1024): fp8 rows one warpgroup,
    2 stages at 656 B (0.399 ms vs 0.410 at 3 stages, 8 heads), 3 at 528 B (0.380 vs 0.392 at 4);
    bf16 rows two warpgroups, 2 stages (32 heads: 0.968 vs 0.984 ms with one). Never more stages than
    shared memory holds."""
    hp = _gluon_hp(num_heads)
    if layout is KVLayout.FP8_DS_MLA_NOPE:
        d_qk = LATENT_DIM
    if layout.is_fp8:
        stages, warps = (2 if d_qk > LATENT_DIM else 3), 4
    else:
        stages, warps = 2, 8
    while stages > 2 and gluon_smem_bytes(layout, d_qk, hp, 64, stages) + 1024 > SMEM_LIMIT:
        stages -= 1
    return GluonConfig(64, stages, warps)


def gluon_preferred(layout: KVLayout, hp: int) -> bool:
    """Where 'auto' picks gluon_small (use_gluon asks it for programs of <= 32 heads only): fp8 rows (decode 8 heads
    0.399 vs 0.609 ms, 32 heads 0.457 vs 0.868; bench/results/sparse_mla_gluon_sweep.json, H200; gluon_rx takes
    those launches first under 'auto') and bf16 rows at every program size since session 63. bf16 decode against the
    Triton kernel, H100, `dsattn bench ab` (outputs bit-equal): 512 tokens 8 / 16 heads 0.405 / 0.412 vs 0.428 /
    0.428 ms, 2048 tokens 8 heads 1.554 vs 1.605 (bench/results/ab_s62_bf16dec_*_h100.json; gluon_small with
    cvt_asm); small batches within 2% (1 token 8 heads 0.981x, CI [0.959, 1.000], the one case where Triton was the
    faster; 16 tokens 8 heads 0.989x, 64 tokens 8 / 16 heads 1.001x / 0.995x, no difference detected:
    ab_s63_bf16dec_*_h100.json). At session 10 gluon_small was the slower at 16 heads (0.824 vs
    0.672 ms), so 'auto' ran Triton below 17 heads."""
    return layout.is_fp8 or hp <= 32


def sparse_mla_impl() -> str:
    """DSATTN_SPARSE_MLA_IMPL: 'auto' (default) or one kernel forced for A/B runs. 'auto' on sm_90: decode over fp8
    rows runs gluon_rx at <= 32 heads a program (rx_preferred; gluon_ws at 17..32 until session 59), gluon64 for
    64-head programs; bf16 decode rows gluon_small at <= 32 heads a program, Triton at 64; prefill the grouped
    gluon_prefill (GLUON_PREFILL_AUTO_HEADS, 'native' and 64-head programs). The forced values: 'triton';
    'gluon' (gluon_small wherever a program carries <= 32 heads); 'gluon_ws' / 'gluon_rx' (those kernels over
    fp8 rows at <= 32 heads a program, gluon_small over bf16 rows); 'gluon64'; 'gluon_prefill' (every prefill
    launch it takes). A forced value runs what 'auto' runs where its kernel does not apply, and raises ValueError
    where its kernel applies but cannot run (not sm_90, the interpreter, rows not 16-byte aligned)."""
    impl = os.environ.get("DSATTN_SPARSE_MLA_IMPL", "auto").strip().lower() or "auto"
    if impl not in IMPLS:
        raise ValueError(f"DSATTN_SPARSE_MLA_IMPL must be one of {list(IMPLS)}, got {impl!r}")
    return impl


_SM90: dict = {}
_HAVE_GLUON: dict = {}


def _sm90(device: torch.device) -> bool:
    """Whether `device` is a CUDA device of compute capability 9.x, cached per device index (the kernel choice asked
    torch.cuda.get_device_capability up to three times a call)."""
    if device.type != "cuda":
        return False
    i = device.index
    ok = _SM90.get(i) if i is not None else None
    if ok is None:
        ok = torch.cuda.get_device_capability(device)[0] == 9
        if i is not None:
            _SM90[i] = ok
    return ok


def _have_gluon(module: str) -> bool:
    """HAVE_GLUON of the kernel module `module` (imported on first use, then remembered)."""
    ok = _HAVE_GLUON.get(module)
    if ok is None:
        ok = _HAVE_GLUON[module] = importlib.import_module(f"{__package__}.{module}").HAVE_GLUON
    return ok


def gluon_usable(q, flat, layout: KVLayout, hp: int) -> bool:
    """Whether the Gluon few-head kernel can run this launch: a CUDA tensor on sm_90, Gluon importable,
    not interpreting, at most 32 heads per program, and rows whose addresses keep 16-byte copies."""
    if hp > 32 or q.device.type != "cuda" or interpreting():
        return False
    if not _have_gluon("gluon_small") or not _sm90(q.device):
        return False
    row_bytes = flat.stride(0) * flat.element_size()
    return row_bytes % 16 == 0 and flat.data_ptr() % 16 == 0 and flat.stride(-1) == 1


def use_gluon(q, flat, layout: KVLayout, hp: int, impl: str | None = None) -> bool:
    """The kernel choice. 'auto': Gluon where usable and preferred (gluon_preferred); 'triton': never;
    'gluon': wherever a program carries at most 32 heads, raising ValueError where it cannot run
    instead of falling back silently."""
    impl = impl or sparse_mla_impl()
    if impl in ("gluon64", "gluon_prefill"):
        impl = "auto"  # launches the 64-head / prefill kernel does not take run what auto runs
    if impl == "triton":
        return False
    if impl in ("gluon_ws", "gluon_rx"):
        impl = "gluon"  # launches the warp-specialized kernels do not take (bf16 rows) run gluon_small's
    ok = gluon_usable(q, flat, layout, hp)
    if impl == "gluon":
        if not ok:
            raise ValueError("DSATTN_SPARSE_MLA_IMPL=gluon but the Gluon kernel cannot run this launch "
                             f"(device {q.device}, {hp} heads per program, row stride {flat.stride(0)})")
        return True
    return ok and gluon_preferred(layout, hp)


def ws_preferred(layout: KVLayout, hp: int) -> bool:
    """Where 'auto' picks the warp-specialized kernel: fp8 rows, programs of at most 32 heads. Bit-identical to
    gluon_small and faster at every size measured, fp8 decode 512 tokens: 8 / 16 heads 0.356 / 0.358 ms vs 0.427 /
    0.433 (bench/results/ab_gluon_ws_h8.json, ab_gluon_ws_h16.json), 32 heads 0.354 vs 0.457 ms
    (bench/results/sparse_mla_gluon_ws_sweep.json, session 10; H200). run_attention asks gluon_rx first, which
    'auto' takes at <= 32 heads a program since session 59 (rx_preferred; <= 16 before, when gluon_ws ran 17..32), so
    'auto' no longer reaches gluon_ws; DSATTN_SPARSE_MLA_IMPL=gluon_ws forces it."""
    return layout.is_fp8 and hp <= 32


def _have_ws() -> bool:
    """gluon_ws imports more of Gluon (mbarrier, warp_specialize) than gluon_small: its own guard."""
    return _have_gluon("gluon_ws")


def use_gluon_ws(q, flat, layout: KVLayout, hp: int, impl: str | None = None) -> bool:
    """Whether run_attention launches gluon_ws.sparse_mla_ws_kernel: under 'auto' where usable and preferred
    (ws_preferred); under DSATTN_SPARSE_MLA_IMPL=gluon_ws over fp8 rows at most 32 heads per program,
    ValueError where that kernel cannot run (as 'gluon')."""
    impl = impl or sparse_mla_impl()
    if impl in ("gluon64", "gluon_prefill"):
        impl = "auto"  # launches the 64-head / prefill kernel does not take run what auto runs
    if impl == "auto":
        return ws_preferred(layout, hp) and gluon_usable(q, flat, layout, hp) and _have_ws()
    if impl != "gluon_ws" or not layout.is_fp8 or hp > 32:
        return False
    if not (gluon_usable(q, flat, layout, hp) and _have_ws()):
        raise ValueError("DSATTN_SPARSE_MLA_IMPL=gluon_ws but the Gluon kernels cannot run this launch "
                         f"(device {q.device}, {hp} heads per program, row stride {flat.stride(0)})")
    return True


def rx_preferred(layout: KVLayout, hp: int) -> bool:
    """Where 'auto' picks gluon_rx: fp8 rows, programs of at most 32 heads (8-head ping-pong programs at <= 8 heads).
    H200, decode 512 tokens, one process (bench/results/sparse_mla_rx_bench_final.json): fp8_ds_mla 8 heads 0.224 ms
    vs gluon_ws 0.326, 16 heads 0.282 vs 0.329; nope 8 heads 0.192 vs 0.295, 16 heads 0.266 vs 0.300. Since session 59
    it takes 32-head programs too (17..32 heads), with two ping-pong consumers (gluon_rx.rx_config; before, one
    consumer there: 0.463 vs gluon_ws's 0.353, bench/results/sparse_mla_rx_bench_c2.json): H100, against gluon_ws,
    fp8_ds_mla 512 / 2048 tokens 1.099x / 1.153x, nope 512 tokens 1.096x (bench/results/ab_s59_pp32_*.json)."""
    return layout.is_fp8 and hp <= 32


def use_gluon_rx(q, flat, layout: KVLayout, hp: int, impl: str | None = None) -> bool:
    """Whether run_attention launches gluon_rx.sparse_mla_rx_kernel: under 'auto' where usable and preferred
    (rx_preferred); under DSATTN_SPARSE_MLA_IMPL=gluon_rx over fp8 rows at most 32 heads per program, ValueError
    where that kernel cannot run (as 'gluon_ws'). Under gluon_rx also bf16 rows in 32-head programs (17..32 heads,
    'native'; prefill and decode): gluon_rxb.sparse_mla_rxb_kernel (session 61; 0.88-0.92x the grouped prefill on an
    H100 in session 62, so 'auto' never takes it)."""
    impl = impl or sparse_mla_impl()
    if impl in ("gluon64", "gluon_prefill"):
        impl = "auto"  # launches the 64-head / prefill kernel does not take run what auto runs
    if impl == "auto":
        if not (rx_preferred(layout, hp) and gluon_usable(q, flat, layout, hp)):
            return False
        return _have_gluon("gluon_rx")
    if impl != "gluon_rx" or hp > 32 or not (layout.is_fp8 or hp == 32):
        return False
    if not (gluon_usable(q, flat, layout, hp) and _have_gluon("gluon_rx")):
        raise ValueError("DSATTN_SPARSE_MLA_IMPL=gluon_rx but the Gluon kernels cannot run this launch "
                         f"(device {q.device}, {hp} heads per program, row stride {flat.stride(0)})")
    return True


def g64_usable(q, flat) -> bool:
    """Whether gluon64.sparse_mla_g64_kernel can run this launch: a CUDA tensor on sm_90, Gluon importable, not
    interpreting, rows whose addresses keep 16-byte alignment."""
    if q.device.type != "cuda" or interpreting():
        return False
    row_bytes = flat.stride(0) * flat.element_size()
    return (_have_gluon("gluon64") and _sm90(q.device) and row_bytes % 16 == 0
            and flat.data_ptr() % 16 == 0 and flat.stride(-1) == 1)


def use_gluon64(q, flat, layout: KVLayout, hp: int, impl: str | None = None) -> bool:
    """Whether run_attention launches gluon64.sparse_mla_g64_kernel: for 64-head programs over fp8 rows, under
    'auto' where usable (fp8 decode 512 tokens, 64 / 128 heads: 0.629 / 1.171 ms vs Triton 1.215 / 2.351,
    outputs within 4.9e-4; bench/results/ab_g64_h64.json, ab_g64_h128.json, H200) and under
    DSATTN_SPARSE_MLA_IMPL=gluon64, ValueError there where it cannot run (not sm_90, interpreter, rows whose
    addresses do not keep 16-byte alignment). 'triton' never takes it; the other forced values leave 64-head
    programs to auto."""
    impl = impl or sparse_mla_impl()
    if impl in ("gluon_prefill", "gluon", "gluon_ws", "gluon_rx"):
        impl = "auto"  # their kernels take decode programs of at most 32 heads (prefill: bf16 rows)
    if impl not in ("auto", "gluon64") or hp != 64 or not layout.is_fp8:
        return False
    ok = g64_usable(q, flat)
    if impl == "gluon64" and not ok:
        raise ValueError("DSATTN_SPARSE_MLA_IMPL=gluon64 but the 64-head Gluon kernel cannot run this launch "
                         f"(device {q.device}, {hp} heads per program, row stride {flat.stride(0)})")
    return ok


def kernel_name(q, flat, layout: KVLayout, variant: str | None, prefill: bool = False) -> str:
    """'gluon_prefill', 'gluon64', 'gluon_ws', 'gluon_rx', 'gluon_rxb', 'gluon' or 'triton': which kernel
    run_attention (prefill: launch_prefill) launches for these inputs now (for benchmark records). Pass the variant
    given to the public op: None resolves as there (default_variant, from the token count and the device's SMs), which
    is pad64 below ~one token a SM (session 36: a script that named "native" here recorded the wrong kernel)."""
    if variant is None:
        variant = default_variant("prefill" if prefill else "decode", q.shape[1], q.shape[0],
                                  sm_count(q.device, DEFAULT_SM_COUNT))
    if prefill and use_gluon_prefill(q, flat, variant):
        return "gluon_prefill"
    hp = heads_per_program(variant, q.shape[1])
    if use_gluon64(q, flat, layout, hp):
        return "gluon64"
    if hp <= 32 and use_gluon_rx(q, flat, layout, hp):
        return "gluon_rxb" if layout is KVLayout.BF16 else "gluon_rx"
    if hp <= 32 and use_gluon_ws(q, flat, layout, hp):
        return "gluon_ws"
    return "gluon" if hp <= 32 and use_gluon(q, flat, layout, hp) else "triton"


def kernel_args(q, flat, layout: KVLayout, indices, sm_scale, topk_length, out, lse, splits: int, part_o, part_lse,
                block_n: int) -> tuple:
    """The leading arguments every sparse MLA kernel (Triton, Gluon, Gluon warp-specialized) takes, in order:
    q and its strides; the latent / scale / RoPE row views; indices, their row stride and the lengths (indices
    stand in when topk_length is None); the destination (out / lse, or the split partials part_o / part_lse
    with their split strides); num_slots, heads, topk, keys per split (a multiple of block_n), the base-2
    softmax scale; the three row strides."""
    t, h, d = q.shape
    topk = indices.shape[1]
    (lat, s_lat), (scales, s_scale), (rope, s_rope) = _row_views(flat, layout, d)
    if splits > 1:
        keys_per_split = -(-topk // splits)
        keys_per_split = -(-keys_per_split // block_n) * block_n
        o = (part_o, part_o.stride(0), part_o.stride(1), part_o.stride(2))
        lo = (part_lse, part_lse.stride(0), part_lse.stride(1), part_lse.stride(2))
    else:
        keys_per_split = topk
        o = (out, out.stride(0), 0, out.stride(1))
        lo = (lse, lse.stride(0), 0, lse.stride(1))
    lengths = topk_length if topk_length is not None else indices
    return (q, q.stride(0), q.stride(1), lat, scales, rope, indices, indices.stride(0), lengths, *o, *lo,
            flat.shape[0], h, topk, keys_per_split, float(sm_scale) * LOG2E, s_lat, s_scale, s_rope)


def combine_splits(out, lse, part_o, part_lse, splits: int) -> None:
    """Merge split-K partials into out / lse (nothing when splits == 1)."""
    if splits > 1:
        t, h = out.shape[0], out.shape[1]
        _fast(combine_splits_kernel, (t, h), part_o, part_lse, out, out.stride(0), out.stride(1), lse, lse.stride(0),
              lse.stride(1), h, splits, next_pow2(splits), num_warps=4)


def _gluon_hp(num_heads: int) -> int:
    """Heads per Gluon program (the wgmma N): 16, or 32 for 17..32 heads (8 took more registers, same MMAs)."""
    return 16 if num_heads <= 16 else 32


def run_attention_gluon(q, flat, layout: KVLayout, indices, sm_scale, topk_length, out, lse, splits: int = 1,
                        part_o=None, part_lse=None, config: GluonConfig | None = None) -> None:
    """run_attention's contract through gluon_small.sparse_mla_small_kernel (native few-head variant)."""
    from .gluon_small import sparse_mla_small_kernel
    t, h, d = q.shape
    hp = _gluon_hp(h)
    cfg = config or gluon_config(layout, h, d)
    grid = (t, -(-h // hp), splits)
    _fast(
        sparse_mla_small_kernel, grid,
        *kernel_args(q, flat, layout, indices, sm_scale, topk_length, out, lse, splits, part_o, part_lse,
                     cfg.block_n),
        layout.is_fp8, d > LATENT_DIM, topk_length is not None,
        hp, cfg.block_n, cfg.stages,
        num_warps=cfg.num_warps, CVT_ASM=0 if layout.is_fp8 else cfg.cvt_asm,
    )
    combine_splits(out, lse, part_o, part_lse, splits)


def run_attention(q, flat, layout: KVLayout, indices, sm_scale, topk_length, out, lse, variant: str,
                  splits: int = 1, part_o=None, part_lse=None, config: TileConfig | None = None) -> None:
    """Sparse MLA over rows `flat` [N, row] for every token of q [T, H, D_qk] into out / lse.

    With splits > 1 each program walks topk / splits entries and writes part_o [T, splits, H, 512] /
    part_lse [T, splits, H] (fp32), then one combine launch writes out / lse.
    """
    if interpreting():
        allow_runtime_loop_bounds()  # the kernels loop to topk_length, a runtime scalar
    t, h, d = q.shape
    hp = heads_per_program(variant, h)
    impl = sparse_mla_impl() if config is None else None  # (read once a call)
    if config is None and use_gluon64(q, flat, layout, hp, impl):
        from .gluon64 import run_attention_g64
        run_attention_g64(q, flat, layout, indices, sm_scale, topk_length, out, lse, splits, part_o, part_lse)
        return
    if config is None and use_gluon_rx(q, flat, layout, hp, impl):
        if layout is KVLayout.BF16:
            from .gluon_rxb import run_attention_rxb
            run_attention_rxb(q, flat, indices, sm_scale, topk_length, out, lse, splits, part_o, part_lse)
            return
        from .gluon_rx import run_attention_rx
        run_attention_rx(q, flat, layout, indices, sm_scale, topk_length, out, lse, splits, part_o, part_lse)
        return
    if config is None and use_gluon_ws(q, flat, layout, hp, impl):
        from .gluon_ws import run_attention_ws
        run_attention_ws(q, flat, layout, indices, sm_scale, topk_length, out, lse, splits, part_o, part_lse)
        return
    if config is None and hp <= 32 and use_gluon(q, flat, layout, hp, impl):
        run_attention_gluon(q, flat, layout, indices, sm_scale, topk_length, out, lse, splits, part_o, part_lse)
        return
    cfg = _config(hp, layout, config)
    keys_m = hp < 64 if cfg.keys_m is None else cfg.keys_m
    grid = (t, -(-h // hp), splits)
    _fast(
        sparse_mla_kernel, grid,
        *kernel_args(q, flat, layout, indices, sm_scale, topk_length, out, lse, splits, part_o, part_lse,
                     cfg.block_n),
        layout.is_fp8, d > LATENT_DIM, topk_length is not None,
        keys_m, hp, cfg.block_n, cfg.prefetch,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    combine_splits(out, lse, part_o, part_lse, splits)


# Head counts (per rank) at which 'auto' runs the grouped prefill kernel: every count. H200, bf16, overlap indices,
# s_kv 16384, one process beside Triton (bench/results/sparse_mla_final_prefill_1024.json, _8192.json): s_q 1024
# 8 / 16 / 32 / 64 / 128 heads 0.541 / 0.528 / 0.799 / 0.814 / 1.654 ms vs Triton (or gluon_small at 32) 0.674 /
# 0.668 / 1.250 / 1.577 / 3.003; s_q 8192 2.896 / 3.985 / 5.963 / 6.371 / 12.920 vs 5.155 / 5.174 / 9.641 / 11.456 /
# 22.726.
GLUON_PREFILL_AUTO_HEADS: frozenset[int] = frozenset(range(1, 129))


def gluon_prefill_preferred(num_heads: int) -> bool:
    """Where 'auto' picks gluon_prefill (GLUON_PREFILL_AUTO_HEADS)."""
    return num_heads in GLUON_PREFILL_AUTO_HEADS


def use_gluon_prefill(q, kv, variant: str, impl: str | None = None) -> bool:
    """Whether launch_prefill runs gluon_prefill.sparse_mla_prefill_kernel: under DSATTN_SPARSE_MLA_IMPL=gluon_prefill,
    or under 'auto' (so also under gluon64, and under gluon / gluon_ws / gluon_rx for programs of over 32 heads, which
    their kernels do not take) at the head counts of GLUON_PREFILL_AUTO_HEADS where it can run (every count), for both
    variants: 'native' groups G tokens x HPT heads a program, 'pad64' runs one token's heads as a 64-row program (the
    rows past H masked: no grouping, one program a token, for short prefills where G-token groups leave SMs idle).
    ValueError where it cannot run (not sm_90, interpreter, CPU, rows whose addresses do not keep 16-byte copies)."""
    impl = impl or sparse_mla_impl()
    if impl == "gluon64" or (impl in ("gluon", "gluon_ws", "gluon_rx") and heads_per_program(variant, q.shape[1]) > 32):
        # gluon64 takes fp8 rows only, the others programs of at most 32 heads: the rest run what auto runs
        impl = "auto"
    if impl not in ("gluon_prefill", "auto"):
        return False
    if impl == "auto" and not gluon_prefill_preferred(q.shape[1]):
        return False
    ok = q.device.type == "cuda" and not interpreting()
    if ok:
        row_bytes = kv.stride(0) * kv.element_size()
        ok = (_have_gluon("gluon_prefill") and _sm90(q.device) and row_bytes % 16 == 0
              and kv.data_ptr() % 16 == 0 and kv.stride(-1) == 1)
    if impl == "auto":
        return ok
    if not ok:
        raise ValueError("DSATTN_SPARSE_MLA_IMPL=gluon_prefill but the grouped prefill kernel cannot run this launch "
                         f"(device {q.device}, {q.shape[1]} heads, kv row stride {kv.stride(0)})")
    return True


def launch_prefill(q, kv, indices, sm_scale, topk_length, out, lse, variant, config=None, scratch=None, part_o=None,
                   part_lse=None, key_slots=None, rows=None, kmap=None):
    """kv [N, D_qk] bf16 flat view; the rest as sparse_mla_prefill (already validated). scratch: the grouped
    prefill kernel's (entries, masks, counts) (grouping.prefill_scratch_spec) or None (allocated when that kernel
    runs and needs them); other kernels ignore it. part_o / part_lse: split partials [T, S, H, 512] / [T, S, H]
    (dispatch.prefill_split_spec) or None; S > 1 runs S programs over each work item's list and one combine.
    key_slots: indices are keys (sparse_mla_prefill): the grouped Gluon kernel builds its lists over them; any
    other kernel reads the slots looked up into a new [T, K] tensor. rows / kmap: sparse_mla_prefill's row_scratch
    (or None): where the Gluon kernel runs the call with its fp16 default (f16 1) and
    dispatch.prefill_converts_rows agrees, the rows are converted into it first (kernels.f16_rows) and the kernel
    runs over them with config pre16 (gluon_prefill.rows_config: and gluon_pair's schedule where it is faster); with
    key_slots the keys then read rows[key] directly (kmap: the key, or -1
    where its slot is outside kv, in place of key_slots)."""
    splits = part_o.shape[1] if part_o is not None else 1
    gluon = config is None and use_gluon_prefill(q, kv, variant)
    pf_config = None
    n = kv.shape[0] if key_slots is None else key_slots.shape[0]
    if gluon and rows is not None and prefill_converts_rows(q.shape[0], q.shape[1], indices.shape[1], n):
        from .gluon_prefill import prefill_config, rows_config
        base = prefill_config(q.shape[1], q.shape[2])
        if base.f16 and not base.pre16:
            # (session 78 launched this beside the first union lists by programmatic dependent launch: they overlapped,
            # each slowed, 32 heads s_q 1024 0.999x / 8192 1.007x, bench/results/s78/; removed, code at da0dd9b)
            f16_rows(kv, rows, key_slots, kmap)
            # (no view where the scratch is the call's size: a slice is host time, ~1-2 us a tensor)
            kv, pf_config = (rows if rows.shape[0] == n else rows[:n]), rows_config(base, q.shape[1], q.shape[2],
                                                                                     variant)
            key_slots = None if key_slots is None else (kmap if kmap.shape[0] == n else kmap[:n])
    if key_slots is not None and not (gluon and variant != "pad64" and group_shape(q.shape[1])[1] > 1):
        from . import slots_of_keys
        indices, key_slots = slots_of_keys(indices, key_slots), None
    if gluon:
        from .gluon_prefill import run_prefill_gluon
        run_prefill_gluon(q, kv, indices, sm_scale, topk_length, out, lse, scratch, config=pf_config,
                          pad64=variant == "pad64", splits=splits, part_o=part_o, part_lse=part_lse,
                          key_slots=key_slots)
        return
    run_attention(q, kv, KVLayout.BF16, indices, sm_scale, topk_length, out, lse, variant, splits, part_o, part_lse,
                  config=config)


def launch_decode(q, kv_flat, indices, sm_scale, layout, topk_length, out, lse, variant, scratch_o, scratch_lse,
                  config=None):
    """kv_flat [slots, row] (bf16 or uint8 rows of `layout`); scratch_o / scratch_lse: split-K partials or None."""
    splits = scratch_o.shape[1] if scratch_o is not None else 1
    run_attention(q, kv_flat, layout, indices, sm_scale, topk_length, out, lse, variant, splits, scratch_o,
                  scratch_lse, config=config)

