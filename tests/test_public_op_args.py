"""Every public op refuses bad tensor arguments (SPEC 7): a ValueError naming the argument, raised before any kernel
runs or any output / cache / state tensor is written.

For each public op of dsattn.ops.{sparse_mla, indexer, topk, cache, gather} a maker builds one small valid CPU call
(every optional tensor argument given, so that it can be perturbed too); test_valid_call checks that it runs and
writes its outputs. Then every tensor argument gets, one at a time:

- dtype_<dt>   another dtype
- shape_d<i>   dimension i resized (only dimensions whose size the argument alone gets wrong: a size another
               argument is checked against, such as q's T, is that other argument's to report)
- ndim_plus    an extra leading dimension (two copies stacked); ndim_minus: one dimension fewer (x[0])
- list         a Python list of its values
- noncontig    a strided view of the same shape and values, last dimension 2 elements apart
- rows         (arguments documented as wholly contiguous) a view whose dim 0 is strided, last dim contiguous
- meta         the same tensor on the 'meta' device (every other argument on the CPU)
- a few op-specific ones (an optional tensor that must be None given, or one that must be given left None;
  a scratch list one tensor short)

and the call must raise ValueError whose message is about that argument (it starts with the name the op gives it,
or, for a device mismatch, says "<name> on meta"), with every tensor passed in, and every output the valid call
would write, unchanged bit for bit. Combinations an op documents as valid are listed as skipped, with the
docstring's words. Runs the reference path (TRITON_INTERPRET=0): the checks come before the kernel / reference
split, so they are the same on the GPU.
"""
from __future__ import annotations

import pytest
import torch

from dsattn.formats import FP8
from dsattn.ops.cache import write_indexer_cache, write_kv_and_indexer_cache, write_kv_cache
from dsattn.ops.gather import (gather_indexer_keys, gather_latent, gather_slots, positions_to_offsets,
                               positions_to_slots)
from dsattn.ops.indexer import indexer_logits, indexer_logits_paged, kpool_expand, kpool_update
from dsattn.ops.sparse_mla import prefill_scratch_spec, sparse_mla_decode, sparse_mla_prefill
from dsattn.ops.topk import topk, topk_scratch_spec

I32, BF16, F32 = torch.int32, torch.bfloat16, torch.float32


