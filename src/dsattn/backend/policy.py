"""Which path a layer runs (SPEC 7 table) and which head variant each kernel call uses: pure functions
of their arguments, unit-tested without a GPU.

Calibration table (written by ``dsattn calibrate``, read by ``load_table``)::

    {"sm_count": 132,
     "table": {"decode/fp8_ds_mla": {"8": [{"max_tokens": 90, "variant": "pad64"},
                                          {"max_tokens": null, "variant": "native"}], ...},
               "prefill": {...}}}

A kernel's key is ``prefill``, or ``decode/<layout>`` (``decode`` alone is accepted as a fallback key
for every layout). Buckets are in increasing ``max_tokens``; a call with ``tokens`` uses the first
bucket with ``tokens <= max_tokens`` (null: no bound; past the last bound, the last bucket). Head counts
missing from the table, or a winner the kernel no longer offers, fall back to SPEC 7's thresholds
(``ops.sparse_mla.dispatch.default_variant``).
"""
from __future__ import annotations

import enum
import json
import os

from ..formats import KVLayout, as_layout
from ..ops.sparse_mla.dispatch import DEFAULT_SM_COUNT, decode_variants, default_variant, prefill_variants

KERNELS = ("prefill", "decode")
# SPEC 7: from this many heads per rank on, an fp8 cache's prefills go through the gathered bf16 context.
GATHER_MIN_HEADS = 32


class Path(str, enum.Enum):
    """The three paths of SPEC 7."""

    BF16_PREFILL = "bf16_prefill"      # bf16 cache: every token through the prefill kernel, flat cache view
    FP8_MIXED = "fp8_mixed"            # fp8, < 32 heads: every token through the decode kernel
    FP8_GATHERED = "fp8_gathered"      # fp8, >= 32 heads: decodes via decode, prefills over gathered bf16 context


def choose_path(layout: KVLayout | str, heads: int) -> Path:
    """The path for a KV cache layout and heads per rank (SPEC 7 table)."""
    layout = as_layout(layout)
    if not isinstance(heads, int) or not 1 <= heads <= 128:
        raise ValueError(f"heads must be an int in [1, 128], got {heads!r}")
    if not layout.is_fp8:
        return Path.BF16_PREFILL
    return Path.FP8_MIXED if heads < GATHER_MIN_HEADS else Path.FP8_GATHERED


