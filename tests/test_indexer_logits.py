"""Indexer logits kernels (ops/indexer/logits.py) under TRITON_INTERPRET=1 against the reference twins."""

from dsattn.ops._triton import allow_runtime_loop_bounds

allow_runtime_loop_bounds()

import pytest
import torch

from dsattn import formats
from dsattn.ops.cache.reference import write_indexer_cache_reference
from dsattn.ops.indexer import _paged_reference, indexer_logits, indexer_logits_paged
from dsattn.ops.indexer.logits import launch_logits, launch_logits_paged
from dsattn.ops.indexer.reference import indexer_logits_paged_reference, indexer_logits_relative_reference

pytestmark = pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)


def _q(t, h, dtype):
    q = torch.randn(t, h, 128)
    return q.to(formats.FP8) if dtype == "fp8" else q.bfloat16()


def _w(t, h):
    """Signed head weights (SPEC 4: logit = sum_h w * relu(<q, k>), and real models' w may be negative; with w >= 0
    a kernel applying relu after the weighting, or folding w into q, would pass): N(0, 1), head 0 of every row
    negative, so that each row has a negative head whatever the seed."""
    w = torch.randn(t, h)
    w[:, 0] = -w[:, 0].abs()
    return w


def _k(n, dtype):
    k = torch.randn(n, 128) * 3
    if dtype == "fp8":
        v, s = formats.quantize_fp8(k)
        return v, s[:, 0].contiguous()
    return k.bfloat16(), None


def _ragged(lengths, chunk):
    """Causal rows of requests laid out one after another: the last `chunk` tokens of each are queries."""
    ks, ke, start = [], [], 0
    for n, c in zip(lengths, chunk):
        for i in range(n - c, n):
            ks.append(start)
            ke.append(start + i + 1)
        start += n
    return torch.tensor(ks, dtype=torch.int32), torch.tensor(ke, dtype=torch.int32), start


