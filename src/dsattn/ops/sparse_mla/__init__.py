"""Sparse MLA attention (SPEC section 3): the public functions.

Names and argument order follow FlashMLA (``flash_mla_sparse_fwd``, ``flash_mla_with_kvcache``) where
the meaning is the same. Both functions are ``torch.library`` custom ops (``dsattn::sparse_mla_prefill``,
``dsattn::sparse_mla_decode``) that write into ``out`` / ``lse`` and have fake implementations, so they
trace under ``torch.compile`` and capture in CUDA graphs; in eager mode the public functions run the ops' bodies
directly (the dispatcher was ~60 us of host time a call on the 2-core CPU box: with the kernels stubbed out a public
decode call took 84 us through it, 21 us without, prefill 76 and 14; not yet measured on the H200). Without a GPU (and without
``TRITON_INTERPRET=1``) they compute through the reference twin, so the package runs everywhere.

Every argument is checked before anything runs; bad input raises ValueError naming the argument.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch

from ..._checks import check_positive, check_same_device, check_tensor
from ...formats import LATENT_DIM, KVLayout, infer_layout
from .._eager import op_or_body
from .._triton import kernels_available, sm_count
from .dispatch import (DEFAULT_SM_COUNT, check_variant, decode_scratch_spec, decode_splits, decode_variants,
                       default_variant, prefill_row_spec, prefill_split_spec, prefill_splits, prefill_variants)
from .grouping import prefill_scratch_spec
from .reference import sparse_mla_paged_reference, sparse_mla_reference

__all__ = ["sparse_mla_prefill", "sparse_mla_decode", "prefill_variants", "decode_variants",
           "decode_scratch_spec", "prefill_scratch_spec", "prefill_split_spec", "prefill_row_spec", "default_variant"]

D_QK = (512, 576)
_FP32_MAX = torch.finfo(torch.float32).max


# ---------------------------------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------------------------------

def _check_common(q, indices, sm_scale, d_v, topk_length, out, lse):
    """Checks shared by prefill and decode; returns indices as [T, K]."""
    check_tensor("q", q, dtype=torch.bfloat16, ndim=3)
    t, h, d = q.shape
    if d not in D_QK:
        raise ValueError(f"q must have D_qk 512 or 576 (last dim), got {d}")
    if not 1 <= h <= 128:
        raise ValueError(f"q must have 1 to 128 heads (dim 1), got {h}")
    check_tensor("indices", indices, dtype=torch.int32, ndim=(2, 3))
    if indices.dim() == 3:
        if indices.shape[1] != 1:
            raise ValueError(f"indices must have shape [T, K] or [T, 1, K], got {list(indices.shape)}")
        indices = indices[:, 0]
    if indices.shape[0] != t:
        raise ValueError(f"indices must have one row per query token ({t}), got {indices.shape[0]}")
    check_positive("sm_scale", sm_scale)
    # the kernels take sm_scale as fp32; a comparison (not math.isfinite) also traces when torch.compile makes it
    # a symbolic float, and compares an int of any size exactly
    if not sm_scale <= _FP32_MAX:
        raise ValueError(f"sm_scale must be finite in fp32 (<= {_FP32_MAX:.6g}), got {sm_scale!r}")
    if isinstance(d_v, bool) or not isinstance(d_v, int) or d_v != LATENT_DIM:
        raise ValueError(f"d_v must be the int {LATENT_DIM}, got {d_v!r}")
    if topk_length is not None:  # contiguous: the kernels read topk_length[t] without a stride
        check_tensor("topk_length", topk_length, dtype=torch.int32, shape=(t,))
    if out is not None:
        check_tensor("out", out, dtype=torch.bfloat16, shape=(t, h, d_v))
    if lse is not None:
        check_tensor("lse", lse, dtype=torch.float32, shape=(t, h), last_dim_contiguous=False)
    return indices


def _check_rows_aligned(name: str, flat: torch.Tensor, check_start: bool = True) -> None:
    """Cache rows must start on 16-byte boundaries (row stride and base). The fp8 kernels read them in
    16-byte pieces; the Triton kernel over bf16 rows at a 1154-byte stride ([N, 577] storage) gave wrong
    outputs with right lse on the H200 (tests/gpu/test_sparse_mla_gpu.py::test_unaligned_rows_rejected, first
    run this session), so no kernel is handed such rows. The public functions check the stride (traceable);
    the ops check the start address when they run (a traced tensor has none)."""
    row_bytes = flat.stride(0) * flat.element_size()
    if flat.shape[0] > 1 and row_bytes % 16:
        raise ValueError(f"{name} rows must be 16-byte aligned (row stride and start), got a row stride of "
                         f"{row_bytes} bytes")
    if check_start and flat.data_ptr() % 16:
        raise ValueError(f"{name} rows must be 16-byte aligned (row stride and start), got a start "
                         f"{flat.data_ptr() % 16} bytes past a 16-byte boundary")


def _no_entries(out, lse):
    """K = 0: every row has no valid entry (SPEC 3: out 0, lse -inf); no kernel is built for an empty list."""
    out.zero_()
    lse.fill_(float("-inf"))
    return out, lse


def _outputs(q, d_v, out, lse):
    t, h, _ = q.shape
    if out is None:
        out = torch.empty((t, h, d_v), dtype=torch.bfloat16, device=q.device)
    if lse is None:
        lse = torch.empty((t, h), dtype=torch.float32, device=q.device)
    return out, lse


# ---------------------------------------------------------------------------------------------------
# prefill: flat bf16 latent view
# ---------------------------------------------------------------------------------------------------

def sparse_mla_prefill(q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, sm_scale: float, d_v: int = 512,
                       topk_length: torch.Tensor | None = None, out: torch.Tensor | None = None,
                       lse: torch.Tensor | None = None, variant: str | None = None,
                       scratch: "Sequence[torch.Tensor] | None" = None,
                       split_scratch: "Sequence[torch.Tensor] | None" = None,
                       key_slots: torch.Tensor | None = None,
                       row_scratch: "Sequence[torch.Tensor] | None" = None):
    """Sparse MLA over a flat bf16 latent view (a bf16 paged cache reshaped to slots works as is).

    q            [T, H, D_qk] bf16, D_qk 576 or 512, H 1..128
    kv           [N, D_qk] or [N, 1, D_qk] bf16, contiguous last dim; rows 16-byte aligned (row stride a
                 multiple of 16 bytes and a 16-byte aligned start), else ValueError
    indices      [T, K] or [T, 1, K] int32 slots; entries outside [0, N) are skipped, never read
    sm_scale     softmax scale applied to q . k
    d_v          512 (the latent width)
    topk_length  [T] int32 contiguous, or None: only the first topk_length[t] entries of row t are used
    out          [T, H, 512] bf16 (any row strides, contiguous last dim), allocated only if None
    lse          [T, H] fp32, natural log; -inf (with out = 0) for a row without a valid entry
    variant      head dispatch (prefill_variants(H)); None picks default_variant. At <= 32 heads 'native' attends
                 G neighbouring rows together over the union of their lists (a prefill's rows share most keys);
                 rows that share none, such as decodes of different requests, belong in 'pad64' (one row a
                 program): grouped, 128 such rows at 8 heads made a glm-5 TP8 layer span 1.03 ms against 0.18
                 (H200, session 45, bench/results/decode_layer_bf16_s45*.json; backend.policy.bf16_decode_variant)
    scratch      query-group union lists of the grouped kernel: the tensors of prefill_scratch_spec(T, H, K)
                 in order (entries, masks, counts; any C >= 1 groups per chunk), contiguous; None (or empty)
                 lets the launcher allocate what it needs. Must be None or empty when the spec is [].
    split_scratch  partials of a split prefill (a short prefill's lists walked by several programs each, then
                 combined): the tensors of prefill_split_spec(T, H, K, variant) in order, [T, S, H, 512] and
                 [T, S, H] fp32, contiguous; S (any >= 1) is the number of splits run, 1 none. None (or empty)
                 lets the launcher allocate them when the plan (prefill_splits) splits.
    key_slots    [NK] int32 contiguous, or None. Given, `indices` hold keys: entry k reads row key_slots[k] of kv (a key
                 outside [0, NK), or one whose slot is outside [0, N), is skipped). Keys that number the call's
                 positions densely (the bf16 backend path: each request's positions after the ones before it) let
                 the grouped kernel ('native', 2-32 heads) build its union lists over them, within the dense path's
                 reach (grouping.fused_max_slots) where the slots of a whole cache are past it; its lists then come
                 in key order. Other variants and kernels look the slots up into a [T, K] tensor they allocate.
    row_scratch  the tensors of prefill_row_spec(R, D_qk) in order ([R, D_qk] bf16 and [R] int32, contiguous, not
                 overlapping kv), R >= the rows the call reads from: N, or NK with key_slots; or None / empty.
                 Given, and where the default Gluon kernel runs the call and prefill_converts_rows says the work
                 pays for it, the rows are first converted into it once each (what that kernel's producer does to
                 every gathered copy of them: fp16 x 2^-8 latents), and the kernel runs without its conversion pass
                 (gluon_prefill config pre16). Outputs are bit-equal either way; its contents after the call are
                 unspecified. H100, issue 3's case (16384 rows, s_q 1024), `dsattn bench ab` without / with it:
                 1.030x / 1.139x / 1.167x at 32 / 64 / 128 heads; 8 / 16 heads not converted at that size
                 (bench/results/s68/ab_s68_rows_1024_h*_h100.json).
    Returns (out, lse).
    Range: on Hopper the default kernel (gluon_prefill, fp16 products) keeps |kv| < 2^24 and |q| <= 65504 finite
    (its config cvt_asm, the default since session 62, scales kv by 2^-8 in bf16 before its one rounding to fp16);
    DSATTN_PF_CONFIG=f16=0,cvt_pipe=0,producer_regs=56 runs it in bf16 without either limit (gluon_prefill.py
    docstring).
    """
    indices = _check_common(q, indices, sm_scale, d_v, topk_length, out, lse)
    scratch = _check_prefill_scratch(scratch, q, indices)
    part_o, part_lse = _check_scratch(split_scratch, q, "split_scratch", "prefill_split_spec")
    check_tensor("kv", kv, dtype=torch.bfloat16, ndim=(2, 3))
    if kv.dim() == 3:
        if kv.shape[1] != 1:
            raise ValueError(f"kv must have shape [N, D_qk] or [N, 1, D_qk], got {list(kv.shape)}")
        kv = kv[:, 0]
    if kv.shape[1] != q.shape[2]:
        raise ValueError(f"kv must have the D_qk of q ({q.shape[2]}), got {kv.shape[1]}")
    _check_rows_aligned("kv", kv, check_start=False)
    check_variant(variant, q.shape[1])
    if key_slots is not None:
        check_tensor("key_slots", key_slots, dtype=torch.int32, ndim=1)  # (contiguous: its one dimension is)
    rows, kmap = _check_row_scratch(row_scratch, kv, key_slots)
    se, sm, sc = scratch if scratch is not None else (None, None, None)
    # the scratch tensors under the names the errors use elsewhere ("scratch[0]"), not the op's parameter names
    check_same_device(q=q, kv=kv, indices=indices, topk_length=topk_length, out=out, lse=lse,
                      **{"scratch[0]": se, "scratch[1]": sm, "scratch[2]": sc, "split_scratch[0]": part_o,
                         "split_scratch[1]": part_lse}, key_slots=key_slots,
                      **{"row_scratch[0]": rows, "row_scratch[1]": kmap})
    out, lse = _outputs(q, d_v, out, lse)
    t, h, _ = q.shape
    if t == 0:
        return out, lse
    if indices.shape[1] == 0:
        return _no_entries(out, lse)
    variant = variant or default_variant("prefill", h, t, _sm_count(q.device))
    if part_o is None and kernels_available(q.device):
        splits = prefill_splits(t, h, indices.shape[1], variant, _sm_count(q.device))
        if splits > 1:
            part_o = torch.empty((t, splits, h, LATENT_DIM), dtype=torch.float32, device=q.device)
            part_lse = torch.empty((t, splits, h), dtype=torch.float32, device=q.device)
    op_or_body("sparse_mla_prefill", _prefill_impl)(q, kv, indices, float(sm_scale), topk_length, out, lse, variant,
                                                    se, sm, sc, part_o, part_lse, key_slots, rows, kmap)
    return out, lse


def _check_row_scratch(row_scratch, kv, key_slots):
    """(rows, kmap) or (None, None): prefill_row_spec's two tensors, at least the call's rows long (kv's N, or NK
    with key_slots), contiguous, rows not overlapping kv (the conversion writes it while reading kv)."""
    if row_scratch is None:
        return None, None
    if isinstance(row_scratch, torch.Tensor):
        raise ValueError("row_scratch must be a sequence of the tensors of prefill_row_spec, got a single tensor")
    row_scratch = list(row_scratch)
    if len(row_scratch) == 0:
        return None, None
    if len(row_scratch) != 2:
        raise ValueError(f"row_scratch must hold the 2 tensors of prefill_row_spec (or be empty), got "
                         f"{len(row_scratch)}")
    rows, kmap = row_scratch
    n = kv.shape[0] if key_slots is None else key_slots.shape[0]
    check_tensor("row_scratch[0]", rows, dtype=torch.bfloat16, shape=(None, kv.shape[1]))
    check_tensor("row_scratch[1]", kmap, dtype=torch.int32, ndim=1)
    for name, x in (("row_scratch[0]", rows), ("row_scratch[1]", kmap)):
        if not x.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
        if x.shape[0] < n:
            raise ValueError(f"{name} must have at least {n} rows (the call's rows: "
                             f"{'kv' if key_slots is None else 'key_slots'}), got {x.shape[0]}")
    return rows, kmap


def _check_rows_apart(rows: torch.Tensor, kv: torch.Tensor) -> None:
    """row_scratch[0] 16-byte aligned and apart from kv (the conversion writes it while reading kv); at run time,
    as _check_rows_aligned's start check (a traced tensor has no address)."""
    _check_rows_aligned("row_scratch[0]", rows)
    if rows.numel() and kv.numel():
        a0, a1 = rows.data_ptr(), rows.data_ptr() + rows.numel() * rows.element_size()
        b0 = kv.data_ptr()
        b1 = b0 + ((kv.shape[0] - 1) * kv.stride(0) + kv.shape[1]) * kv.element_size()
        if a0 < b1 and b0 < a1:
            raise ValueError("row_scratch[0] must not overlap kv")


def _check_prefill_scratch(scratch, q, indices):
    """(entries, masks, counts) or None. The spec's shapes with any C >= 1 groups (the launcher runs the
    tokens in chunks of C groups); contiguous, as build_groups and the grouped kernel index them densely."""
    if scratch is None:
        return None
    if isinstance(scratch, torch.Tensor):
        raise ValueError("scratch must be a sequence of the tensors of prefill_scratch_spec, got a single tensor")
    scratch = list(scratch)
    if len(scratch) == 0:
        return None
    t, h, _ = q.shape
    k = indices.shape[1]
    spec = prefill_scratch_spec(t, h, k)
    if len(scratch) != len(spec):
        raise ValueError(f"scratch must hold the {len(spec)} tensors of prefill_scratch_spec({t}, {h}, {k}) "
                         f"(or be empty), got {len(scratch)}")
    entries, masks, counts = scratch
    width = spec[0][0][1]
    check_tensor("scratch[0]", entries, dtype=torch.int32, shape=(None, width))
    c = entries.shape[0]
    if c < 1 and t > 0:  # (the spec of 0 tokens has 0 groups: nothing runs)
        raise ValueError("scratch[0] must have at least one group (dim 0)")
    check_tensor("scratch[1]", masks, dtype=torch.int32, shape=(c, width))
    check_tensor("scratch[2]", counts, dtype=torch.int32, shape=(c,))
    for i, x in enumerate(scratch):  # (their device: sparse_mla_prefill's check_same_device, once kv is checked)
        if not x.is_contiguous():
            raise ValueError(f"scratch[{i}] must be contiguous")
    return entries, masks, counts


def _prefill_impl(q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, sm_scale: float,
                  topk_length: Optional[torch.Tensor], out: torch.Tensor, lse: torch.Tensor, variant: str,
                  scratch_entries: Optional[torch.Tensor], scratch_masks: Optional[torch.Tensor],
                  scratch_counts: Optional[torch.Tensor], scratch_o: Optional[torch.Tensor],
                  scratch_lse: Optional[torch.Tensor], key_slots: Optional[torch.Tensor],
                  row_rows: Optional[torch.Tensor], row_kmap: Optional[torch.Tensor]) -> None:
    # no defaults on the mutated optional arguments: torch 2.11 drops trailing arguments equal to their defaults
    # when it redispatches a boxed call, and its ADInplaceOrView step then indexes past them (IndexError on the H200)
    _check_rows_aligned("kv", kv)
    if row_rows is not None:
        _check_rows_apart(row_rows, kv)
    if kernels_available(q.device):
        from .launch import launch_prefill
        scratch = None if scratch_entries is None else (scratch_entries, scratch_masks, scratch_counts)
        launch_prefill(q, kv, indices, sm_scale, topk_length, out, lse, variant, scratch=scratch,
                       part_o=scratch_o, part_lse=scratch_lse, key_slots=key_slots, rows=row_rows, kmap=row_kmap)
        return
    if key_slots is not None:
        indices = slots_of_keys(indices, key_slots)
    o, s = sparse_mla_reference(q, kv, indices, sm_scale, LATENT_DIM, topk_length)
    out.copy_(o)
    lse.copy_(s)


_prefill_op = torch.library.custom_op("dsattn::sparse_mla_prefill", _prefill_impl,
                                      mutates_args=("out", "lse", "scratch_entries", "scratch_masks", "scratch_counts",
                                                    "scratch_o", "scratch_lse", "row_rows", "row_kmap"))


@_prefill_op.register_fake
def _(q, kv, indices, sm_scale, topk_length, out, lse, variant, scratch_entries, scratch_masks,
      scratch_counts, scratch_o, scratch_lse, key_slots, row_rows, row_kmap) -> None:
    return None


def slots_of_keys(indices: torch.Tensor, key_slots: torch.Tensor) -> torch.Tensor:
    """key_slots[indices] where 0 <= indices < len(key_slots), else -1: a new int32 tensor of indices' shape (the
    lookup of sparse_mla_prefill's key_slots for the kernels that read slots directly)."""
    nk = key_slots.shape[0]
    ok = (indices >= 0) & (indices < nk)
    if nk == 0:
        return torch.full_like(indices, -1)
    return torch.where(ok, key_slots[indices.clamp(0, nk - 1).long()], -1).to(torch.int32)


# ---------------------------------------------------------------------------------------------------
# decode: paged cache of any layout
# ---------------------------------------------------------------------------------------------------

def _flat_cache(kv_cache: torch.Tensor) -> torch.Tensor:
    """[num_blocks, block_size, row] (or [.., 1, row]) -> [slots, row] without copying."""
    if kv_cache.dim() == 4:
        if kv_cache.shape[2] != 1:
            raise ValueError(f"kv_cache must have shape [blocks, block_size, row] or [blocks, block_size, 1, row], "
                             f"got {list(kv_cache.shape)}")
        kv_cache = kv_cache[:, :, 0]
    if kv_cache.shape[0] > 1 and kv_cache.shape[1] > 1 and kv_cache.stride(0) != kv_cache.shape[1] * kv_cache.stride(1):
        raise ValueError(f"kv_cache blocks must be evenly strided slots (stride(0) = block_size * stride(1)), "
                         f"got strides {kv_cache.stride()}")
    # view, not reshape: the check above makes it possible, and a copy of the cache must never happen here
    return kv_cache.view(kv_cache.shape[0] * kv_cache.shape[1], kv_cache.shape[2])


def sparse_mla_decode(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, sm_scale: float,
                      d_v: int = 512, topk_length: torch.Tensor | None = None, out: torch.Tensor | None = None,
                      lse: torch.Tensor | None = None, variant: str | None = None,
                      scratch: "torch.Tensor | Sequence[torch.Tensor] | None" = None):
    """Sparse MLA over a paged latent cache (bf16, fp8_ds_mla or fp8_ds_mla_nope rows).

    q            [T, H, D_qk] bf16, one row per query token; D_qk 576 or 512 (fp8_ds_mla_nope: 512;
                 fp8_ds_mla with 512 ignores the stored RoPE part)
    kv_cache     [num_blocks, block_size, row] or [.., 1, row]: bf16 rows of D_qk, or uint8 rows of 656
                 (fp8_ds_mla) / 528 (fp8_ds_mla_nope) bytes; the layout is inferred; slots 16-byte aligned
                 (stride and start, as for kv in sparse_mla_prefill), else ValueError
    indices      [T, K] int32 flat slots (block * block_size + offset); -1 or out of range is skipped.
                 Any order; rows sorted by slot (as dsattn's top-k emits positions) took 2-8% less time at 8 / 16
                 heads over fp8_ds_mla on the H200 than the same entries in random order in 12 of 14 pairs (16
                 heads over the shared pool at 512 tokens 24% less, against a run of that row read slow; pad64 there
                 1.6%) (separate runs, session 32: bench/results/sparse_mla_s32_asc_*.json against
                 sparse_mla_s32_c4096_*.json and _c0_*)
    topk_length  [T] int32 contiguous, or None
    out, lse     as in sparse_mla_prefill
    variant      head dispatch (decode_variants(H, layout)); None picks default_variant
    scratch      split-K workspace, the tensors of decode_scratch_spec(T, H, K, variant, layout) in order,
                 contiguous (allocated only when the plan splits and none is given)
    Returns (out, lse).
    Range: over fp8 rows the kernels take q's 512 latent values in fp16 (kernels.py's docstring): |q| <= 65504;
    a 128-value group stored with a scale of 2**-17 or less (amax <= ~3.4e-3) reads as zeros there (in q . k too,
    lse then up to ~3e-5 relative off, except under gluon_rx's sraw: kernels.py's docstring). Over bf16 rows the
    fp16 V tile keeps |kv| < 65520 finite in the Triton kernel (as compiled: kernels.py's docstring, session 60; on
    sm_90 'auto' runs it for the bf16 decode only in 64-head programs since session 63), |kv| < 2^24 in gluon_small
    (programs of <= 32 heads; GluonConfig.cvt_asm, the default since session 62).
    """
    indices = _check_common(q, indices, sm_scale, d_v, topk_length, out, lse)
    check_tensor("kv_cache", kv_cache, dtype=(torch.bfloat16, torch.uint8), ndim=(3, 4))
    layout = infer_layout(kv_cache)
    flat = _flat_cache(kv_cache)
    _check_rows_aligned("kv_cache", flat, check_start=False)
    t, h, d = q.shape
    if layout is KVLayout.BF16 and flat.shape[1] != d:
        raise ValueError(f"kv_cache must have the D_qk of q ({d}) for a bf16 cache, got {flat.shape[1]}")
    if layout is KVLayout.FP8_DS_MLA_NOPE and d != 512:
        raise ValueError(f"q must have D_qk 512 for an fp8_ds_mla_nope cache (no RoPE part), got {d}")
    check_variant(variant, h)
    variant = variant or default_variant("decode", h, t, _sm_count(q.device))
    scratch_o, scratch_lse = _check_scratch(scratch, q, "scratch", "decode_scratch_spec")
    check_same_device(q=q, kv_cache=kv_cache, indices=indices, topk_length=topk_length, out=out, lse=lse,
                      **{"scratch[0]": scratch_o, "scratch[1]": scratch_lse})
    out, lse = _outputs(q, d_v, out, lse)
    if t == 0:
        return out, lse
    if indices.shape[1] == 0:
        return _no_entries(out, lse)
    if scratch_o is None and kernels_available(q.device):
        splits = decode_splits(t, h, indices.shape[1], variant, _sm_count(q.device))
        if splits > 1:
            scratch_o = torch.empty((t, splits, h, LATENT_DIM), dtype=torch.float32, device=q.device)
            scratch_lse = torch.empty((t, splits, h), dtype=torch.float32, device=q.device)
    op_or_body("sparse_mla_decode", _decode_impl)(q, flat, indices, float(sm_scale), layout.value, topk_length, out,
                                                  lse, variant, scratch_o, scratch_lse)
    return out, lse


def _check_scratch(scratch, q, arg: str, spec: str):
    """Split partials (o, lse) or (None, None): decode's `scratch`, prefill's `split_scratch` (`arg`; `spec` names
    the function that sizes them). Both contiguous, as combine_splits_kernel reads them."""
    if scratch is None:
        return None, None
    scratch = [scratch] if isinstance(scratch, torch.Tensor) else list(scratch)
    if len(scratch) == 0:
        return None, None
    if len(scratch) != 2:
        raise ValueError(f"{arg} must hold the 2 tensors of {spec} (or be empty), got {len(scratch)}")
    so, sl = scratch
    t, h, _ = q.shape
    check_tensor(f"{arg}[0]", so, dtype=torch.float32, shape=(t, None, h, LATENT_DIM))
    splits = so.shape[1]
    if splits < 1:
        raise ValueError(f"{arg}[0] must have at least one split (dim 1)")
    check_tensor(f"{arg}[1]", sl, dtype=torch.float32, shape=(t, splits, h))
    for name, x in ((f"{arg}[0]", so), (f"{arg}[1]", sl)):
        if not x.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    return so, sl


def _decode_impl(q: torch.Tensor, kv_flat: torch.Tensor, indices: torch.Tensor, sm_scale: float, layout: str,
                 topk_length: Optional[torch.Tensor], out: torch.Tensor, lse: torch.Tensor, variant: str,
                 scratch_o: Optional[torch.Tensor], scratch_lse: Optional[torch.Tensor]) -> None:
    _check_rows_aligned("kv_cache", kv_flat)
    if kernels_available(q.device):
        from .launch import launch_decode
        launch_decode(q, kv_flat, indices, sm_scale, KVLayout(layout), topk_length, out, lse, variant,
                      scratch_o, scratch_lse)
        return
    o, s = sparse_mla_paged_reference(q, kv_flat[:, None], indices, sm_scale, layout, LATENT_DIM, topk_length)
    out.copy_(o)
    lse.copy_(s)


_decode_op = torch.library.custom_op("dsattn::sparse_mla_decode", _decode_impl,
                                     mutates_args=("out", "lse", "scratch_o", "scratch_lse"))


@_decode_op.register_fake
def _(q, kv_flat, indices, sm_scale, layout, topk_length, out, lse, variant, scratch_o, scratch_lse) -> None:
    return None


def _sm_count(device: torch.device) -> int:
    return sm_count(device, DEFAULT_SM_COUNT)
