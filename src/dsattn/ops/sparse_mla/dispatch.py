"""Head-dispatch variants of the sparse MLA kernels and the split-K plan, as pure functions.

A variant says how a kernel maps heads onto its matrix tiles (SPEC section 7):

    native   heads as they are: for <= 32 heads the keys sit on the M dimension of the products
             (S^T = K @ Q^T, heads padded in registers to 16 or 32 only); for >= 64 heads, blocks of
             64 heads on M (a head count that is not a multiple of 64 masks the last block).
    pad64    heads on M in one block of 64, the missing heads masked (what a kernel that only runs
             64 heads computes, without copying q or out anywhere).

Nothing here touches a GPU: the backend's policy and the workspace call these to plan.
"""
from __future__ import annotations

import os

import torch

from ..._checks import check_int
from ...formats import LATENT_DIM, KVLayout, as_layout

MAX_HEADS = 128
# Heads a keys-on-M program can carry (the N dimension of S^T = K @ Q^T).
MAX_NATIVE_SMALL = 32
DEFAULT_SM_COUNT = 132  # H200


def _check_heads(num_heads: int) -> None:
    if not isinstance(num_heads, int) or not 1 <= num_heads <= MAX_HEADS:
        raise ValueError(f"num_heads must be an int in [1, {MAX_HEADS}], got {num_heads!r}")


def _variants(num_heads: int) -> list[str]:
    _check_heads(num_heads)
    if num_heads <= MAX_NATIVE_SMALL:
        return ["native", "pad64"]
    if num_heads < 64:
        return ["pad64"]
    return ["native"]


def prefill_variants(num_heads: int) -> list[str]:
    """Head-dispatch variants of the prefill kernel for `num_heads` heads per rank."""
    return _variants(num_heads)


def decode_variants(num_heads: int, layout: "KVLayout | str" = KVLayout.FP8_DS_MLA) -> list[str]:
    """Head-dispatch variants of the decode kernel for `num_heads` heads per rank over `layout`."""
    as_layout(layout)
    return _variants(num_heads)


def default_variant(kernel: str, num_heads: int, num_tokens: int, sm_count: int = DEFAULT_SM_COUNT) -> str:
    """SPEC 7 fallback when no calibration table is at hand.

    Native when tokens > SM count (up to 16 heads) or > 2 x SM count (17 to 32 heads), else padded:
    with few tokens a padded program does more work per token but the tokens still fill the GPU.
    """
    if kernel not in ("prefill", "decode"):
        raise ValueError(f"kernel must be 'prefill' or 'decode', got {kernel!r}")
    variants = _variants(num_heads)
    if len(variants) == 1:
        return variants[0]
    threshold = sm_count if num_heads <= 16 else 2 * sm_count
    return "native" if num_tokens > threshold else "pad64"


def check_variant(variant: str | None, num_heads: int) -> None:
    if variant is not None and variant not in _variants(num_heads):
        raise ValueError(f"variant must be one of {_variants(num_heads)} for {num_heads} heads, got {variant!r}")


def heads_per_program(variant: str, num_heads: int) -> int:
    """Heads one program carries (the padded tile width): 16 or 32 native small, else 64."""
    if variant == "native" and num_heads <= MAX_NATIVE_SMALL:
        return 16 if num_heads <= 16 else 32
    return 64


# Keys a decode split walks at least: one 64-entry block. H200, fp8_ds_mla, topk 2048, `uniform` indices, 8..128 heads,
# both variants, 1 / 4 / 16 / 64 tokens, 1..32 parts, CUDA-graph replays (bench/decode_splits_sweep.py,
# bench/results/decode_splits_sweep_s39.json): this rule (one wave, 64 keys) picked the fastest count in 31 of the 32
# cases (16 heads native, 64 tokens: 2 parts, 1.08x the time of 4), on average 1.003x the best time; the plan before
# it (two waves, 256 keys) averaged 1.23x, worst 1.54x (1-4 tokens took 8 parts where 16-32 won: 64 heads, 1 token
# 0.0275 vs 0.0184 ms), and took twice the best count at 64 tokens (up to 1.20x).
DECODE_MIN_SPLIT_KEYS = 64


