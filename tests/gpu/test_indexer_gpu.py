"""Indexer kernels on the GPU at real sizes: logits, top-k sets, recall under fp8, k-pool, cache writes."""
import pytest
import torch

from dsattn import formats
from dsattn.ops.cache import write_indexer_cache, write_kv_and_indexer_cache, write_kv_cache
from dsattn.ops.cache.reference import write_indexer_cache_reference, write_kv_cache_reference
from dsattn.ops.indexer import indexer_logits, indexer_logits_paged, kpool_update
from dsattn.ops.indexer import reference as ref
from dsattn.ops.topk import topk
from dsattn.ops.topk.reference import topk_reference

pytestmark = pytest.mark.gpu
DEV = "cuda"


def _sets_equal(a, b):
    return (a.sort(dim=1).values == b.sort(dim=1).values).all(dim=1)


def _quantized_q(q, w):
    """fp8 q with its per-(token, head) scale folded into the weights, as the model does."""
    v, s = formats.quantize_fp8(q)
    return v, w * s[..., 0]


@pytest.mark.parametrize("heads", [32, 64])
@pytest.mark.parametrize("dtype", ["fp8", "bf16"])
def test_prefill_logits(heads, dtype):
    rows, ctx = 384, 12000
    qf, w = torch.randn(rows, heads, 128, device=DEV), torch.randn(rows, heads, device=DEV) / 64
    kf = torch.randn(ctx, 128, device=DEV)
    if dtype == "fp8":
        q, w = _quantized_q(qf, w)
        k, k_scale = formats.quantize_fp8(kf)
        k_scale = k_scale[:, 0].contiguous()
    else:
        q, k, k_scale = qf.bfloat16(), kf.bfloat16(), None
    ks = torch.randint(0, 50, (rows,), device=DEV, dtype=torch.int32)
    ke = torch.randint(ctx - 3000, ctx + 1, (rows,), device=DEV, dtype=torch.int32)
    ke[:7] = ks[:7] + torch.arange(7, device=DEV, dtype=torch.int32)  # short and empty rows
    width = ctx + 5
    out = torch.full((rows, width), float("nan"), device=DEV)
    indexer_logits(q, w, k, k_scale, ks, ke, out=out)
    want = ref.indexer_logits_relative_reference(q, w, k, k_scale, ks, ke, width)
    assert not out.isnan().any()
    assert torch.equal(out.isinf(), want.isinf())
    fin = want.isfinite()
    scale = want[fin].abs().max()
    # fp8 tensor cores accumulate with reduced precision: compare against the logits' scale
    torch.testing.assert_close(out[fin], want[fin], rtol=2e-3, atol=2e-3 * float(scale))


PAGED_CONFIGS = {"default": None, "tma_s4_split16": dict(tma=True, num_stages=4, splits=16),
                 "tma_s6_split3": dict(tma=True, num_stages=6, splits=3), "pipe": dict(tma=False),
                 "pipe_split3": dict(tma=False, splits=3), "pipe_nopreload": dict(tma=False, preload=False),
                 "pipe_nopreload_split3": dict(tma=False, preload=False, splits=3)}


@pytest.mark.parametrize("impl", list(PAGED_CONFIGS))
@pytest.mark.parametrize("qd", ["fp8", "bf16"])
@pytest.mark.parametrize("next_n", [1, 2])
def test_paged_logits(next_n, qd, impl):
    """The public op's default (key tiles by tensor descriptor) and each kernel of launch_logits_paged at other
    settings, fp8 and bf16 queries."""
    reqs, bs, blocks_per_req, heads = 24, 64, 40, 32
    nb = reqs * blocks_per_req + 3
    cache = formats.new_indexer_cache(nb, bs, device=DEV)
    write_indexer_cache(torch.randn(nb * bs, 128, device=DEV), cache, torch.arange(nb * bs, device=DEV))
    table = torch.randperm(nb, device=DEV)[: reqs * blocks_per_req].to(torch.int32).view(reqs, blocks_per_req)
    t = reqs * next_n
    row_req = torch.arange(reqs, device=DEV, dtype=torch.int32).repeat_interleave(next_n)
    row_len = torch.randint(0, blocks_per_req * bs + 1, (t,), device=DEV, dtype=torch.int32)
    q, w = _quantized_q(torch.randn(t, heads, 128, device=DEV), torch.randn(t, heads, device=DEV) / 64)
    out = torch.full((t, blocks_per_req * bs), float("nan"), device=DEV)
    if qd == "bf16":
        q = q.float().bfloat16()
    if PAGED_CONFIGS[impl] is None:
        indexer_logits_paged(q, w, cache, table, row_req, row_len, out=out)
    else:
        from dsattn.ops.indexer.logits import launch_logits_paged
        launch_logits_paged(q, w, cache, table, row_req, row_len, out, PAGED_CONFIGS[impl])
    want = ref.indexer_logits_paged_reference(q.float(), w, cache, table, row_req, row_len, max_len=out.shape[1])
    assert torch.equal(out.isinf(), want.isinf()) and not out.isnan().any()
    fin = want.isfinite()
    torch.testing.assert_close(out[fin], want[fin], rtol=2e-3, atol=2e-3 * float(want[fin].abs().max()))