def _check(out, ref):
    assert not out.isnan().any(), "every element must be written"
    assert torch.equal(out.isinf(), ref.isinf())
    fin = ref.isfinite()
    torch.testing.assert_close(out[fin], ref[fin], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("qd, kd", [("fp8", "fp8"), ("bf16", "bf16"), ("bf16", "fp8")])
@pytest.mark.parametrize("heads, bt, splits", [(4, 4, 1), (32, 1, 3), (3, 2, 2)])
def test_prefill_logits(qd, kd, heads, bt, splits):
    ks, ke, n = _ragged([21, 40], [5, 4])
    q, w = _q(len(ks), heads, qd), _w(len(ks), heads)
    k, k_scale = _k(n, kd)
    width = 44  # past every row: the tail is -inf
    out = torch.full((len(ks), width), float("nan"))
    launch_logits(q, w, k, k_scale, ks, ke, out, config=dict(BT=bt, splits=splits))
    _check(out, indexer_logits_relative_reference(q, w, k, k_scale, ks, ke, width))


def test_prefill_public_op_width_and_strides():
    ks, ke, n = _ragged([30], [6])
    q, w = _q(6, 8, "fp8"), _w(6, 16)[:, ::2]  # weights with a column stride
    k, k_scale = _k(n, "fp8")
    base = torch.full((6, 40), float("nan"))
    out = base[:, 3:23]  # width 20 < the longest row: keys past it are dropped
    got = indexer_logits(q, w, k, k_scale, ks, ke, out=out)
    assert got.data_ptr() == out.data_ptr()
    _check(out, indexer_logits_relative_reference(q, w, k, k_scale, ks, ke, 20))
    assert base[:, :3].isnan().all() and base[:, 23:].isnan().all()
    auto = indexer_logits(q, w, k, k_scale, ks, ke)  # width = max(ke - ks)
    _check(auto, indexer_logits_relative_reference(q, w, k, k_scale, ks, ke, 30))


def test_prefill_empty_rows():
    q, w = _q(3, 4, "fp8"), _w(3, 4)
    k, k_scale = _k(10, "fp8")
    ks = torch.tensor([4, 0, 7], dtype=torch.int32)
    ke = torch.tensor([4, 2, 3], dtype=torch.int32)  # empty, two keys, reversed (empty)
    out = torch.full((3, 5), float("nan"))
    launch_logits(q, w, k, k_scale, ks, ke, out)
    _check(out, indexer_logits_relative_reference(q, w, k, k_scale, ks, ke, 5))
    # an empty row may start past the keys (0 <= ks, ke <= N only bound the keys a row scores): the reference
    # gives its -inf row as the kernel does (it raised "ke must be <= 10" for a ke it raised itself)
    ks, ke = torch.tensor([12, 0, 30], dtype=torch.int32), torch.tensor([5, 2, 10], dtype=torch.int32)
    launch_logits(q, w, k, k_scale, ks, ke, out.fill_(float("nan")))
    want = indexer_logits_relative_reference(q, w, k, k_scale, ks, ke, 5)
    _check(out, want)
    assert torch.isneginf(want[[0, 2]]).all()


def _paged_cache(num_blocks, bs):
    cache = formats.new_indexer_cache(num_blocks, bs)
    write_indexer_cache_reference(torch.randn(num_blocks * bs, 128) * 2, cache, torch.arange(num_blocks * bs))
    return cache


@pytest.mark.parametrize("qd", ["fp8", "bf16"])
@pytest.mark.parametrize("heads, splits, preload", [(4, 1, True), (32, 3, True), (32, 3, False)])
def test_paged_logits(qd, heads, splits, preload):
    """Block size 8: the pipelined-load kernel (the tensor-descriptor one needs multiples of 32), its program's block
    ids loaded before its loop (the default) or each tile's in its own iteration."""
    bs, nb = 8, 9
    cache = _paged_cache(nb, bs)
    block_table = torch.randperm(nb).to(torch.int32)[:8].view(2, 4)
    row_req = torch.tensor([0, 0, 1, 1, 1], dtype=torch.int32)  # two tokens of one request, three of another
    row_len = torch.tensor([13, 14, 1, 2, 27], dtype=torch.int32)
    q, w = _q(5, heads, qd), _w(5, heads)
    width = 36
    out = torch.full((5, width), float("nan"))
    launch_logits_paged(q, w, cache, block_table, row_req, row_len, out, config=dict(splits=splits, preload=preload))
    ref = indexer_logits_paged_reference(q.float(), w, cache, block_table, row_req, row_len, max_len=width)
    _check(out, ref)


@pytest.mark.parametrize("qd", ["fp8", "bf16"])
@pytest.mark.parametrize("bs, splits", [(16, 2), (32, 1), (48, 3), (64, 3), (128, 2)])
def test_paged_logits_tma(qd, bs, splits, monkeypatch):
    """The key tiles by tensor descriptor (_paged_tma_kernel: block sizes that are multiples of 16; 48 takes 16-key
    tiles), with missing and out-of-range block ids, rows past the block table and a width past the longest row."""
    from dsattn.ops.indexer import logits
    monkeypatch.setattr(logits, "_paged_kernel", None)  # the other kernel must not run
    nb = 7
    cache = _paged_cache(nb, bs)
    block_table = torch.tensor([[3, -1, 0, 5], [6, 2, 99, 1]], dtype=torch.int32)
    row_req = torch.tensor([0, 0, 1, 1, 1], dtype=torch.int32)
    row_len = torch.tensor([bs + 5, 3 * bs, 1, 2 * bs + 7, 5 * bs], dtype=torch.int32)
    q, w = _q(5, 8, qd), _w(5, 8)
    width = 4 * bs + 40
    out = torch.full((5, width), float("nan"))
    launch_logits_paged(q, w, cache, block_table, row_req, row_len, out, config=dict(tma=True, splits=splits))
    ref = torch.empty_like(out)
    _paged_reference(q, w, cache, block_table, row_req, row_len, ref)
    _check(out, ref)
    assert out[0, bs:2 * bs].isinf().all() and out[4, 2 * bs:3 * bs].isinf().all() and out[4, 4 * bs:].isinf().all()


def test_paged_logits_tma_off_and_default_splits(monkeypatch):
    """The default config at block size 32 (the pipelined loads, their split rule) and tma=False (the pipelined
    loads at a block size the descriptor kernel could take) give the reference's logits. Block size 8 (not a
    multiple of 16) is test_paged_logits's."""
    from dsattn.ops.indexer import logits
    cache = _paged_cache(5, 32)
    block_table = torch.tensor([[4, 0, 2], [1, 3, -1]], dtype=torch.int32)
    row_req = torch.tensor([0, 1, 1], dtype=torch.int32)
    row_len = torch.tensor([90, 64, 33], dtype=torch.int32)
    q, w = _q(3, 16, "fp8"), _w(3, 16)
    ref = torch.empty(3, 100)
    _paged_reference(q, w, cache, block_table, row_req, row_len, ref)
    out = torch.full((3, 100), float("nan"))
    launch_logits_paged(q, w, cache, block_table, row_req, row_len, out)
    _check(out, ref)
    monkeypatch.setattr(logits, "_paged_tma_kernel", None)
    out.fill_(float("nan"))
    launch_logits_paged(q, w, cache, block_table, row_req, row_len, out, config=dict(tma=False))
    _check(out, ref)


@pytest.mark.parametrize("bs, kernel", [(64, "_paged_tma_kernel"), (128, "_paged_tma_kernel"), (32, "_paged_kernel"),
                                        (16, "_paged_kernel")])
def test_paged_default_kernel(bs, kernel, monkeypatch):
    """By default the descriptor kernel takes block sizes that are multiples of 64 (64-key tiles) and the pipelined
    loads the rest (16-key tiles lost to them, session 42)."""
    from dsattn.ops.indexer import logits
    other = "_paged_kernel" if kernel == "_paged_tma_kernel" else "_paged_tma_kernel"
    monkeypatch.setattr(logits, other, None)
    cache = _paged_cache(3, bs)
    block_table = torch.tensor([[2, 0, 1]], dtype=torch.int32)
    row_len = torch.tensor([bs + 3], dtype=torch.int32)
    q, w = _q(1, 4, "fp8"), _w(1, 4)
    out = torch.full((1, bs + 8), float("nan"))
    launch_logits_paged(q, w, cache, block_table, torch.zeros(1, dtype=torch.int32), row_len, out)
    ref = torch.empty_like(out)
    _paged_reference(q, w, cache, block_table, torch.zeros(1, dtype=torch.int32), row_len, ref)
    _check(out, ref)


def test_paged_splits():
    """One tile a program at few rows; otherwise >= 16 splits, <= one per 8 tiles, by the wave fill (H200: 132 SMs,
    7 fp8 programs an SM)."""
    from dsattn.ops.indexer.logits import paged_splits
    assert paged_splits(1, 64, 132, 7) == 64 and paged_splits(8, 71, 132, 7) == 71
    assert paged_splits(32, 95, 132, 7) == 16 and paged_splits(128, 191, 132, 7) == 16
    assert paged_splits(128, 1024, 132, 7) == 64  # 16 splits: three waves of 924 slots, the last a fifth full
    assert paged_splits(32, 2048, 132, 7) == 16  # one wave
    assert paged_splits(2, 2048, 132, 7) == 256  # few long rows: enough programs to keep the memory busy
    assert paged_splits(3, 4, 132, 7) == 4 and paged_splits(500, 10, 132, 7) == 10
    assert paged_splits(0, 0, 4, 7) == 1


def test_pipe_splits():
    """The pipelined-load kernel: one tile a program up to 4 x SMs programs, else about 4 x SMs programs, at most 64
    tiles a program."""
    from dsattn.ops.indexer.logits import pipe_splits
    assert pipe_splits(8, 18, 132) == 18 and pipe_splits(32, 16, 132) == 16
    assert pipe_splits(32, 264, 132) == 17 and pipe_splits(128, 48, 132) == 5 and pipe_splits(4, 264, 132) == 132
    assert pipe_splits(1000, 48, 132) == 1 and pipe_splits(1000, 264, 132) == 5 and pipe_splits(0, 0, 132) == 1


def test_paged_preload_pages_cap(monkeypatch):
    """PAGES: the next power of two past the pages a program's tiles touch (16-position tiles under the
    interpreter), 0 past 512 (block size 1 over 1024 positions in one program): block ids in each tile's
    iteration."""
    from dsattn.ops.indexer import logits
    seen = []

    class Spy:
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append(kw["PAGES"])
    monkeypatch.setattr(logits, "_paged_kernel", Spy())
    for bs, width, splits, want in ((1, 1024, 1, 0), (1, 256, 1, 512), (16, 48, 2, 4), (8, 48, 1, 8)):
        cache = formats.new_indexer_cache(2, bs)
        q, w = _q(1, 4, "fp8"), torch.randn(1, 4)
        out = torch.empty(1, width)
        launch_logits_paged(q, w, cache, torch.zeros(1, 1024, dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
                            torch.full((1,), out.shape[1], dtype=torch.int32), out, config=dict(splits=splits))
        assert seen[-1] == want, (bs, seen)


@pytest.mark.parametrize("bs, preload, splits", [(4, None, None), (4, True, 2), (4, False, 2), (12, True, 3),
                                                 (12, False, 3), (12, True, 1)])
def test_paged_bad_blocks_and_width(bs, preload, splits):
    """-1 and out-of-range block ids, rows past the block table, through the public op (default config) and the
    pipelined kernel with and without its preloaded block ids (block size 12: pages straddle the 16-position
    tiles)."""
    nb = 5
    cache = _paged_cache(nb, bs)
    block_table = torch.tensor([[2, -1, 4, 99], [0, 1, 3, 2]], dtype=torch.int32)  # -1 and past the cache
    row_req = torch.tensor([0, 1, 1], dtype=torch.int32)
    row_len = torch.tensor([4 * bs, 4 * bs + 14, 0], dtype=torch.int32)  # the second runs past the table
    q, w = _q(3, 4, "fp8"), _w(3, 4)
    out = torch.full((3, 5 * bs), float("nan"))
    if preload is None:
        got = indexer_logits_paged(q, w, cache, block_table, row_req, row_len, out=out)
    else:
        launch_logits_paged(q, w, cache, block_table, row_req, row_len, out,
                            config=dict(preload=preload, splits=splits))
        got = out
    ref = torch.empty_like(out)
    _paged_reference(q, w, cache, block_table, row_req, row_len, ref)
    _check(got, ref)
    assert got[0, bs:2 * bs].isinf().all() and got[0, 3 * bs:4 * bs].isinf().all() and got[1, 4 * bs:].isinf().all()
    assert got[0, :bs].isfinite().all()


@pytest.mark.parametrize("bad, match", [
    (dict(q=lambda a: a["q"].float()), "q must have dtype"),
    (dict(q=lambda a: a["q"][..., :64]), "head dim"),
    (dict(weights=lambda a: a["weights"][:, :2]), "weights must have shape"),
    (dict(k=lambda a: a["k"][:, :64]), "k must have shape"),
    (dict(k_scale=lambda a: None), "k_scale must be given"),
    (dict(k=lambda a: a["k"].float().bfloat16(), k_scale=lambda a: a["k_scale"]), "k_scale must be None"),
    (dict(ks=lambda a: a["ks"].long()), "ks must have dtype"),
    (dict(ke=lambda a: a["ke"][:2]), "ke must have shape"),
    (dict(out=lambda a: torch.empty(3, 8)[:, ::2]), "out must have a contiguous"),
    (dict(out=lambda a: torch.empty(2, 8)), "out must have one row"),
])
def test_logits_rejects(bad, match):
    args = dict(q=_q(3, 4, "fp8"), weights=torch.randn(3, 4))
    args["k"], args["k_scale"] = _k(10, "fp8")
    args["ks"] = torch.zeros(3, dtype=torch.int32)
    args["ke"] = torch.full((3,), 10, dtype=torch.int32)
    args["out"] = None
    for name, fn in bad.items():
        args[name] = fn(args)
    with pytest.raises(ValueError, match=match):
        indexer_logits(**args)


def test_paged_rejects():
    q, w = _q(2, 4, "fp8"), torch.randn(2, 4)
    cache = formats.new_indexer_cache(2, 4)
    bt = torch.zeros(1, 2, dtype=torch.int32)
    rr = torch.zeros(2, dtype=torch.int32)
    rl = torch.ones(2, dtype=torch.int32)
    with pytest.raises(ValueError, match="indexer_cache must have shape"):
        indexer_logits_paged(q, w, torch.empty(2, 4, 128, dtype=torch.uint8), bt, rr, rl)
    with pytest.raises(ValueError, match="block_table must have dtype"):
        indexer_logits_paged(q, w, cache, bt.long(), rr, rl)
    with pytest.raises(ValueError, match="row_len must have shape"):
        indexer_logits_paged(q, w, cache, bt, rr, rl[:1])


def _wide_q(t, heads):
    """bf16 queries whose heads span the range: 2^-100 .. 2^100 times N(0, 1), one head zero, one holding a value 2^-20
    of its largest (every kernel scales each head by its own power of two into fp16, _q_fp16)."""
    q = torch.randn(t, heads, 128)
    q *= torch.tensor([2.0 ** e for e in (0, -100, 100, -30, 40, 7, -3, 12)])[torch.arange(heads) % 8][None, :, None]
    q[:, 1 % heads] = 0
    q[:, -1, 5] = q[:, -1].abs().amax(-1) * 2.0 ** -20
    return q.bfloat16()


@pytest.mark.parametrize("kind", ["prefill", "paged", "paged_tma"])
def test_bf16_queries_fp16_products(kind, monkeypatch):
    """bf16 queries over fp8 keys run as power-of-two scaled fp16 products: the logits equal the bf16 products'
    (config dot="bf16") bit for bit, over heads of every magnitude, and the reference's."""
    from dsattn.ops.indexer import logits
    heads = 16
    if kind == "prefill":
        ks, ke, n = _ragged([21, 40], [5, 4])
        q, w = _wide_q(len(ks), heads), _w(len(ks), heads)
        k, k_scale = _k(n, "fp8")

        def run(out, dot):
            launch_logits(q, w, k, k_scale, ks, ke, out, config=dict(BT=2, splits=2, dot=dot))

        def reference(w):
            return indexer_logits_relative_reference(q, w, k, k_scale, ks, ke, 44)
    else:
        monkeypatch.setattr(logits, "_paged_kernel" if kind == "paged_tma" else "_paged_tma_kernel", None)
        bs = 32 if kind == "paged_tma" else 8
        cache = _paged_cache(6, bs)
        block_table = torch.tensor([[3, 0, 5], [1, -1, 2]], dtype=torch.int32)
        row_req = torch.tensor([0, 1, 1], dtype=torch.int32)
        row_len = torch.tensor([3 * bs, 2 * bs + 3, 5], dtype=torch.int32)
        q, w = _wide_q(3, heads), _w(3, heads)
        cfg = dict(tma=kind == "paged_tma", splits=2)

        def run(out, dot):
            launch_logits_paged(q, w, cache, block_table, row_req, row_len, out, config=dict(cfg, dot=dot))

        def reference(w):
            ref = torch.empty(3, 3 * bs + 4)
            _paged_reference(q, w, cache, block_table, row_req, row_len, ref)
            return ref
    ref = reference(w)
    got, want = torch.full_like(ref, float("nan")), torch.full_like(ref, float("nan"))
    run(got, None)
    run(want, "bf16")
    assert torch.equal(got, want)
    fin = ref.isfinite()
    assert torch.equal(fin, got.isfinite())
    # within 1e-5 of each logit's scale before its heads' signed terms cancel, sum_h |w| relu(<q, k>) (with w >= 0:
    # rtol 1e-5); the 2^100 heads' terms dominate
    mag, err = reference(w.abs())[fin], (got[fin] - ref[fin]).abs()
    assert (err <= 1e-5 * mag).all(), float((err / mag).nan_to_num(float("inf")).max())


def test_dot_operands():
    from dsattn.ops.indexer.logits import _dot_operands, tl
    assert _dot_operands(formats.FP8, formats.FP8, None) == (tl.float8e4nv, False)
    assert _dot_operands(torch.bfloat16, formats.FP8, None) == (tl.float16, True)
    assert _dot_operands(torch.bfloat16, torch.bfloat16, None) == (tl.bfloat16, False)
    assert _dot_operands(formats.FP8, torch.bfloat16, None) == (tl.bfloat16, False)
    assert _dot_operands(torch.bfloat16, formats.FP8, "bf16") == (tl.bfloat16, False)
    with pytest.raises(ValueError, match="config dot"):
        _dot_operands(torch.bfloat16, formats.FP8, "fp16")