def decode_splits(num_tokens: int, num_heads: int, topk: int, variant: str, sm_count: int = DEFAULT_SM_COUNT) -> int:
    """How many programs share one token's top-k list in decode (1: no split-K, no scratch).

    Splitting pays only when the token x head-block programs cannot fill the GPU: the parts fill one wave
    (programs x splits <= sm_count), each keeping at least DECODE_MIN_SPLIT_KEYS of topk, as prefill_splits.
    """
    programs = max(1, num_tokens) * -(-num_heads // heads_per_program(variant, num_heads))
    return _one_wave_splits(programs, topk, sm_count, DECODE_MIN_SPLIT_KEYS)


def _one_wave_splits(programs: int, topk: int, sm_count: int, min_keys: int) -> int:
    """The largest power of two of parts with programs x parts <= sm_count and >= min_keys of topk a part (>= 1)."""
    splits = 1
    while programs * splits * 2 <= sm_count and topk // (splits * 2) >= min_keys:
        splits *= 2
    return splits


# Keys a prefill split walks at least (of topk: a grouped program's union list is at least as long when its tokens list
# topk valid entries): one 64-entry block of gluon_prefill. H200, the 64 cases of bench/prefill_splits_sweep.py (8..128
# heads, both variants, 1..1024 tokens, 1..32 splits; bench/results/prefill_splits_sweep_s38.json): with 64 the plan's
# count took 1.002x the best count's time on average (worst 1.093x), with 128 1.022x (1.179x), with 256 1.075x
# (1.447x: 1 or 8 tokens want 16-32 parts of 2048 keys); filling two waves instead of one was worse at every minimum
# (1.10-1.13x).
PREFILL_MIN_SPLIT_KEYS = 64


def prefill_programs(num_tokens: int, num_heads: int, variant: str) -> int:
    """Programs the Hopper prefill kernel (gluon_prefill) launches for one call without splitting: one a group of G
    tokens for 'native' at <= 32 heads (grouping.group_shape: G = 8 / 4 / 2 at 1..8 / 9..16 / 17..32 heads), else
    one a token and 64-head block."""
    num_tokens = max(1, num_tokens)
    if variant == "native" and num_heads <= MAX_NATIVE_SMALL:
        hpt = 8
        while hpt < num_heads:
            hpt *= 2
        return -(-num_tokens // (64 // hpt))
    return num_tokens * -(-num_heads // 64)


def prefill_splits(num_tokens: int, num_heads: int, topk: int, variant: str, sm_count: int = DEFAULT_SM_COUNT) -> int:
    """How many programs share one work item's entries in prefill (1: no split, no partials).

    A short prefill (a bf16 cache's decode step runs here too: SPEC 7) leaves most SMs idle: one program a group
    or a token walks its whole list alone. Splitting each list into parts that fill the SMs (prefill_programs x
    splits <= sm_count, one program an SM) cuts that walk; each part keeps at least PREFILL_MIN_SPLIT_KEYS of
    topk, and a combine launch merges the normalized partials. DSATTN_PREFILL_SPLITS (a whole number >= 1) forces
    the count, for A/B runs; the plan reads it when asked, so a workspace sized from prefill_split_spec gets it too.
    """
    forced = os.environ.get("DSATTN_PREFILL_SPLITS", "").strip()
    if forced:
        if not forced.isdigit() or not 1 <= int(forced) <= 64:
            raise ValueError(f"DSATTN_PREFILL_SPLITS must be a whole number in 1..64, got {forced!r}")
        return int(forced)
    return _one_wave_splits(prefill_programs(num_tokens, num_heads, variant), topk, sm_count, PREFILL_MIN_SPLIT_KEYS)


def prefill_split_tokens_max(sm_count: int = DEFAULT_SM_COUNT) -> int | None:
    """The most tokens a prefill call can have and still split under prefill_splits' own rule (a program packs at
    most 8 tokens, and a split needs programs x 2 <= sm_count), or None when DSATTN_PREFILL_SPLITS forces a count
    (any call may split then): a workspace sizes the partials over the call sizes up to this one."""
    if os.environ.get("DSATTN_PREFILL_SPLITS", "").strip():
        return None
    return 8 * (sm_count // 2)


def prefill_split_spec(num_tokens: int, num_heads: int, topk: int, variant: str | None = None,
                       sm_count: int = DEFAULT_SM_COUNT) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """Scratch of a split prefill (sparse_mla_prefill's split_scratch): [] when prefill_splits is 1, else the two
    tensors of decode_scratch_spec's form, [((T, splits, H, 512), float32), ((T, splits, H), float32)]
    (partial outputs normalized per split, partial lse). `variant` None means default_variant("prefill", ...)."""
    num_tokens = check_int("num_tokens", num_tokens, lo=0)
    topk = check_int("topk", topk, lo=0)
    sm_count = check_int("sm_count", sm_count, lo=1)
    _check_heads(num_heads)
    variant = variant or default_variant("prefill", num_heads, num_tokens, sm_count)
    check_variant(variant, num_heads)
    splits = prefill_splits(num_tokens, num_heads, topk, variant, sm_count)
    if splits == 1 or num_tokens == 0:
        return []
    return [((num_tokens, splits, num_heads, LATENT_DIM), torch.float32),
            ((num_tokens, splits, num_heads), torch.float32)]


def decode_scratch_spec(num_tokens: int, num_heads: int, topk: int, variant: str | None = None,
                        layout: "KVLayout | str" = KVLayout.FP8_DS_MLA,
                        sm_count: int = DEFAULT_SM_COUNT) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """Scratch the decode kernel needs for split-K partials: [] when it does not split, else

        [((num_tokens, splits, num_heads, 512), float32),   partial outputs, normalized per split
         ((num_tokens, splits, num_heads), float32)]        partial lse (natural log)

    `variant` None means the default_variant for these sizes.
    """
    num_tokens = check_int("num_tokens", num_tokens, lo=0)
    topk = check_int("topk", topk, lo=0)
    sm_count = check_int("sm_count", sm_count, lo=1)
    as_layout(layout)
    _check_heads(num_heads)
    variant = variant or default_variant("decode", num_heads, num_tokens, sm_count)
    check_variant(variant, num_heads)
    splits = decode_splits(num_tokens, num_heads, topk, variant, sm_count)
    if splits == 1:
        return []
    return [((num_tokens, splits, num_heads, LATENT_DIM), torch.float32),
            ((num_tokens, splits, num_heads), torch.float32)]


# sparse_mla_prefill's row_scratch (session 68): the rows converted once to what gluon_prefill's producer converts
# each gathered stage into (fp16 x 2^-8 latents), so that the kernel runs without its conversion pass (config pre16;
# gluon_pair at 1-32 heads). The conversion costs a pass over the rows (kernels.f16_rows: 20 us for 16384 rows, 106 us
# for 131072 on an H100, bench/s68_f16rows_tune.py); the kernel saves per (token x head). Session 68 set the ratio to
# 2 against the split consumer over converted rows (16 heads s_q 1024, ratio 1: 0.999x). With gluon_pair over them,
# converting against not, as CUDA-graph replays (H100, session 71, bench/s70/convert_ratio.py GRAPH=1,
# bench/results/s71/s71_ratio_graph_h100.log; issue 3's prefill case, 16384 rows): 16 heads s_q 1024 (ratio 1)
# 1.176x, 32 heads s_q 512 (1) 1.145x, 8 heads s_q 2048 (1) 1.190x, 8 heads s_q 1024 (0.5) 1.109x. Eager calls back
# to back the last lost (0.847x, session 70), and converting adds host work (32 heads s_q 1024: 0.242 against 0.160
# ms a call, bench/s70/host_profile.py, s71_host_profile_h100.log), so the ratio is 1, not lower.
PREFILL_CONVERT_RATIO = 1.0  # convert when tokens x heads x min(topk, 2048) / 2048 >= this x rows


def prefill_converts_rows(num_tokens: int, num_heads: int, topk: int, num_rows: int) -> bool:
    """Whether sparse_mla_prefill converts the rows into its row_scratch (when given and gluon_prefill runs the
    call): when the call's (token x head) work, in top-k units of 2048, is at least PREFILL_CONVERT_RATIO x the rows
    converted. Issue 3's case (16384 rows, s_q 1024): 8 heads no, 16-128 heads yes (16 heads 1.176x by graph replays,
    H100, session 71; 64 / 128 heads 1.139x / 1.167x by `dsattn bench ab`, session 68)."""
    return num_tokens * num_heads * min(topk, 2048) >= PREFILL_CONVERT_RATIO * 2048 * num_rows


def prefill_row_spec(num_rows: int, d_qk: int = 576) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """sparse_mla_prefill's row_scratch for a call over num_rows rows (kv's N, or with key_slots their NK):
    [((num_rows, d_qk), bfloat16), ((num_rows,), int32)]: the converted rows (fp16 latent bits in a bf16-typed tensor)
    and, with key_slots, each key's row or -1."""
    num_rows = check_int("num_rows", num_rows, lo=0)
    if d_qk not in (512, 576):
        raise ValueError(f"d_qk must be 512 or 576, got {d_qk!r}")
    return [((num_rows, d_qk), torch.bfloat16), ((num_rows,), torch.int32)]