@pytest.mark.parametrize("impl", list(PAGED_CONFIGS))
@pytest.mark.parametrize("bs", [32, 64, 16])
def test_paged_logits_bad_blocks(impl, bs):
    """Missing (-1) and out-of-range block ids score -inf and are never read (their cache rows hold NaN); rows past
    the block table; block sizes 16 (no tensor descriptor: the other kernel), 32 and 64."""
    from dsattn.ops.indexer import _paged_reference
    reqs, blocks_per_req, heads = 6, 12, 64
    nb = reqs * blocks_per_req + 2
    cache = formats.new_indexer_cache(nb, bs, device=DEV)
    write_indexer_cache(torch.randn(nb * bs, 128, device=DEV), cache, torch.arange(nb * bs, device=DEV))
    table = torch.randperm(nb - 2, device=DEV).to(torch.int32).view(reqs, blocks_per_req)
    table[0, 3] = -1
    table[1, 5] = nb + 1000
    cache[nb - 1] = 255  # NaN bytes (fp8 e4m3 0xff is NaN; the scale bytes too): a block no row may read
    table[2, 0] = -7
    row_req = torch.arange(reqs, device=DEV, dtype=torch.int32)
    row_len = torch.tensor([blocks_per_req * bs, blocks_per_req * bs - 3, 5 * bs + 1, 0, 1, blocks_per_req * bs + 40],
                           device=DEV, dtype=torch.int32)
    q, w = _quantized_q(torch.randn(reqs, heads, 128, device=DEV), torch.randn(reqs, heads, device=DEV) / 64)
    out = torch.full((reqs, blocks_per_req * bs + 64), float("nan"), device=DEV)
    if PAGED_CONFIGS[impl] is None:
        indexer_logits_paged(q, w, cache, table, row_req, row_len, out=out)
    else:
        from dsattn.ops.indexer.logits import launch_logits_paged
        launch_logits_paged(q, w, cache, table, row_req, row_len, out, PAGED_CONFIGS[impl])
    want = torch.empty_like(out)
    _paged_reference(q, w, cache, table, row_req, row_len, want)
    assert torch.equal(out.isinf(), want.isinf()) and not out.isnan().any()
    assert out[0, 3 * bs:4 * bs].isinf().all() and out[1, 5 * bs:6 * bs].isinf().all() and out[2, :bs].isinf().all()
    fin = want.isfinite()
    torch.testing.assert_close(out[fin], want[fin], rtol=2e-3, atol=2e-3 * float(want[fin].abs().max()))

