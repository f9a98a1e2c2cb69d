"""Public sparse MLA API: argument checks, variants, scratch plan, results against the reference, custom ops.

On a CPU machine conftest.py sets TRITON_INTERPRET=1, so the public functions run the Triton kernels
under the interpreter.
"""

import pytest
import torch

from dsattn import formats
from dsattn.ops.sparse_mla import (decode_scratch_spec, decode_variants, default_variant, prefill_variants,
                                   sparse_mla_decode, sparse_mla_prefill)
from dsattn.ops.sparse_mla.reference import sparse_mla_paged_reference, sparse_mla_reference
from dsattn.ops.sparse_mla.testing import check_close, poisoned_outputs

pytestmark = pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)


def _inputs(t=3, h=8, d=576, n=40, k=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(t, h, d, generator=g).bfloat16()
    kv = torch.randn(n, d, generator=g).bfloat16()
    idx = torch.randint(-1, n + 3, (t, k), generator=g, dtype=torch.int32)
    return q, kv, idx


@pytest.mark.parametrize("bad, match", [
    (dict(q=lambda q: q.float()), "q must have dtype"),
    (dict(q=lambda q: q[..., :500]), "q must have D_qk"),
    (dict(kv=lambda kv: kv[:, :512]), "kv must have the D_qk"),
    (dict(indices=lambda i: i.long()), "indices must have dtype"),
    (dict(indices=lambda i: i[:2]), "indices must have one row"),
    (dict(sm_scale=-1.0), "sm_scale"),
    (dict(sm_scale=float("inf")), "sm_scale"),
    (dict(d_v=256), "d_v"),
    (dict(d_v=512.0), "d_v must be the int 512"),
    (dict(sm_scale=1e39), "sm_scale must be finite in fp32"),  # finite as a double, inf in the kernels' fp32
    (dict(sm_scale=10 ** 400), "sm_scale must be finite in fp32"),  # math.isfinite raised OverflowError here
    (dict(topk_length=torch.ones(2, dtype=torch.int32)), "topk_length"),
    (dict(topk_length=torch.ones(6, dtype=torch.int32)[::2]), "topk_length must have a contiguous"),
    (dict(out=torch.empty(3, 8, 512)), "out must have dtype"),
    (dict(out=torch.empty(3, 8, 1024, dtype=torch.bfloat16)[..., ::2]), "out must have a contiguous"),
    (dict(lse=torch.empty(3, 7)), "lse must have shape"),
    (dict(variant="pad128"), "variant"),
    (dict(kv=lambda kv: torch.zeros(kv.shape[0], 577, dtype=kv.dtype)[:, :576]), "kv rows must be 16-byte aligned"),
    (dict(kv=lambda kv: torch.zeros(kv.numel() + 1, dtype=kv.dtype)[1:].view(kv.shape)), "kv rows must be 16-byte"),
])
def test_prefill_rejects(bad, match):
    q, kv, idx = _inputs()
    args = dict(q=q, kv=kv, indices=idx, sm_scale=0.1)
    for k, v in bad.items():
        args[k] = v(args[k]) if callable(v) else v
    with pytest.raises(ValueError, match=match):
        sparse_mla_prefill(**args)


def test_decode_rejects_and_leaves_outputs():
    q, kv, idx = _inputs(d=576)
    cache = formats.pack_latent_rows(torch.randn(40, 512), "fp8_ds_mla_nope").view(10, 4, 528)
    out = torch.full((3, 8, 512), 7.0, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="q must have D_qk 512"):
        sparse_mla_decode(q, cache, idx, 0.1, out=out)
    assert (out == 7).all()
    with pytest.raises(ValueError, match="kv_cache"):
        sparse_mla_decode(q[..., :512].contiguous(), cache.view(torch.int8), idx, 0.1)
    with pytest.raises(ValueError, match="scratch"):
        sparse_mla_decode(q[..., :512].contiguous(), cache, idx, 0.1, scratch=[torch.empty(3)])
    # combine_splits_kernel reads the partials without strides
    with pytest.raises(ValueError, match=r"scratch\[1\] must be contiguous"):
        sparse_mla_decode(q[..., :512].contiguous(), cache, idx, 0.1,
                          scratch=[torch.empty(3, 2, 8, 512), torch.empty(3, 4, 8)[:, ::2]])
    # rows off 16-byte boundaries (an fp8 row of 528 bytes starting 4 bytes in); nothing written
    shifted = torch.zeros(cache.numel() + 4, dtype=torch.uint8)[4:].view(cache.shape)
    with pytest.raises(ValueError, match="kv_cache rows must be 16-byte aligned"):
        sparse_mla_decode(q[..., :512].contiguous(), shifted, idx, 0.1, out=out)
    assert (out == 7).all()


def test_variants_and_policy():
    assert prefill_variants(8) == ["native", "pad64"]
    assert "pad64" in decode_variants(48, "fp8_ds_mla")
    assert prefill_variants(128) == ["native"]
    assert default_variant("decode", 8, 133, 132) == "native"
    assert default_variant("decode", 8, 132, 132) == "pad64"
    assert default_variant("decode", 32, 264, 132) == "pad64"
    assert default_variant("decode", 32, 265, 132) == "native"
    with pytest.raises(ValueError, match="num_heads"):
        prefill_variants(129)


def test_scratch_spec():
    assert decode_scratch_spec(4096, 8, 2048, "native", "fp8_ds_mla") == []
    spec = decode_scratch_spec(4, 8, 2048, "native", "fp8_ds_mla")
    (so, do), (sl, dl) = spec
    assert so[0] == 4 and so[2:] == (8, 512) and sl == so[:3] and do == dl == torch.float32
    # arguments checked as prefill_scratch_spec checks them (they gave negative or float shapes)
    for bad, match in (((-5, 8, 2048), "num_tokens"), ((2.5, 8, 2048), "num_tokens"), ((4, 8, -1), "topk")):
        with pytest.raises(ValueError, match=match):
            decode_scratch_spec(*bad)
    # no tokens: the prefill spec has no groups, and the public function takes it (nothing runs)
    from dsattn.ops.sparse_mla import prefill_scratch_spec
    q, kv, idx = _inputs(t=0)
    scratch = [torch.empty(sh, dtype=dt) for sh, dt in prefill_scratch_spec(0, 8, 16)]
    out, lse = sparse_mla_prefill(q, kv, idx, 0.1, scratch=scratch)
    assert out.shape == (0, 8, 512) and lse.shape == (0, 8)


@pytest.mark.parametrize("layout", ["bf16", "fp8_ds_mla", "fp8_ds_mla_nope"])
def test_public_ops_match_reference(layout):
    """Each public op (prefill over bf16 rows, decode over the fp8 layouts) writes every element of NaN-poisoned
    out / lse (lse row-strided) within SPEC 3's tolerances of the reference (check_close); row 2 (topk_length 0)
    gives out 0 and lse -inf there, written over the NaN."""
    d = 512 if layout == "fp8_ds_mla_nope" else 576
    q, kv, idx = _inputs(d=d)
    lens = torch.tensor([16, 3, 0], dtype=torch.int32)
    out, lse = poisoned_outputs(3, 8)
    if layout == "bf16":
        got = sparse_mla_prefill(q, kv[:, None], idx[:, None], 0.1, topk_length=lens, out=out, lse=lse)
        ro, rl = sparse_mla_reference(q, kv, idx, 0.1, topk_length=lens)
    else:
        cache = formats.pack_latent_rows(kv.float(), layout).view(10, 4, -1)
        got = sparse_mla_decode(q, cache, idx, 0.1, topk_length=lens, out=out, lse=lse)
        ro, rl = sparse_mla_paged_reference(q, cache, idx, 0.1, layout, topk_length=lens)
    assert got[0] is out and got[1] is lse
    check_close(out, lse, ro, rl)
    assert torch.isneginf(lse[2]).all() and (out[2] == 0).all()


def test_custom_ops_trace():
    q, kv, idx = _inputs()
    ref = sparse_mla_prefill(q, kv, idx, 0.1)
    fn = torch.compile(lambda q, kv, idx: sparse_mla_prefill(q, kv, idx, 0.1), fullgraph=True, backend="aot_eager")
    got = fn(q, kv, idx)
    torch.testing.assert_close(got[0], ref[0])
    torch.testing.assert_close(got[1], ref[1])


@pytest.mark.parametrize("k", [16, 640])  # 640 keys over 3 tokens: the plan splits, scratch is traced too
def test_decode_custom_op_traces(k):
    """The decode op runs eagerly and compiled (fullgraph), each into NaN-poisoned out / lse with the split-K scratch
    refilled with NaN before it (so the compiled call cannot pass on partials the eager call left), and each result
    is within SPEC 3's tolerances of the reference (check_close)."""
    q, _, idx = _inputs(k=k)
    cache = formats.pack_latent_rows(torch.randn(40, 576), "fp8_ds_mla").view(10, 4, 656)
    scratch = [torch.empty(s, dtype=dt) for s, dt in decode_scratch_spec(3, 8, k, "native", "fp8_ds_mla")]
    assert bool(scratch) == (k == 640)
    ref = sparse_mla_paged_reference(q, cache, idx, 0.1, "fp8_ds_mla")

    def fn(q, cache, idx, out, lse, *scratch):
        return sparse_mla_decode(q, cache, idx, 0.1, variant="native", out=out, lse=lse, scratch=list(scratch))

    got = []
    for run in (fn, torch.compile(fn, fullgraph=True, backend="aot_eager")):
        for x in scratch:
            x.fill_(float("nan"))
        out, lse = poisoned_outputs(3, 8)
        run(q, cache, idx, out, lse, *scratch)
        check_close(out, lse, *ref)
        got.append((out, lse))
    torch.testing.assert_close(got[1], got[0])


def test_sm_scale_as_a_traced_argument():
    """sm_scale passed into a compiled function becomes a symbolic float on its second value (or at once with
    dynamic=True): the argument checks must trace (math.isfinite did not)."""
    q, kv, idx = _inputs()
    fn = torch.compile(lambda q, kv, idx, s: sparse_mla_prefill(q, kv, idx, s), fullgraph=True, backend="aot_eager",
                       dynamic=True)
    for s in (0.1, 0.2):
        torch.testing.assert_close(fn(q, kv, idx, s)[1], sparse_mla_prefill(q, kv, idx, s)[1])


def test_no_columns_and_negative_lengths():
    """K = 0 gives every row out 0, lse -inf (poisoned buffers fully written, no kernel built for it); a negative
    topk_length empties its row on every path, as in the reference: prefill and decode write every row of
    NaN-poisoned out / lse within SPEC 3's tolerances of their reference (check_close), row 1 out 0 and lse -inf."""
    q, kv, idx = _inputs(d=576)
    cache = formats.pack_latent_rows(kv.float(), "fp8_ds_mla").view(10, 4, -1)
    lens = torch.tensor([16, -5, 3], dtype=torch.int32)
    runs = ((lambda **kw: sparse_mla_prefill(q, kv, **kw), sparse_mla_reference(q, kv, idx, 0.1, topk_length=lens)),
            (lambda **kw: sparse_mla_decode(q, cache, **kw),
             sparse_mla_paged_reference(q, cache, idx, 0.1, "fp8_ds_mla", topk_length=lens)))
    for run, (ro, rl) in runs:
        out, lse = poisoned_outputs(3, 8)
        run(indices=idx[:, :0], sm_scale=0.1, out=out, lse=lse)
        assert (out == 0).all() and torch.isneginf(lse).all()
        out, lse = poisoned_outputs(3, 8)
        run(indices=idx, sm_scale=0.1, topk_length=lens, out=out, lse=lse)
        check_close(out, lse, ro, rl)
        assert (out[1] == 0).all() and torch.isneginf(lse[1]).all()
        assert torch.isfinite(rl[0]).all() and torch.isfinite(rl[2]).all()  # rows 0 and 2 do attend


def test_page_size_one_cache_with_padded_rows():
    """[N, 1, row] with rows 672 bytes apart: the stride of the size-1 page dimension means nothing (unsqueeze sets
    it to 656); such a cache was refused as 'not evenly strided' while the same memory with stride 672 ran."""
    q, kv, idx = _inputs(d=576)
    packed = formats.pack_latent_rows(kv.float(), "fp8_ds_mla")
    wide = torch.zeros(40, 672, dtype=torch.uint8)
    wide[:, :656] = packed
    cache = wide[:, :656].unsqueeze(1)
    assert cache.stride() == (672, 656, 1)
    got = sparse_mla_decode(q, cache, idx, 0.1)
    want = sparse_mla_decode(q, packed.view(40, 1, 656), idx, 0.1)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_check_close_holds_empty_rows_to_exact_zero():
    """The kernels' test helper: a row without a valid entry must give out = 0 exactly, not within the tolerance."""
    from dsattn.ops.sparse_mla.testing import check_close
    ref_out, ref_lse = torch.zeros(2, 1, 512), torch.tensor([[float("-inf")], [0.5]])
    ref_out[1] = 0.25
    out = ref_out.bfloat16()
    check_close(out, ref_lse.clone(), ref_out, ref_lse)
    out[0, 0, 7] = 1e-3  # within 2e-3 absolute, but the row has no valid entry
    with pytest.raises(AssertionError, match="out = 0 exactly"):
        check_close(out, ref_lse.clone(), ref_out, ref_lse)


def test_decode_split_plan():
    """dispatch.decode_splits: a small decode batch's programs (a token's head block) fill one wave of SMs, each part
    keeping >= 64 keys of topk (session 39's sweep: the rule picked the fastest count in 31 of 32 cases)."""
    from dsattn.ops.sparse_mla.dispatch import decode_splits
    assert decode_splits(1, 8, 2048, "native", 132) == 32       # 64 parts would keep 32 keys
    assert decode_splits(4, 8, 2048, "native", 132) == 32       # 4 x 32 = 128 programs
    assert decode_splits(16, 32, 2048, "native", 132) == 8
    assert decode_splits(64, 8, 2048, "pad64", 132) == 2
    assert decode_splits(16, 128, 2048, "native", 132) == 4     # two 64-head blocks a token
    assert decode_splits(64, 128, 2048, "native", 132) == 1 and decode_splits(66, 64, 2048, "native", 132) == 2
    assert decode_splits(67, 64, 2048, "native", 132) == 1 and decode_splits(0, 8, 2048, "native", 132) == 32
    assert decode_splits(3, 8, 511, "native", 132) == 4 and decode_splits(3, 8, 127, "native", 132) == 1
    (so, _), (sl, _) = decode_scratch_spec(4, 8, 2048, "native", "fp8_ds_mla")
    assert so == (4, 32, 8, 512) and sl == (4, 32, 8)


def test_prefill_split_plan(monkeypatch):
    """dispatch.prefill_splits: a short prefill's programs (a group of G tokens, or a token's 64-head block) fill the
    SMs, each split keeping >= 64 keys of topk; prefill_split_spec sizes the partials; DSATTN_PREFILL_SPLITS forces
    a count (bad values name it)."""
    from dsattn.ops.sparse_mla import prefill_split_spec
    from dsattn.ops.sparse_mla.dispatch import prefill_programs, prefill_split_tokens_max, prefill_splits
    monkeypatch.delenv("DSATTN_PREFILL_SPLITS", raising=False)
    assert [prefill_programs(50, h, "native") for h in (1, 8, 16, 32, 64, 100, 128)] == [7, 7, 13, 25, 50, 100, 100]
    assert prefill_programs(50, 8, "pad64") == 50 and prefill_programs(0, 8, "pad64") == 1
    assert prefill_splits(32, 8, 2048, "pad64", 132) == 4       # 32 x 4 = 128 programs
    assert prefill_splits(32, 8, 2048, "native", 132) == 32     # 4 groups x 32; 2048 / 32 = 64 keys
    assert prefill_splits(1, 128, 2048, "native", 132) == 32    # 64 parts would keep 32 keys
    assert prefill_splits(1024, 8, 2048, "native", 132) == 1    # 128 groups fill the SMs already
    assert prefill_splits(66, 64, 2048, "native", 132) == 2 and prefill_splits(67, 64, 2048, "native", 132) == 1
    assert prefill_splits(3, 8, 511, "pad64", 132) == 4
    assert prefill_splits(3, 8, 127, "pad64", 132) == 1         # no split keeps 64 keys
    top = prefill_split_tokens_max(132)
    assert top == 528
    for h in (1, 8, 16, 32, 64, 128):
        for v in prefill_variants(h):
            assert prefill_splits(top + 1, h, 1 << 20, v, 132) == 1
    assert prefill_split_spec(1024, 8, 2048, "native") == []
    (so, do), (sl, dl) = prefill_split_spec(32, 8, 2048, "pad64")
    assert so == (32, 4, 8, 512) and sl == (32, 4, 8) and do == dl == torch.float32
    assert prefill_split_spec(0, 8, 2048, "pad64") == []
    for bad, match in (((-1, 8, 2048), "num_tokens"), ((4, 8, -1), "topk"), ((4, 129, 2048), "num_heads"),
                       ((4, 64, 2048, "pad64"), "variant")):
        with pytest.raises(ValueError, match=match):
            prefill_split_spec(*bad)
    monkeypatch.setenv("DSATTN_PREFILL_SPLITS", "3")
    assert prefill_splits(4096, 8, 2048, "native", 132) == 3 and prefill_split_tokens_max(132) is None
    assert prefill_split_spec(5, 8, 64, "native")[0][0] == (5, 3, 8, 512)
    monkeypatch.setenv("DSATTN_PREFILL_SPLITS", "1")
    assert prefill_split_spec(5, 8, 2048, "native") == []
    for bad in ("0", "65", "x", "-2"):
        monkeypatch.setenv("DSATTN_PREFILL_SPLITS", bad)
        with pytest.raises(ValueError, match="DSATTN_PREFILL_SPLITS"):
            prefill_splits(5, 8, 2048, "native")


@pytest.mark.parametrize("bad, match", [
    ([torch.empty(3, 2, 8, 512)], r"split_scratch must hold the 2 tensors of prefill_split_spec"),
    (torch.empty(3, 2, 8, 512), r"split_scratch must hold the 2 tensors"),
    ([torch.empty(3, 2, 8, 512), torch.empty(3, 3, 8)], r"split_scratch\[1\] must have shape"),
    ([torch.empty(3, 2, 8, 512, dtype=torch.bfloat16), torch.empty(3, 2, 8)], r"split_scratch\[0\] must have dtype"),
    ([torch.empty(4, 2, 8, 512), torch.empty(4, 2, 8)], r"split_scratch\[0\] must have shape"),
    ([torch.empty(3, 0, 8, 512), torch.empty(3, 0, 8)], r"split_scratch\[0\] must have at least one split"),
    ([torch.empty(3, 2, 8, 1024)[..., ::2], torch.empty(3, 2, 8)], r"split_scratch\[0\]"),
    ([torch.empty(3, 2, 8, 512), torch.empty(3, 4, 8)[:, ::2]], r"split_scratch\[1\] must be contiguous"),
])
def test_prefill_split_scratch_rejected(bad, match):
    """A wrong split_scratch is a ValueError naming it, before anything runs or is written."""
    q, kv, idx = _inputs()
    out = torch.full((3, 8, 512), 7.0, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=match):
        sparse_mla_prefill(q, kv, idx, 0.1, out=out, split_scratch=bad)
    assert (out == 7).all()


def test_prefill_custom_op_traces_with_splits():
    """The prefill op with split partials (explicit, refilled with NaN before the call, and allocated by the plan at
    640 keys over 3 tokens) traces, and writes every element of NaN-poisoned out / lse within SPEC 3's tolerances of
    the reference (check_close)."""
    q, kv, idx = _inputs(k=640)
    from dsattn.ops.sparse_mla import prefill_split_spec
    split = [torch.empty(s, dtype=dt) for s, dt in prefill_split_spec(3, 8, 640, "pad64")]
    assert split

    def fn(q, kv, idx, out, lse, *split):
        return sparse_mla_prefill(q, kv, idx, 0.1, out=out, lse=lse, variant="pad64",
                                  split_scratch=list(split) or None)

    ref = sparse_mla_reference(q, kv, idx, 0.1)
    for args in (split, ()):
        for x in args:
            x.fill_(float("nan"))
        out, lse = poisoned_outputs(3, 8)
        torch.compile(fn, fullgraph=True, backend="aot_eager")(q, kv, idx, out, lse, *args)
        check_close(out, lse, *ref)


def test_next_pow2_matches_triton():
    """ops._triton.next_pow2 (launch code's power of two, without Triton's ConstexprFunction call) gives
    triton.next_power_of_2's values."""
    triton = pytest.importorskip("triton")
    from dsattn.ops._triton import next_pow2
    for n in list(range(0, 5000)) + [(1 << 20) - 1, 1 << 20, (1 << 20) + 1, (1 << 31) - 1]:
        assert next_pow2(n) == triton.next_power_of_2(n), n