@pytest.fixture(autouse=True)
def _reference_path(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")


# ---------------------------------------------------------------------------------------------------
# valid calls: (fn, kwargs, tensors the call writes)
# ---------------------------------------------------------------------------------------------------

def _i32(rows):
    return torch.tensor(rows, dtype=I32)


def _fp8_kv_cache(num_blocks=2, block_size=4):
    """An fp8_ds_mla cache [num_blocks, block_size, 656] holding random latent rows in every slot."""
    cache = torch.zeros(num_blocks, block_size, 656, dtype=torch.uint8)
    n = num_blocks * block_size
    write_kv_cache(torch.randn(n, 576).bfloat16(), cache, torch.arange(n, dtype=I32))
    return cache


def _indexer_cache(num_blocks=2, block_size=4):
    cache = torch.zeros(num_blocks, block_size, 132, dtype=torch.uint8)
    n = num_blocks * block_size
    write_indexer_cache(torch.randn(n, 128), cache, torch.arange(n, dtype=I32))
    return cache


def _prefill():
    t, h, k = 2, 2, 4
    ((_, width), _), _, _ = prefill_scratch_spec(t, h, k)
    c = 2  # groups per chunk: 'any C >= 1'
    out, lse = torch.full((t, h, 512), -7.0).bfloat16(), torch.full((t, h), -7.0)
    return sparse_mla_prefill, dict(
        q=torch.randn(t, h, 576).bfloat16(), kv=torch.randn(8, 576).bfloat16(),
        indices=_i32([[0, 1, 2, -1], [3, 4, 5, 1]]), sm_scale=0.1, d_v=512, topk_length=_i32([3, 4]), out=out,
        lse=lse, variant=None,
        scratch=[torch.randint(0, 9, (c, width), dtype=I32), torch.randint(0, 9, (c, width), dtype=I32),
                 torch.randint(0, 9, (c,), dtype=I32)],
        split_scratch=[torch.randn(t, 2, h, 512), torch.randn(t, 2, h)],
        key_slots=_i32([7, 0, 3, 5, 2, 6])), [out, lse]


def _decode():
    t, h = 2, 2
    out, lse = torch.full((t, h, 512), -7.0).bfloat16(), torch.full((t, h), -7.0)
    return sparse_mla_decode, dict(
        q=torch.randn(t, h, 576).bfloat16(), kv_cache=_fp8_kv_cache(), indices=_i32([[0, 1, 5, -1], [2, 3, 7, 6]]),
        sm_scale=0.1, d_v=512, topk_length=_i32([3, 4]), out=out, lse=lse, variant=None,
        scratch=[torch.randn(t, 2, h, 512), torch.randn(t, 2, h)]), [out, lse]


def _logits_fp8():
    out = torch.full((2, 5), -7.0)
    return indexer_logits, dict(q=torch.randn(2, 2, 128).bfloat16(), weights=torch.randn(2, 2),
                                k=torch.randn(5, 128).to(FP8), k_scale=torch.rand(5) + 0.5, ks=_i32([0, 1]),
                                ke=_i32([3, 5]), out=out), [out]


def _logits_bf16():
    out = torch.full((2, 5), -7.0)
    return indexer_logits, dict(q=torch.randn(2, 2, 128).bfloat16(), weights=torch.randn(2, 2),
                                k=torch.randn(5, 128).bfloat16(), k_scale=None, ks=_i32([0, 1]), ke=_i32([3, 5]),
                                out=out), [out]


def _paged():
    out = torch.full((2, 8), -7.0)
    return indexer_logits_paged, dict(q=torch.randn(2, 2, 128).bfloat16(), weights=torch.randn(2, 2),
                                      indexer_cache=_indexer_cache(), block_table=_i32([[0, 1], [1, 0]]),
                                      row_req=_i32([1, 0]), row_len=_i32([5, 8]), out=out), [out]


def _kpool_update():
    pooled = torch.randint(0, 255, (4, 2, 132), dtype=torch.uint8)
    tail = torch.randn(2, 3, 256)
    # request 0's positions 2, 3, 4: position 3 completes pool 0 (pooled_cache), position 4 starts pool 1 (tail_state)
    return kpool_update, dict(k=torch.randn(3, 128), gate=torch.randn(3, 128), ape=torch.randn(4, 128),
                              positions=_i32([2, 3, 4]), token_req=_i32([0, 0, 0]),
                              block_table=_i32([[0, 1], [2, 3]]), pooled_cache=pooled, tail_state=tail,
                              state_slot=_i32([1, 0])), [pooled, tail]


def _kpool_expand():
    out = torch.full((2, 11), -7, dtype=I32)
    return kpool_expand, dict(pool_topk=_i32([[0, 1], [2, -1]]), positions=_i32([9, 12]), kpool=4, out=out), [out]


def _topk():
    t, w, k = 2, 40, 4
    (need, _), = topk_scratch_spec(t, w, k)
    assert need[1] > 0  # rows wider than the select's candidate capacity: a real scratch buffer
    out = torch.full((t, k), -7, dtype=I32)
    return topk, dict(logits=torch.randn(t, w), lengths=_i32([30, 40]), k=k, out=out,
                      scratch=torch.randint(0, 9, need, dtype=I32)), [out]


def _write_kv_fp8():
    cache = torch.randint(0, 255, (2, 4, 656), dtype=torch.uint8)
    return write_kv_cache, dict(latent=torch.randn(3, 576).bfloat16(), kv_cache=cache,
                                slot_mapping=_i32([3, 5, 6])), [cache]


def _write_kv_bf16():
    cache = torch.randn(2, 4, 576).bfloat16()
    return write_kv_cache, dict(latent=torch.randn(3, 576).bfloat16(), kv_cache=cache,
                                slot_mapping=_i32([3, 5, 6])), [cache]


def _write_indexer():
    cache = torch.randint(0, 255, (2, 4, 132), dtype=torch.uint8)
    return write_indexer_cache, dict(k=torch.randn(3, 128), indexer_cache=cache, slot_mapping=_i32([3, 5, 6])), [cache]


def _write_both():
    kv = torch.randint(0, 255, (2, 4, 656), dtype=torch.uint8)
    ix = torch.randint(0, 255, (2, 4, 132), dtype=torch.uint8)
    return write_kv_and_indexer_cache, dict(latent=torch.randn(3, 576).bfloat16(), kv_cache=kv,
                                            k=torch.randn(3, 128).bfloat16(), indexer_cache=ix,
                                            slot_mapping=_i32([3, 5, 6])), [kv, ix]


def _to_slots():
    out = torch.full((2, 3), -7, dtype=I32)
    return positions_to_slots, dict(positions=_i32([[0, 1, 5], [2, 3, -1]]), row_req=_i32([1, 0]),
                                    block_table=_i32([[0, 1], [2, 3]]), block_size=4, out=out), [out]


def _to_offsets():
    out = torch.full((2, 3), -7, dtype=I32)
    return positions_to_offsets, dict(positions=_i32([[0, 1, 5], [2, 3, -1]]), row_base=_i32([100, 200]),
                                      out=out), [out]


def _pieces():
    return dict(block_table=_i32([[0, 1], [1, 0]]), piece_req=_i32([0, 1]), piece_len=_i32([3, 2]),
                piece_offset=_i32([0, 3]), max_len=3)


def _gather_keys():
    out_k, out_scale = torch.randn(6, 128).to(FP8), torch.full((6,), -7.0)
    return gather_indexer_keys, dict(indexer_cache=_indexer_cache(), **_pieces(), out_k=out_k,
                                     out_scale=out_scale), [out_k, out_scale]


def _gather_latent():
    out = torch.full((6, 576), -7.0).bfloat16()
    return gather_latent, dict(kv_cache=_fp8_kv_cache(), **_pieces(), out=out), [out]


def _gather_slots():
    out = torch.full((6,), -7, dtype=I32)
    return gather_slots, dict(**_pieces(), block_size=4, out=out), [out]


# ---------------------------------------------------------------------------------------------------
# which perturbations each argument gets
# ---------------------------------------------------------------------------------------------------

# wrong dtypes tried for an argument of each dtype
BAD_DTYPES = {BF16: [torch.float16, F32], F32: [BF16, torch.float64], I32: [torch.int64, F32],
              torch.uint8: [torch.int8], FP8: [torch.float8_e5m2, torch.uint8]}
_DT = {torch.float16: "float16", F32: "float32", BF16: "bfloat16", torch.float64: "float64", torch.int64: "int64",
       I32: "int32", torch.int8: "int8", torch.uint8: "uint8", torch.float8_e5m2: "float8_e5m2"}


def A(shapes=(), skip=None, extra=(), rows=False):
    """One argument's perturbations: `shapes` (dim, new size) pairs, or a string saying why no size of this argument
    alone is wrong; `skip` {perturbation: why the op documents it as valid}; `extra` op-specific perturbations;
    `rows` for arguments documented as (wholly) contiguous."""
    return dict(shapes=shapes, skip=skip or {}, extra=tuple(extra), rows=rows)


# Quoted docstring phrases, reused below.
_BLOCK_TABLE = "'block_table [B, M] int32': B and M free"
_PIECE_REQ = "'piece_req / piece_len / piece_offset [P] int32': piece_req defines P, any P is valid"
_SCRATCH_C = "(any C >= 1 groups per chunk)"
_SPLITS = "S (any >= 1) is the number of splits run"
_LSE_STRIDES = ("lse: 'lse [T, H] fp32' says nothing of its strides, and the op takes any (check_tensor(..., "
                "last_dim_contiguous=False)): the kernels take both its strides (sparse_mla/launch.py)")
_WEIGHTS_STRIDES = ("weights: 'weights [T, Hi] fp32' says nothing of its strides, and the op takes any "
                    "(check_tensor(..., last_dim_contiguous=False)): the kernels take both (indexer/logits.py)")

_SPARSE_COMMON = {
    "q": A([(2, 577), (1, 129)]),                     # 'D_qk 576 or 512, H 1..128'
    "indices": A([(0, 3)]),                           # [T, K]: K free
    "topk_length": A([(0, 3)]),                       # '[T] int32 contiguous'
    "out": A([(0, 3), (1, 3), (2, 513)]),             # '[T, H, 512] bf16 (any row strides, contiguous last dim)'
    "lse": A([(0, 3), (1, 3)], skip={"noncontig": _LSE_STRIDES}),
}

OPS = {
    "sparse_mla_prefill": (_prefill, {
        **_SPARSE_COMMON,
        "kv": A([(1, 577)]),                          # '[N, D_qk] ... bf16, contiguous last dim': N free
        "key_slots": A("'key_slots [NK] int32 contiguous': any NK is valid"),
        # 'scratch: the tensors of prefill_scratch_spec(T, H, K) in order (entries, masks, counts; any C >= 1 groups
        # per chunk), contiguous'
        "scratch": A(extra=["count", "tensor"]),
        "scratch[0]": A([(0, 3), (1, 33)], rows=True, skip={"shape_d0_3": _SCRATCH_C}),
        "scratch[1]": A([(0, 3), (1, 33)], rows=True),   # [C, width], C of scratch[0]
        "scratch[2]": A([(0, 3)]),                       # [C]
        # 'split_scratch: the tensors of prefill_split_spec(T, H, K, variant) in order, [T, S, H, 512] and [T, S, H]
        # fp32, contiguous; S (any >= 1)'
        "split_scratch": A(extra=["count"]),
        "split_scratch[0]": A([(0, 3), (1, 3), (2, 3), (3, 513)], rows=True, skip={"shape_d1_3": _SPLITS}),
        "split_scratch[1]": A([(0, 3), (1, 3), (2, 3)], rows=True),
    }),
    "sparse_mla_decode": (_decode, {
        **_SPARSE_COMMON,
        # '[num_blocks, block_size, row] ... uint8 rows of 656 (fp8_ds_mla) / 528 (fp8_ds_mla_nope) bytes'
        "kv_cache": A([(2, 657)]),
        # 'scratch: the tensors of decode_scratch_spec(T, H, K, variant, layout) in order, contiguous'
        "scratch": A(extra=["count"]),
        "scratch[0]": A([(0, 3), (1, 3), (2, 3), (3, 513)], rows=True, skip={"shape_d1_3": _SPLITS}),
        "scratch[1]": A([(0, 3), (1, 3), (2, 3)], rows=True),
    }),
    "indexer_logits_fp8": (_logits_fp8, {
        "q": A([(2, 129), (1, 129)]),                 # 'q [T, Hi, 128] fp8 e4m3 or bf16'
        "weights": A([(0, 3), (1, 3)], skip={"noncontig": _WEIGHTS_STRIDES}),
        "k": A([(1, 129)]),                           # 'k [N, 128] fp8 e4m3 with k_scale [N] fp32'
        "k_scale": A([(0, 6)], extra=["none"]),
        "ks": A([(0, 3)]), "ke": A([(0, 3)]),         # '[T] int32'
        "out": A([(0, 3)]),                           # 'out [T, W] fp32 (any row stride, contiguous last dim)'
    }),
    "indexer_logits_bf16": (_logits_bf16, {
        "k": A([(1, 129)]),
        "k_scale": A(extra=["given"]),                # 'or bf16 with k_scale None'
    }),
    "indexer_logits_paged": (_paged, {
        "q": A([(2, 129), (1, 129)]),
        "weights": A([(0, 3), (1, 3)], skip={"noncontig": _WEIGHTS_STRIDES}),
        # 'indexer_cache uint8 [num_blocks, block_size, 132] (formats.indexer_cache_views layout, contiguous)'
        "indexer_cache": A([(2, 133)], rows=True),
        "block_table": A(_BLOCK_TABLE),
        "row_req": A([(0, 3)]), "row_len": A([(0, 3)]),  # '[T] int32'
        "out": A([(0, 3)]),                           # 'out [T, W] fp32 (any row stride, contiguous last dim)'
    }),
    "kpool_update": (_kpool_update, {
        # 'k [T, 128] bf16 or fp32': T defines the token count
        "k": A([(1, 129)], skip={"dtype_bfloat16": "'k [T, 128] bf16 or fp32'"}),
        "gate": A([(0, 4), (1, 129)]),                # 'gate [T, 128] fp32'
        # 'ape [P, 128] fp32 (P = kpool >= 2)' (P is checked against tail_state; 1 row is wrong on its own). The
        # kernels read ape rows 128 apart: the op requires it contiguous (tests/test_index_args.py).
        "ape": A([(0, 1), (1, 129)], rows=True),
        "positions": A([(0, 4)]), "token_req": A([(0, 4)]),  # '[T] int32'
        "block_table": A("'block_table [B, M] int32': B and M free (state_slot is checked against B)"),
        # 'pooled_cache uint8 [blocks, bs // P, 132] (an indexer cache ...)'; the kernels index it densely
        "pooled_cache": A([(2, 133)], rows=True),
        "tail_state": A([(1, 4), (2, 257)], rows=True),  # 'tail_state fp32 [S, P - 1, 256]': S free
        "state_slot": A([(0, 3)]),                    # 'state_slot [B] int32'
    }),
    "kpool_expand": (_kpool_expand, {
        "pool_topk": A("'pool_topk [T, K / P] int32': defines T and K / P, any sizes valid"),
        "positions": A([(0, 3)]),                     # 'positions [T] int32'
        "out": A([(0, 3), (1, 12)]),                  # 'out [T, K + P - 1] int32 (any row stride)'
    }),
    "topk": (_topk, {
        "logits": A("'logits [T, W] fp32 (any row stride, contiguous last dim)': defines T and W"),
        "lengths": A([(0, 3)]),                       # 'lengths [T] int32'
        "out": A([(0, 3), (1, 5)]),                   # 'out [T, k] int32 (any row stride)'
        # 'scratch: the int32 buffer of topk_scratch_spec(T, W, k)' (the op takes a larger one: too few rows or
        # columns are wrong)
        "scratch": A([(0, 1), (1, 20)]),
    }),
    "write_kv_cache_fp8": (_write_kv_fp8, {
        # 'latent [T, D_qk] bf16 (or fp32)'; fp8_ds_mla: 'D_qk 512 or 576'
        "latent": A([(1, 577)], skip={"dtype_float32": "'latent [T, D_qk] bf16 (or fp32)'"}),
        # 'kv_cache [num_blocks, block_size, row] ..., contiguous: ... uint8 rows of 656 ... or 528 bytes'
        "kv_cache": A([(2, 657)], rows=True),
        # 'slot_mapping [T] int32/int64'
        "slot_mapping": A([(0, 4)], skip={"dtype_int64": "'slot_mapping [T] int32/int64'"}),
    }),
    "write_kv_cache_bf16": (_write_kv_bf16, {
        "latent": A(skip={"dtype_float32": "'latent [T, D_qk] bf16 (or fp32)'"},
                    shapes="a bf16 cache's row sets D_qk ('bf16 rows of D_qk values'): latent's width is checked "
                           "against it"),
        "kv_cache": A("'bf16 rows of D_qk values': any row width, checked against latent (latent reports it)",
                      rows=True),
    }),
    "write_indexer_cache": (_write_indexer, {
        "k": A([(1, 129)], skip={"dtype_bfloat16": "'k [T, 128] bf16 or fp32'"}),
        # 'indexer_cache uint8 [num_blocks, block_size, 132] contiguous'
        "indexer_cache": A([(2, 133)], rows=True),
        "slot_mapping": A([(0, 4)], skip={"dtype_int64": "'slot_mapping [T] int32/int64'"}),
    }),
    "write_kv_and_indexer_cache": (_write_both, {
        "latent": A([(1, 577)], skip={"dtype_float32": "'latent [T, D_qk] bf16 (or fp32)'"}),
        "kv_cache": A([(2, 657)], rows=True),
        # 'the same tokens (latent and k have as many rows)'
        "k": A([(0, 4), (1, 129)], skip={"dtype_float32": "'k [T, 128] bf16 or fp32'"}),
        "indexer_cache": A([(2, 133)], rows=True),
        "slot_mapping": A([(0, 4)], skip={"dtype_int64": "'slot_mapping [T] int32/int64'"}),
    }),
    "positions_to_slots": (_to_slots, {
        "positions": A("'positions [R, W] int32 (any row stride; -1 = unused)': defines R and W"),
        "row_req": A([(0, 3)]),                       # 'row_req [R] int32'
        "block_table": A(_BLOCK_TABLE),
        "out": A([(0, 3), (1, 4)]),                   # 'out [R, W] int32'
    }),
    "positions_to_offsets": (_to_offsets, {
        "positions": A("'positions [R, W] int32': defines R and W"),
        "row_base": A([(0, 3)]),                      # 'row_base [R] int32'
        "out": A([(0, 3), (1, 4)]),
    }),
    "gather_indexer_keys": (_gather_keys, {
        # 'indexer_cache uint8 [num_blocks, block_size, 132] contiguous'
        "indexer_cache": A([(2, 133)], rows=True),
        "block_table": A(_BLOCK_TABLE),
        "piece_req": A(_PIECE_REQ),
        "piece_len": A([(0, 3)]), "piece_offset": A([(0, 3)]),
        "out_k": A([(1, 129)], rows=True),            # 'out_k [N, 128] fp8 e4m3 contiguous': N free
        "out_scale": A([(0, 7)]),                     # 'out_scale [N] fp32'
    }),
    "gather_latent": (_gather_latent, {
        # 'kv_cache uint8 [num_blocks, block_size, 656 | 528] ..., contiguous'
        "kv_cache": A([(2, 657)], rows=True),
        "block_table": A(_BLOCK_TABLE),
        "piece_req": A(_PIECE_REQ),
        "piece_len": A([(0, 3)]), "piece_offset": A([(0, 3)]),
        # 'out [N, D_qk] bf16 (any row stride, contiguous last dim), D_qk 576 (fp8_ds_mla only ...) or 512'
        "out": A([(1, 577)]),
    }),
    "gather_slots": (_gather_slots, {
        "block_table": A(_BLOCK_TABLE),
        "piece_req": A(_PIECE_REQ),
        "piece_len": A([(0, 3)]), "piece_offset": A([(0, 3)]),
        "out": A("'out [N] int32 contiguous': any N"),
    }),
}


def _arg(kwargs, name):
    """kwargs[name], or element i of a sequence argument for name 'base[i]'."""
    if name.endswith("]"):
        base, i = name[:-1].split("[")
        return kwargs[base][int(i)]
    return kwargs[name]


def _cases():
    cases = []
    for op, (make, args) in OPS.items():
        _, kwargs, _ = make()
        for name, spec in args.items():
            x = _arg(kwargs, name)
            perts, skip = [], dict(spec["skip"])
            if isinstance(x, torch.Tensor):
                perts += [f"dtype_{_DT[d]}" for d in BAD_DTYPES[x.dtype]]
                if isinstance(spec["shapes"], str):
                    skip.setdefault("shape", spec["shapes"])
                    perts.append("shape")
                else:
                    perts += [f"shape_d{d}_{s}" for d, s in spec["shapes"]]
                perts += ["ndim_plus", "ndim_minus", "list", "noncontig"]
                perts += ["rows"] if spec["rows"] else []
                perts.append("meta")
            perts += spec["extra"]
            for p in perts:
                reason = skip.get(p)
                marks = [pytest.mark.skip(reason=f"documented valid: {reason}")] if reason else []
                cases.append(pytest.param(op, name, p, id=f"{op}-{name}-{p}", marks=marks))
    return cases


CASES = _cases()


# ---------------------------------------------------------------------------------------------------
# perturbations
# ---------------------------------------------------------------------------------------------------

def _rand(shape, dtype):
    if dtype == torch.uint8:
        return torch.randint(0, 255, shape, dtype=dtype)
    if not dtype.is_floating_point:
        return torch.randint(0, 4, shape, dtype=dtype)
    return torch.randn(shape).to(dtype)


def _spread(x, dim):
    """x's values in a view of the same shape whose dimension `dim` is 2 elements apart."""
    shape = list(x.shape)
    shape[dim] *= 2
    big = torch.zeros(shape, dtype=x.dtype)
    idx = [slice(None)] * x.dim()
    idx[dim] = slice(None, None, 2)
    view = big[tuple(idx)]
    view.copy_(x)
    return view


def _bad(x, pert):
    if pert.startswith("dtype_"):
        dt = next(d for d, n in _DT.items() if n == pert[6:])
        if dt.itemsize == x.dtype.itemsize and (dt in (torch.uint8, torch.int8) or x.dtype in (torch.uint8, FP8)):
            return x.view(dt)  # same bytes
        return (x.float() if x.dtype == FP8 else x).to(dt)
    if pert.startswith("shape_d"):
        d, s = map(int, pert[7:].split("_"))
        shape = list(x.shape)
        assert shape[d] != s
        shape[d] = s
        return _rand(shape, x.dtype)
    if pert == "ndim_plus":
        y = x.new_empty((2,) + tuple(x.shape))
        y[0], y[1] = x, x
        return y
    if pert == "ndim_minus":
        return x[0]
    if pert == "list":
        return (x.float() if x.dtype == FP8 else x).tolist()
    if pert == "noncontig":
        assert x.shape[-1] > 1
        return _spread(x, x.dim() - 1)
    if pert == "rows":
        assert x.dim() >= 2 and x.shape[0] > 1 and x.shape[-1] > 1
        return _spread(x, 0)
    if pert == "meta":
        return x.to("meta")
    raise AssertionError(pert)


def _perturb(kwargs, name, pert):
    if pert == "none":
        kwargs[name] = None
    elif pert == "given":  # an optional tensor that must be None here
        kwargs[name] = torch.rand(kwargs["k"].shape[0])
    elif pert == "count":  # a scratch sequence one tensor short
        kwargs[name] = list(kwargs[name])[:-1]
    elif pert == "tensor":  # one tensor where a sequence of them is asked for
        kwargs[name] = kwargs[name][0]
    elif name.endswith("]"):
        base, i = name[:-1].split("[")
        seq = list(kwargs[base])
        seq[int(i)] = _bad(seq[int(i)], pert)
        kwargs[base] = seq
    else:
        kwargs[name] = _bad(kwargs[name], pert)


def _tensors(kwargs):
    for v in kwargs.values():
        for t in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                yield t


def _bytes(t):
    return t.detach().reshape(-1).clone().view(torch.uint8)  # bitwise: NaN-safe


def _names(msg, name, pert):
    """The message is about `name`: it starts with it (as a whole name), or lists it on the meta device."""
    if pert == "meta" and f"{name} on meta" in msg:
        return True
    rest = msg[len(name):len(name) + 1]
    return msg.startswith(name) and not (rest.isalnum() or rest in ("_", "["))


# ---------------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", list(OPS))
def test_valid_call(op):
    """The unperturbed call runs and writes every tensor listed as written (so the checks below, that a refused call
    leaves them as they were, are not vacuous)."""
    fn, kwargs, written = OPS[op][0]()
    before = [_bytes(w) for w in written]
    fn(**kwargs)
    for i, (w, b) in enumerate(zip(written, before)):
        assert not torch.equal(_bytes(w), b), f"{op}: written tensor {i} unchanged by a valid call"


@pytest.mark.parametrize("op, arg, pert", CASES)
def test_bad_argument_is_refused(op, arg, pert):
    fn, kwargs, written = OPS[op][0]()
    _perturb(kwargs, arg, pert)
    tensors = list(written) + list(_tensors(kwargs))
    before = [_bytes(t) for t in tensors]
    with pytest.raises(ValueError) as info:
        fn(**kwargs)
    assert _names(str(info.value), arg, pert), f"the error is not about {arg}: {info.value}"
    for t, b in zip(tensors, before):
        assert torch.equal(_bytes(t), b), "a tensor was written before the error"