@pytest.mark.parametrize("kind", ["prefill", "paged_tma", "paged_pipe"])
def test_bf16_queries_fp16_products(kind):
    """bf16 queries over fp8 keys run as power-of-two scaled fp16 products (logits._q_fp16): the logits are the
    bf16 products' (config dot="bf16") over heads of every magnitude (a zero head, 2^-60 .. 2^20), and the
    reference's."""
    from dsattn.ops.indexer.logits import launch_logits, launch_logits_paged
    heads = 32
    mags = torch.tensor([1.0, 2.0 ** -20, 2.0 ** 20, 2.0 ** -60, 0.0, 2.0 ** 7, 3.0, 2.0 ** -3], device=DEV)
    if kind == "prefill":
        rows, ctx = 300, 5000
        k, k_scale = formats.quantize_fp8(torch.randn(ctx, 128, device=DEV))
        k_scale = k_scale[:, 0].contiguous()
        ks = torch.randint(0, 50, (rows,), device=DEV, dtype=torch.int32)
        ke = torch.randint(ctx - 2000, ctx + 1, (rows,), device=DEV, dtype=torch.int32)
        width = ctx + 3

        def run(q, w, out, dot):
            launch_logits(q, w, k, k_scale, ks, ke, out, dict(dot=dot))

        def want_of(q, w):
            return ref.indexer_logits_relative_reference(q, w, k, k_scale, ks, ke, width)
    else:
        reqs, bs, per = 40, 64, 30
        nb = reqs * per + 1
        cache = formats.new_indexer_cache(nb, bs, device=DEV)
        write_indexer_cache(torch.randn(nb * bs, 128, device=DEV), cache, torch.arange(nb * bs, device=DEV))
        table = torch.randperm(nb, device=DEV)[: reqs * per].to(torch.int32).view(reqs, per)
        rows = reqs
        row_req = torch.arange(reqs, device=DEV, dtype=torch.int32)
        row_len = torch.randint(1, per * bs + 1, (reqs,), device=DEV, dtype=torch.int32)
        width = per * bs
        tma = kind == "paged_tma"

        def run(q, w, out, dot):
            launch_logits_paged(q, w, cache, table, row_req, row_len, out, dict(tma=tma, dot=dot))

        def want_of(q, w):
            return ref.indexer_logits_paged_reference(q.float(), w, cache, table, row_req, row_len, max_len=width)
    q = (torch.randn(rows, heads, 128, device=DEV) * mags.repeat(heads // 8)[None, :, None]).bfloat16()
    w = torch.randn(rows, heads, device=DEV) / 64  # signed, as real models' (SPEC 4)
    got = torch.full((rows, width), float("nan"), device=DEV)
    old = torch.full((rows, width), float("nan"), device=DEV)
    run(q, w, got, None)
    run(q, w, old, "bf16")
    want = want_of(q, w)
    assert torch.equal(got.isinf(), want.isinf()) and not got.isnan().any()
    fin = want.isfinite()
    # within 1e-6 of each logit's scale before its heads' signed terms cancel, sum_h |w| relu(<q, k>) (with w >= 0:
    # rtol 1e-6)
    mag, err = want_of(q, w.abs())[fin], (got[fin] - old[fin]).abs()
    assert (err <= 1e-6 * mag).all(), float((err / mag).nan_to_num(float("inf")).max())
    torch.testing.assert_close(got[fin], want[fin], rtol=2e-3, atol=2e-3 * float(want[fin].abs().max()))


# the public op (its default version: on sm_90 the Gluon select wherever the rows fit its capacity, up to 8192
# columns at few rows, session 48), and the Triton kernels' knobs (gluon=False, so that rows that fit the capacity take
# the Triton select with those knobs, as before session 48): v4 with several filter programs per row (candidates in
# any order), with one (column order), and with the histogram select; the split select and threshold
TOPK_IMPLS = {"default": None, "v4": dict(version=4), "v4_segs1": dict(version=4, segs=1, gluon=False),
              "v4_hist": dict(version=4, mode=1, select_maxnreg=128, gluon=False), "v3": dict(version=3),
              "v4_split": dict(version=4, split=4, select_maxnreg=128, tau_mode=2, tau_top=10, tau_split=5,
                               gluon=False),
              "v4_split_segs1": dict(version=4, segs=1, split=4, tau_mode=2, tau_split=5, gluon=False),
              # early-stopping steps (select and threshold); with the threshold fused into the filter,
              # which needs one filter program per row (segs=1: 64 rows would otherwise take several)
              "v4_early": dict(version=4, early=True, tau_early=True, gluon=False),
              "v4_fuse_early_segs1": dict(version=4, segs=1, fuse_tau=True, early=True, tau_early=True, gluon=False),
              # the default before those knobs (full steps, tie scan, separate threshold launch)
              "v4_d2": dict(version=4, early=False, tau_early=False, fuse_tau=False, gluon=False),
              # long rows in three launches always, and in one (_v4_fused: every tile's program finds the threshold,
              # the last of a row to finish selects; the default for few rows) always
              "v4_3l": dict(version=4, fused=False, gluon=False), "v4_fused": dict(version=4, fused=True, gluon=False),
              # rows that fit the capacity by the Gluon select (session 48; the default on sm_90) and by the Triton one
              "v4_gluon": dict(version=4, gluon=True), "v4_gluon_w16": dict(version=4, gluon=True, gluon_warps=16),
              "v4_triton": dict(version=4, gluon=False)}


@pytest.mark.parametrize("impl", list(TOPK_IMPLS))
@pytest.mark.parametrize("width, k", [(65536, 2048), (200000, 2048), (5000, 2048), (70000, 512), (65536, 8192),
                                      (8192, 2048), (1040, 512), (2048, 512), (16384, 2048), (4160, 512),
                                      (12000, 8192)])
def test_topk_sets(width, k, impl):
    """Sets and column order. At widths 5000, 8192 (k 2048), 1040 and 2048 (k 512) the v4 entries select the 64 rows in
    registers at twice the usual capacity (select_capacity); v3 keeps its three stages. Where the Gluon select runs
    (the default and v4_gluon*), 4160 (k 512) is one launch of it too (gluon_select.wide_capacity); the Triton entries
    take it as long rows. 16384 (k 2048) and 12000 (k 8192) are long rows (or, at k 8192, the Triton select) for
    every entry."""
    rows = 64
    x = torch.randn(rows, width, device=DEV)
    x[1] = torch.randint(0, 16, (width,), device=DEV).float()  # heavy ties: the exact fallback
    x[2, : width // 2] = float("-inf")
    x[6, ::97] = 3.0  # ties straddling the k-th largest, spread over the row (and the filter's programs)
    x[7] = torch.randn(width, device=DEV).sort().values  # the largest keys in one stretch at the end
    lengths = torch.randint(0, width + 1, (rows,), device=DEV, dtype=torch.int32)
    lengths[:4] = width
    lengths[4] = k - 1
    lengths[5] = 0
    lengths[6:8] = width
    out = torch.full((rows, k), -7, dtype=torch.int32, device=DEV)
    if TOPK_IMPLS[impl] is None:
        topk(x, lengths, k, out=out)
    else:
        from dsattn.ops.topk import topk_scratch_spec
        from dsattn.ops.topk.select import launch_topk
        (shape, dtype), = topk_scratch_spec(rows, width, k)
        scratch = torch.full(shape, -5, dtype=dtype, device=DEV)
        launch_topk(x, lengths, k, out, scratch, **TOPK_IMPLS[impl])
    want = topk_reference(x, torch.zeros_like(lengths), lengths, k)
    assert _sets_equal(out, want).all()
    # every version and knob lists each row in ascending column order (64 rows take several filter programs a
    # row unless segs=1: their atomics order the candidates, the select orders the output)
    n = (out >= 0).sum(1, keepdim=True)
    valid = torch.arange(k, device=DEV)[None, :] < n
    assert torch.equal(torch.where(valid, out, 2**31 - 1).sort(1).values, torch.where(valid, out, 2**31 - 1))


@pytest.mark.parametrize("width, k, warps, ctas", [
    (4160, 2048, None, 1), (8192, 2048, None, 1), (8192, 2048, 16, 1), (4096, 2048, None, 1), (4096, 2048, 16, 1),
    (1040, 512, None, 1), (2048, 512, 8, 1), (300, 128, None, 1), (3000, 1024, 4, 1),
    # one row over a thread-block cluster
    (4160, 2048, None, 2), (4160, 2048, None, 4), (4160, 2048, 4, 8), (8192, 2048, None, 8), (8192, 2048, 16, 4),
    (4096, 2048, None, 4), (1040, 512, None, 2), (2048, 512, None, 8), (300, 128, None, 2), (3000, 1024, 4, 4)])
def test_topk_gluon_select_rows(width, k, warps, ctas):
    """The Gluon select (topk.gluon_select, rows that fit the capacity; ctas > 1: a row over a thread-block cluster)
    on rows built to take each of its paths: the same columns in the same order as the Triton select (gluon=False),
    the reference's sets, every output entry written; then captured in a CUDA graph and replayed over new logits."""
    from dsattn.ops.topk.select import launch_topk_v4
    rows = 24
    cap = max(2 * k, 1 << (width - 1).bit_length())
    g = torch.Generator(device=DEV).manual_seed(width + k)
    x = torch.randn(rows, width, device=DEV, generator=g)
    x[1] = 5.0                                                              # every key equal (no pass at all)
    x[2] = torch.randint(0, 4, (width,), device=DEV, generator=g).float()   # four values: ties at the cut
    x[3, ::2] = 0.0
    x[3, 1::2] = -0.0                                                       # -0.0 and +0.0 tie
    x[4, : width // 2] = float("-inf")
    x[5] = torch.randn(width, device=DEV, generator=g) * 10.0 ** torch.randint(-30, 30, (width,), device=DEV,
                                                                               generator=g)  # many binades, signs
    x[6] = x[6].sort().values                                               # the largest at the end
    x[7] = x[7].sort(descending=True).values
    x[8] = 1.0 + (torch.arange(width, device=DEV) % 3) * 2.0 ** -23         # keys differing in the last bit only
    x[9, ::7] = 3.0                                                         # ties spread over the row
    x[16] = float("-inf")
    lengths = torch.full((rows,), width, device=DEV, dtype=torch.int32)
    lengths[10] = 0
    lengths[11] = k - 1
    lengths[12] = k
    lengths[13] = k + 1
    lengths[14] = torch.randint(k + 2, width + 1, (1,), device=DEV, generator=g)
    lengths[15] = 1
    lengths[17] = min(2 * k, width)
    lengths[18] = -3
    lengths[19] = width + 100
    scratch = torch.empty(rows, 0, dtype=torch.int32, device=DEV)

    def run(gluon, x):
        out = torch.full((rows, k), -7, dtype=torch.int32, device=DEV)
        launch_topk_v4(x, lengths, k, out, scratch, cap=cap, gluon=gluon, gluon_warps=warps, gluon_ctas=ctas)
        return out
    got = run(True, x)
    assert (got != -7).all()
    assert torch.equal(got, run(False, x))
    assert _sets_equal(got, topk_reference(x, torch.zeros_like(lengths), lengths.clamp(0, width), k)).all()
    for bits in (5, 10):  # other bits a pass
        again = torch.full((rows, k), -7, dtype=torch.int32, device=DEV)
        launch_topk_v4(x, lengths, k, again, scratch, cap=cap, gluon=True, gluon_warps=warps, gluon_bits=bits,
                       gluon_ctas=ctas)
        assert torch.equal(again, got)
    out = torch.full((rows, k), -7, dtype=torch.int32, device=DEV)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch_topk_v4(x, lengths, k, out, scratch, cap=cap, gluon=True, gluon_warps=warps, gluon_ctas=ctas)
    for _ in range(2):
        x.copy_(torch.randn(rows, width, device=DEV, generator=g))
        out.fill_(-7)
        graph.replay()
        assert torch.equal(out, run(False, x))


@pytest.mark.parametrize("width, k, ctas", [(65536, 2048, 8), (65536, 8192, 4), (32768, 2048, 2), (40000, 512, 8),
                                           (16384, 2048, 2)])
def test_topk_gluon_cluster_ties(width, k, ctas):
    """Rows over a cluster with more ties at the k-th largest than 16 bits of a packed count hold (the emit's
    gt | eq << 16 words; session 53: 8 x 65536 of +-0.0 hit an illegal instruction before a CTA's count was kept apart
    from the row's): every key equal, +0.0 / -0.0 alternating, k / 2 winners then +-0.0, four values, and a row
    whose only valid columns lie in the first CTA; the reference's sets (ties toward the lower column) in ascending
    column order, every entry written."""
    from dsattn.ops.topk.select import launch_topk_v4
    rows = 6
    cap = 1 << (width - 1).bit_length()
    g = torch.Generator(device=DEV).manual_seed(width + k + ctas)
    x = torch.empty(rows, width, device=DEV)
    x[0] = 2.0
    x[1, ::2] = 0.0
    x[1, 1::2] = -0.0
    x[2] = -1.0 - torch.rand(width, device=DEV, generator=g)
    x[2, : k // 2] = 1.0
    x[2, k // 2:: 3] = 0.0
    x[2, k // 2 + 1:: 3] = -0.0
    x[3] = torch.randint(0, 4, (width,), device=DEV, generator=g).float()
    x[4] = x[2].flip(0)
    x[5] = torch.randn(width, device=DEV, generator=g)
    lengths = torch.full((rows,), width, device=DEV, dtype=torch.int32)
    lengths[5] = k + 7
    out = torch.full((rows, k), -7, dtype=torch.int32, device=DEV)
    launch_topk_v4(x, lengths, k, out, torch.empty(rows, 0, dtype=torch.int32, device=DEV), cap=cap, gluon=True,
                   gluon_ctas=ctas)
    torch.cuda.synchronize()
    assert (out != -7).all()
    assert _sets_equal(out, topk_reference(x, torch.zeros_like(lengths), lengths, k)).all()
    assert torch.equal(out.sort(1).values, out)
    assert torch.equal(out[0], torch.arange(k, device=DEV, dtype=torch.int32))  # every key equal: the first k


@pytest.mark.parametrize("rows, width, k", [(128, 4160, 512), (3, 8192, 512), (40, 6000, 1024), (264, 3000, 512),
                                           (5, 12000, 2048), (1, 16384, 2048), (32, 10176, 2048), (40, 12000, 2048),
                                           (132, 16384, 2048), (50, 12000, 8192), (150, 12000, 2048),
                                           (1, 16385, 2048), (8, 32768, 2048), (4, 65536, 2048), (15, 40000, 2048),
                                           (16, 16880, 512), (30, 30000, 2048), (17, 40000, 2048), (31, 30000, 2048)])
def test_topk_gluon_wide_rows(rows, width, k):
    """Rows past select_capacity's capacity but within 8192 columns at <= 2 x SMs rows, or over a cluster
    (gluon_select.default_ctas: 4 CTAs at <= 33 rows and 2 at <= SMs rows within 16384 columns; past them 8 at <= 15
    rows, 4 at <= 30 within 32768 columns and at 16 past them): the default launch takes them in one launch of the Gluon select
    (gluon_select.wide_capacity); the same columns in the same order as the Triton kernels' long-row path
    (gluon=False), the reference's sets, ragged lengths and -inf stretches included (150 x 12000, 17 x 40000 and
    31 x 30000: both take the long-row path)."""
    from dsattn.ops.topk import topk_scratch_spec
    from dsattn.ops.topk.select import launch_topk_v4
    g = torch.Generator(device=DEV).manual_seed(rows * width + k)
    x = torch.randn(rows, width, device=DEV, generator=g)
    x[0, : width // 3] = float("-inf")
    x[-1] = torch.randint(0, 64, (width,), device=DEV, generator=g).float()
    lengths = torch.randint(k // 2, width + 1, (rows,), device=DEV, dtype=torch.int32, generator=g)
    lengths[0] = width
    (shape, dtype), = topk_scratch_spec(rows, width, k)
    outs = []
    for gluon in (None, False):
        out = torch.full((rows, k), -7, dtype=torch.int32, device=DEV)
        launch_topk_v4(x, lengths, k, out, torch.full(shape, -5, dtype=dtype, device=DEV), gluon=gluon)
        outs.append(out)
    assert torch.equal(outs[0], outs[1])
    assert _sets_equal(outs[0], topk_reference(x, torch.zeros_like(lengths), lengths, k)).all()


@pytest.mark.parametrize("keys, weights, floor", [("iid", "positive", 0.95), ("heavy", "positive", 0.98),
                                                  ("iid", "signed", 0.95), ("heavy", "signed", 0.95)])
def test_indexer_topk_recall_and_same_input_sets(keys, weights, floor):
    """Top-2048 of fp8 logits (q and k quantized per 128 values) against the unquantized fp32 top-2048,
    and against the reference on the same quantized inputs (sets differ only by near-ties).

    iid: every key N(0, 1), so most keys score alike and fp8 noise reorders many near the cut;
    heavy: key norms log-normal (sigma 0.5) around a shared direction, as trained keys tend to be.
    positive: head weights >= 0 (where relu(w s) = w relu(s)); signed: N(0, 1) weights, as the model's weight
    projection gives them, where the k-th logit can sit near zero.

    Recall floors from `bench/indexer_recall.py` on the CPU (the same generators; the fp8 format's own recall, which
    the kernels reproduce up to near-ties): positive 0.965 iid / 0.982 heavy (GPU, w >= 0: 0.9654 / 0.9826,
    bench/logs/indexer_gpu_topk_recall.log); signed 0.964-0.965 both (`--weights signed --rows 256`, seeds 0-2,
    bench/results/indexer_recall_signed_cpu*.json). 0.98 is SPEC 4's figure; only positive heavy keys reach it.
    A near-tie is measured against the row's largest logit with |w| (the scale of the summed terms, hence of the
    fp8 accumulation's error): with signed weights the k-th logit itself falls to 1e-4 of that in some rows (the same
    files' `k-th / |w| scale`)."""
    rows, ctx, heads, k = 256, 32768, 32, 2048
    qf = torch.randn(rows, heads, 128, device=DEV)
    draw = torch.rand if weights == "positive" else torch.randn
    w = draw(rows, heads, device=DEV) * heads ** -0.5 * 128 ** -0.5
    kf = torch.randn(ctx, 128, device=DEV)
    if keys == "heavy":
        kf = (kf + torch.randn(1, 128, device=DEV)) * torch.exp(0.5 * torch.randn(ctx, 1, device=DEV))
    ks = torch.zeros(rows, dtype=torch.int32, device=DEV)
    ke = torch.arange(ctx - rows + 1, ctx + 1, dtype=torch.int32, device=DEV)
    q8, w8 = _quantized_q(qf, w)
    k8, k_scale = formats.quantize_fp8(kf)
    k_scale = k_scale[:, 0].contiguous()
    logits = indexer_logits(q8, w8, k8, k_scale, ks, ke)
    got = topk(logits, ke - ks, k)
    exact = ref.indexer_logits_relative_reference(qf, w, kf, None, ks, ke, ctx)
    want = topk_reference(exact, ks, ke, k)
    hits = torch.zeros(rows, ctx + 1, dtype=torch.int32, device=DEV)
    hits.scatter_add_(1, want.long().clamp_min(0), torch.ones_like(want))
    recall = float(hits.gather(1, got.long().clamp_min(0)).clamp_max(1).sum()) / (rows * k)
    same = ref.indexer_logits_relative_reference(q8, w8, k8, k_scale, ks, ke, ctx)
    want_same = topk_reference(same, ks, ke, k)
    terms = ref.indexer_logits_relative_reference(q8, w8.abs(), k8, k_scale, ks, ke, ctx)
    scale = terms.masked_fill(terms.isinf(), 0).amax(1)
    # a swap is a near-tie when the kernel's pick scores within a hair of the k-th reference logit
    kth = same.gather(1, want_same.long()).min(dim=1).values
    picked = same.gather(1, got.long())
    gap = float(((kth[:, None] - picked).clamp_min(0) / scale[:, None]).max())
    n_same = int(_sets_equal(got, want_same).sum())
    msg = (f"{keys}, {weights} weights: recall {recall:.4f}, same sets {n_same}/{rows}, "
           f"worst swap {gap:.2e} of the row's |w| logit scale")
    print(msg)
    assert gap <= 1e-3, msg
    assert recall >= floor, msg


def test_kpool_update_gpu():
    p, bs, n = 4, 64, 3000
    nb = n // bs + 2
    table = torch.randperm(nb, device=DEV).to(torch.int32).view(1, nb)
    pooled = formats.new_indexer_cache(nb, bs // p, device=DEV).fill_(0x5A)
    tail = torch.randn(1, p - 1, 256, device=DEV)
    args = [torch.randn(n, 128, device=DEV).bfloat16(), torch.randn(n, 128, device=DEV), torch.randn(p, 128, device=DEV),
            torch.arange(2, n + 2, dtype=torch.int32, device=DEV), torch.zeros(n, dtype=torch.int32, device=DEV), table]
    pooled_ref, tail_ref = pooled.cpu(), tail.cpu()
    slot = torch.zeros(1, dtype=torch.int32, device=DEV)
    kpool_update(*args, pooled, tail, slot)
    ref.kpool_update_reference(*[a.cpu() for a in args], pooled_ref, tail_ref, slot.cpu())
    assert torch.equal(tail.cpu(), tail_ref)
    got, want = formats.dequantize_indexer_cache(pooled.cpu()), formats.dequantize_indexer_cache(pooled_ref)
    # exp on the GPU and the CPU differ in the last bit: allow one fp8 step where rounding flips
    assert ((got - want).abs() <= want.abs() / 8 + 1e-6).all()
    assert (got == want).float().mean() > 0.999


def _same_tail(a, b):
    """Tail states equal bit for bit, NaN (the poison: never written) where one is NaN."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def _pooled_close(got, want):
    """The pooled cache `got` (GPU) against the reference's `want` (CPU), both filled with 0x5A bytes before: slots the
    reference left untouched still hold the poison, written ones are within one fp8 step (exp on the GPU and the CPU
    differ in the last bit, and a pooled value near a rounding boundary can flip), nearly all of them equal."""
    blank = formats.dequantize_indexer_cache(torch.full_like(want, 0x5A))
    got, want = formats.dequantize_indexer_cache(got.cpu()), formats.dequantize_indexer_cache(want)
    written = (want != blank).any(1)
    assert written.any()
    assert torch.equal(got[~written], want[~written])
    got, want = got[written], want[written]
    assert ((got - want).abs() <= want.abs() / 8 + 1e-6).all()
    assert (got == want).float().mean() > 0.999


def test_kpool_update_single_token_steps_gpu():
    """Decode steps of 300 requests (one token each) through the one-launch update (session 45), after a prefill
    chunk through the two-launch one (as tests/test_kpool.py: the tail state starts as NaN, the pooled cache as 0x5A
    bytes, so that a member read from a tail entry no step wrote, or a write off its slot, shows), P + 2 steps so
    that every request completes a pool during them: step by step, the pooled cache and the tail state as the
    two-launch update leaves them (bit for bit) and as the reference does (the tail state bit for bit, the pooled
    cache up to the GPU's exp: _pooled_close)."""
    p, bs, reqs = 4, 64, 300
    table = torch.randperm(reqs * 2, device=DEV).to(torch.int32).view(reqs, 2)
    ape = torch.randn(p, 128, device=DEV)
    slot = torch.randperm(reqs + 5, device=DEV)[:reqs].to(torch.int32)
    one = [formats.new_indexer_cache(reqs * 2, bs // p, device=DEV).fill_(0x5A),
           torch.full((reqs + 5, p - 1, 256), float("nan"), device=DEV)]
    two = [one[0].clone(), one[1].clone()]
    want = [x.to("cpu", copy=True) for x in one]  # the reference's, on the CPU
    # the prefill chunk: each request's tokens from a pool boundary (no earlier member needed), 1 .. 2P - 1 of them;
    # pools in both blocks of a request (16 pools a block: chunks start at positions up to 92, the last step's is 104)
    start = torch.randint(0, 24, (reqs,), device=DEV, dtype=torch.int32) * p
    lens = torch.randint(1, 2 * p, (reqs,), device=DEV)
    req = torch.arange(reqs, dtype=torch.int32, device=DEV).repeat_interleave(lens)
    first = torch.cumsum(lens, 0) - lens
    pos = (start[req.long()] + torch.arange(req.shape[0], device=DEV) - first[req.long()]).to(torch.int32)
    steps = [(pos, req, False)]
    dec = torch.arange(reqs, dtype=torch.int32, device=DEV)
    steps += [((start + lens + i).to(torch.int32), dec, True) for i in range(p + 2)]
    for pos, req, single in steps:
        n = req.shape[0]
        k, gate = torch.randn(n, 128, device=DEV).bfloat16(), torch.randn(n, 128, device=DEV)
        kpool_update(k, gate, ape, pos, req, table, *one, slot, single_token_requests=single)
        kpool_update(k, gate, ape, pos, req, table, *two, slot)
        ref.kpool_update_reference(k.cpu(), gate.cpu(), ape.cpu(), pos.cpu(), req.cpu(), table.cpu(), *want,
                                   slot.cpu())
        assert torch.equal(one[0], two[0]) and _same_tail(one[1], two[1])
        assert _same_tail(one[1].cpu(), want[1])
        _pooled_close(one[0], want[0])


@pytest.mark.parametrize("rows, width, k", [(1, 16384, 2048), (1, 65536, 2048), (3, 131072, 2048), (16, 65536, 2048),
                                           (1, 262144, 2048), (2, 16384, 512), (8, 70000, 512), (1, 65536, 8192)])
def test_topk_few_long_rows(rows, width, k):
    """The public op at few long rows (the one-launch path by default where the rows' tiles fit a wave; on sm_90
    rows of up to 16384 columns at <= SMs / 4 rows take the Gluon select over a 4-CTA cluster instead, session 49):
    the sets and column order on poisoned scratch, the same scratch again with other rows, and a CUDA graph replayed
    over new logits (the count and arrival count are zeroed inside the graph), each against the reference."""
    from dsattn.ops.topk import topk_scratch_spec
    (shape, dtype), = topk_scratch_spec(rows, width, k)
    scratch = torch.full(shape, -5, dtype=dtype, device=DEV)
    out = torch.full((rows, k), -7, dtype=torch.int32, device=DEV)
    lengths = torch.full((rows,), width, device=DEV, dtype=torch.int32)
    if rows > 2:
        lengths[1] = width // 3 + 7
        lengths[2] = k + 5
    x = torch.randn(rows, width, device=DEV)

    def check(x):
        want = topk_reference(x, torch.zeros_like(lengths), lengths, k)
        assert _sets_equal(out, want).all()
        assert torch.equal(out.sort(1).values, out)  # every row has k valid columns here
    topk(x, lengths, k, out=out, scratch=scratch)
    check(x)
    x2 = torch.randn(rows, width, device=DEV)
    x2[0, -width // 8:] += 3.0  # the candidates in the last tiles
    out.fill_(-7)
    topk(x2, lengths, k, out=out, scratch=scratch)
    check(x2)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        topk(x, lengths, k, out=out, scratch=scratch)
    for _ in range(2):
        x.copy_(torch.randn(rows, width, device=DEV))
        out.fill_(-7)
        g.replay()
        check(x)


@pytest.mark.parametrize("impl", list(TOPK_IMPLS))
def test_topk_signed_zeros_tie(impl):
    """-0.0 and +0.0 are one logit value (SPEC 4 ties, lower positions first) at the k-th largest, in rows that fit
    the candidate capacity and in long rows (sampled threshold, filter, select)."""
    rows, width, k = 8, 65536, 2048
    x = -1.0 - torch.rand(rows, width, device=DEV)
    x[:, : k // 2] = 1.0  # half of k strict winners, then the zeros decide
    x[:, k // 2:: 3] = 0.0
    x[:, k // 2 + 1:: 3] = -0.0
    x[1] = -0.0
    x[1, 1::2] = 0.0  # every column ties
    lengths = torch.full((rows,), width, device=DEV, dtype=torch.int32)
    lengths[2:4] = 3000  # fits the capacity (4096 at k 2048)
    out = torch.full((rows, k), -7, dtype=torch.int32, device=DEV)
    if TOPK_IMPLS[impl] is None:
        topk(x, lengths, k, out=out)
    else:
        from dsattn.ops.topk import topk_scratch_spec
        from dsattn.ops.topk.select import launch_topk
        (shape, dtype), = topk_scratch_spec(rows, width, k)
        launch_topk(x, lengths, k, out, torch.full(shape, -5, dtype=dtype, device=DEV), **TOPK_IMPLS[impl])
    want = topk_reference(x, torch.zeros_like(lengths), lengths, k)
    assert _sets_equal(out, want).all()
    assert torch.equal(out[1].sort().values, torch.arange(k, device=DEV, dtype=torch.int32))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_tiny_groups_on_the_gpu(dtype):
    """Groups with amax below 448 * 2 ** -126, subnormal inputs included (the CPU interpreter converts subnormal
    bf16 wrongly, so only the GPU holds these): scale 2 ** -126, bytes equal to the reference's."""
    amax = torch.tensor([1e-37, 2.0 ** -130, 448 * 2.0 ** -126, 3e-36, 1e-39, 5.0], device=DEV)
    x = torch.rand(6, 512, device=DEV) * 0.5 + 0.5
    x = (x / x.amax(1, keepdim=True) * amax[:, None]).to(dtype)
    cache = formats.new_kv_cache(2, 4, "fp8_ds_mla_nope", 512, device=DEV)
    cache.fill_(0xAB)
    want = cache.clone()
    slots = torch.arange(6, device=DEV, dtype=torch.int32)
    write_kv_cache(x, cache, slots)
    write_kv_cache_reference(x, want, slots, "fp8_ds_mla_nope")
    assert torch.equal(cache, want)
    icache = formats.new_indexer_cache(2, 4, device=DEV).fill_(0xAB)
    iwant = icache.clone()
    write_indexer_cache(x[:, :128], icache, slots)
    write_indexer_cache_reference(x[:, :128], iwant, slots)
    assert torch.equal(icache, iwant)


def test_cache_writes_gpu():
    for layout, d in [("bf16", 576), ("fp8_ds_mla", 576), ("fp8_ds_mla", 512), ("fp8_ds_mla_nope", 512)]:
        latent = (torch.randn(500, d, device=DEV) * 10).bfloat16()
        cache = formats.new_kv_cache(20, 64, layout, d, device=DEV)
        cache.view(torch.uint8).fill_(0xAB)
        want = cache.clone()
        slots = torch.randperm(20 * 64, device=DEV)[:500]
        slots[:5] = -1
        write_kv_cache(latent, cache, slots)
        write_kv_cache_reference(latent, want, slots, layout)
        assert torch.equal(cache.view(torch.uint8), want.view(torch.uint8)), layout
    k = torch.randn(500, 128, device=DEV) * 3
    icache = formats.new_indexer_cache(20, 64, device=DEV).fill_(0xAB)
    iwant = icache.clone()
    slots = torch.randperm(20 * 64, device=DEV)[:500].to(torch.int32)
    write_indexer_cache(k, icache, slots)
    write_indexer_cache_reference(k, iwant, slots)
    assert torch.equal(icache, iwant)


@pytest.mark.parametrize("layout, d", [("bf16", 576), ("fp8_ds_mla", 576), ("fp8_ds_mla_nope", 512)])
def test_write_kv_and_indexer_cache_gpu(layout, d):
    """The one-launch write of both caches (session 45): bytes of the reference writes, -1 and slots past either
    cache skipped in that cache only (the indexer cache has more blocks here)."""
    latent = (torch.randn(500, d, device=DEV) * 10).bfloat16()
    k = (torch.randn(500, 128, device=DEV) * 3).bfloat16()
    kv = formats.new_kv_cache(20, 64, layout, d, device=DEV)
    kv.view(torch.uint8).fill_(0xAB)
    ix = formats.new_indexer_cache(24, 64, device=DEV).fill_(0xAB)
    kv_want, ix_want = kv.clone(), ix.clone()
    slots = torch.randperm(24 * 64, device=DEV)[:500].to(torch.int32)
    slots[:5] = -1
    write_kv_and_indexer_cache(latent, kv, k, ix, slots)
    write_kv_cache_reference(latent, kv_want, torch.where(slots < 20 * 64, slots, -1), layout)
    write_indexer_cache_reference(k, ix_want, slots)
    assert torch.equal(kv.view(torch.uint8), kv_want.view(torch.uint8))
    assert torch.equal(ix, ix_want)