def kernel_key(kernel: str, layout: KVLayout | str | None = None) -> str:
    """Table key of a kernel: 'prefill' or 'decode/<layout>'."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "decode" and layout is not None:
        return f"decode/{as_layout(layout).value}"
    return kernel


def variants(kernel: str, heads: int, layout: KVLayout | str | None = None) -> list[str]:
    """Variants the kernel offers for `heads` heads."""
    if kernel == "prefill":
        return prefill_variants(heads)
    return decode_variants(heads, layout or KVLayout.FP8_DS_MLA)


def choose_variant(kernel: str, heads: int, tokens: int, table: dict | None = None,
                   sm_count: int = DEFAULT_SM_COUNT, layout: KVLayout | str | None = None) -> str:
    """Head variant for one call of `kernel` ('prefill' or 'decode') with `tokens` query rows.

    table: a calibration table (``load_table``), or None for SPEC 7's fallback thresholds.
    layout: the decode kernel's cache layout (selects the table entry measured on it).
    """
    key = kernel_key(kernel, layout)
    if not isinstance(tokens, int) or tokens < 0:
        raise ValueError(f"tokens must be an int >= 0, got {tokens!r}")
    offered = variants(kernel, heads, layout)
    if len(offered) == 1:
        return offered[0]
    if table:
        entries = table.get("table", {})
        buckets = (entries.get(key) or entries.get(kernel) or {}).get(str(heads))
        if buckets:
            pick = buckets[-1]["variant"]
            for b in buckets:
                if b["max_tokens"] is None or tokens <= b["max_tokens"]:
                    pick = b["variant"]
                    break
            if pick in offered:
                return pick
    return default_variant(kernel, heads, tokens, sm_count)


def bf16_decode_variant(heads: int) -> str:
    """The prefill kernel's variant for a bf16 cache's decode rows (SPEC 7 runs them through it too). Each decode row
    is its own request's: the rows share no keys, so 'native' (which groups G neighbouring tokens a program over the
    union of their lists, G = 8 at 8 heads) would gather and score G lists for every token; 'pad64' runs one token a
    program, alone. The calibration table's 'prefill' entries were measured on one request's rows (`overlap`
    indices), where grouping pays; they do not apply here. H200, a layer's CUDA-graph replay over a bf16 cache, 128
    decodes (`dsattn bench serve --graph`): glm-5 TP8 1.037 ms as one call with the table's 'native', 0.190 apart with
    'pad64'; deepseek-v3.2 TP8 0.770 / 0.202 (bench/results/serve_bf16_s45_together.json, _apart.json; glm-5 0.297 in
    session 15, serve_s15_graph.json, while the table sent 128 rows to pad64: session 38's calibration moved its switch
    to native from 362 to 90 tokens at 8 heads, calibration_h200.json). The grouped time went to the union lists' hash
    build (821 of 1031 us in glm-5's layer, bench/logs/s45/d/decode_layer_bf16_s45_bf16together.log: 16 groups of 8
    unrelated lists fill their tables). From 64 heads the kernel runs one token's heads a program
    either way ('native')."""
    offered = prefill_variants(heads)
    return "pad64" if "pad64" in offered else offered[0]


# The largest flat source (slots) over which a 17-32-head prefill call keeps 'native' (G 2 tokens a program) where the
# dense union lists reach further (an sm_90 GPU since session 46): measured native faster than pad64 at 131072 slots,
# not past it (prefill_variant_for_slots).
NATIVE_G2_MAX_SLOTS = 131072


def prefill_variant_for_slots(variant: str, heads: int, num_slots: int, topk: int, device) -> str:
    """'pad64' in place of 'native' for a prefill call at 17-32 heads (G 2 tokens a program) whose flat source of
    num_slots rows (a bf16 cache's flat view in serving, or a gathered context) is past what grouping pays for: past
    the dense union lists' reach on `device` (ops.sparse_mla.grouping.dense_reach at G 2: 65536 slots at topk 2048 on
    the CPU's kernels, 524288 on an sm_90 GPU since session 46), where the hash path would build them, or past
    NATIVE_G2_MAX_SLOTS; any other variant as given.
    H200, `overlap` indices (the calibration table's inputs): over 16384 slots native with hash union lists 0.743 ms
    against pad64's 0.696 at s_q 1024 (CUDA-graph replays, bench/results/prefill_overlap_s45.json), 5.563 against
    5.457 at 8192 (eager, sparse_mla_s45_prefill_hash.json), and up to 2.38x pad64's time as neighbouring lists share
    less (1.642 vs 0.690 ms with random lists, s_q 1024); over 131072 slots with the dense lists native 0.651 / 5.060
    ms against pad64's 0.702 / 5.417 at s_q 1024 / 8192 (eager, sparse_mla_s46_prefill_kv131072_auto.json; with hash
    lists 0.945 / 7.164, _hash.json). Past 131072 the dense build grows with the slots (G 2, s_q 8192: 329 us at 131072,
    631 at 262144, 1389 at 524288; bench/logs/s46/a) and the prefill was not measured, so pad64 runs there. At 8 and 16
    heads grouping paid even over hash union lists (0.352 / 0.490 ms against pad64's 0.659 / 0.669 over 16384 slots;
    over 131072 at s_q 8192 3.667 / 4.826 against 5.106 / 5.199), so they keep it."""
    if variant != "native" or not 17 <= heads <= 32:
        return variant
    from ..ops.sparse_mla.grouping import dense_reach, group_shape
    reach = min(dense_reach(group_shape(heads)[1], topk, device), NATIVE_G2_MAX_SLOTS)
    return variant if num_slots <= reach else "pad64"


def buckets_from_winners(winners: list[tuple[int, str]]) -> list[dict]:
    """Buckets from measured (tokens, winning variant) pairs, sorted by tokens.

    The switch between two measured sizes goes at their geometric mean; equal neighbours merge.
    """
    winners = sorted(winners)
    out: list[dict] = []
    for i, (tokens, variant) in enumerate(winners):
        bound = None if i + 1 == len(winners) else int((tokens * winners[i + 1][0]) ** 0.5)
        if out and out[-1]["variant"] == variant:
            out[-1]["max_tokens"] = bound
        else:
            out.append({"max_tokens": bound, "variant": variant})
    return out


def load_table(path: str | os.PathLike) -> dict:
    """A calibration table from its JSON file (ValueError if it is not one)."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or not isinstance(data.get("table"), dict):
        raise ValueError(f"path must be a calibration table with a 'table' object, got {os.fspath(path)!r}")
    for key, per_heads in data["table"].items():
        for heads, buckets in per_heads.items():
            if not buckets or any(not {"max_tokens", "variant"} <= set(b) for b in buckets):
                raise ValueError(f"table[{key!r}][{heads!r}] must be a list of {{max_tokens, variant}} buckets")
    return data
