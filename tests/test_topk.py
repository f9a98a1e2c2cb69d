"""Top-k radix select (ops/topk) under TRITON_INTERPRET=1 against the reference twin, at tiny sizes."""
from dsattn.ops._triton import allow_runtime_loop_bounds

allow_runtime_loop_bounds()

import pytest
import torch

from dsattn.ops._triton import tl, triton
from dsattn.ops.topk import MAX_TOPK, topk, topk_scratch_spec
from dsattn.ops.topk.reference import topk_reference
from dsattn.ops.topk.select import SCRATCH_META, _kth_largest_rel, candidate_capacity, launch_topk

pytestmark = pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)


def _expected(logits, lengths, k):
    ends = lengths.long().clamp(0, logits.shape[1])
    return topk_reference(logits, torch.zeros_like(ends), ends, k)


def _assert_same_sets(got, want):
    assert got.shape == want.shape
    assert torch.equal(got.sort(dim=1).values, want.sort(dim=1).values)


def _run(logits, lengths, k, **kw):
    t, w = logits.shape
    out = torch.full((t, k), -7, dtype=torch.int32)  # poison: every entry must be written
    cap = kw.get("cap") or candidate_capacity(k)
    scratch = torch.full((t, 2 * cap + SCRATCH_META), -5, dtype=torch.int32)
    launch_topk(logits, lengths, k, out, scratch, **kw)
    assert (out != -7).all()
    return out


# v3 (the fused kernel) and v4 (threshold, filter, select: fused=False) with each k-th-largest mode; v4 with one
# filter program per row (candidates in column order) and with several (atomic slots in an order the atomics
# decide; the select writes the selection in column order all the same, test_v4_segments_list_columns_in_order)
CONFIGS = {
    "v3": dict(version=3),
    "v4m0": dict(version=4, fused=False, mode=0, tau_mode=0, tau_top=0),
    "v4m1": dict(version=4, fused=False, mode=1),
    "v4m2": dict(version=4, fused=False, mode=2),
    "v4seg4": dict(version=4, fused=False, mode=2, segs=4, rows_per_thread=1),
    "v4m1seg2": dict(version=4, fused=False, mode=1, tau_mode=1, segs=2),
    "v4w2": dict(version=4, fused=False, mode=2, prefetch=False, filt_warps=2, rows_per_thread=1, filt_stages=2),
    "v4tiles": dict(version=4, fused=False, mode=0, rows_per_thread=1, segs=1),
    # the split select (the bucket's steps over a small tensor) and the split, truncated threshold
    "v4split": dict(version=4, fused=False, mode=2, split=1, small=8, tau_mode=2, tau_split=1, tau_small=8,
                    tau_top=5),
    "v4split_seg4": dict(version=4, fused=False, mode=2, split=2, small=4, tau_mode=2, tau_top=2, segs=4,
                         rows_per_thread=1),
    # early-stopping steps (select and threshold), the threshold fused into one filter program per
    # row, and early steps with several filter programs per row (unordered; fuse_tau then unused)
    "v4early": dict(version=4, fused=False, early=True, tau_early=True, tau_top=0, segs=1),
    "v4fuse": dict(version=4, fused=False, early=True, tau_early=True, fuse_tau=True, segs=1, rows_per_thread=1),
    "v4early_seg4": dict(version=4, fused=False, early=True, tau_early=True, fuse_tau=True, segs=4, rows_per_thread=1),
    # the default before early / tau_early / fuse_tau (mode 2's full steps and tie scan, _v4_tau launched
    # beside one filter program per row): still a knob setting, no longer covered by the entries above
    "v4d2": dict(version=4, fused=False, early=False, tau_early=False, fuse_tau=False, segs=1, rows_per_thread=1),
    # the one-launch path (threshold in every tile's program, the last to finish selects): tiles of 32 columns (a
    # 300-column row is 10 programs), with early steps, and with mode 0's full steps and tie scan
    "v4fused": dict(version=4, fused=True, fused_tile=32),
    "v4fused_m0": dict(version=4, fused=True, fused_tile=64, mode=0, tau_mode=0, tau_top=0, early=False,
                       tau_early=False),
}


def configs(*names):
    """pytest params of the named CONFIGS (all of them when no name is given), ids = names."""
    return [pytest.param(CONFIGS[n], id=n) for n in (names or CONFIGS)]


@pytest.mark.parametrize("v", configs("v3", "v4m0", "v4m1", "v4m2", "v4split", "v4split_seg4", "v4early", "v4d2"))
@pytest.mark.parametrize("k, w", [(4, 12), (8, 16), (8, 40), (16, 31)])
def test_rows_in_registers(k, w, v):
    t = 6
    logits = torch.randn(t, w)
    logits[5, ::3] = logits[5, 1]  # ties in a row that fits the capacity
    lengths = torch.tensor([0, 1, k - 1, k, min(w, k + 3), w], dtype=torch.int32)
    _assert_same_sets(_run(logits, lengths, k, **v), _expected(logits, lengths, k))


@pytest.mark.parametrize("v", configs())
def test_sample_path_and_fallback(v):
    """Rows longer than the capacity: random rows take the sampled candidates, tie-heavy ones fall back."""
    k, w = 8, 300
    logits = torch.randn(5, w)
    logits[1] = torch.randint(0, 3, (w,)).float()  # few distinct values: the candidate count overflows
    logits[2, 200:] = 5.0  # the best keys sit in one stretch: the sample may miss them
    logits[3] = float("-inf")  # valid -inf logits still rank, lowest columns first
    logits[4, ::2] = float("-inf")
    lengths = torch.tensor([w, w, w, 290, 250], dtype=torch.int32)
    _assert_same_sets(_run(logits, lengths, k, cap=32, sample=16, **v), _expected(logits, lengths, k))


@pytest.mark.parametrize("v", configs())
def test_ties_go_to_lower_columns(v):
    k, w = 4, 64
    logits = torch.zeros(2, w)
    logits[0, [3, 9, 20]] = 1.0  # 3 strict winners, then ties among zeros: columns 0 wins
    lengths = torch.tensor([w, 50], dtype=torch.int32)
    got = _run(logits, lengths, k, cap=16, sample=8, **v)
    assert sorted(got[0].tolist()) == [0, 3, 9, 20]
    assert sorted(got[1].tolist()) == [0, 1, 2, 3]


@pytest.mark.parametrize("v", configs("v4m0", "v4seg4", "v4m1seg2", "v4tiles", "v4split", "v4split_seg4", "v4early",
                                     "v4fuse", "v4early_seg4", "v4d2", "v4fused", "v4fused_m0"))
def test_v4_candidates_with_ties_at_the_cut(v):
    """Long rows whose k-th key is tied among candidates spread over the row (and over the filter's
    segments): the lower columns win, whatever order the candidates were stored in."""
    k, w = 8, 512
    logits = torch.randn(4, w) - 10
    logits[0, [7, 100, 300, 450]] = 3.0  # 4 winners, then 4 of the 6 tied at 2.0
    logits[0, [20, 60, 200, 260, 400, 500]] = 2.0
    logits[1, ::37] = 1.5  # 14 ties straddling the cut, nothing larger
    logits[2, 256:] = 0.5  # ties only in the second half
    logits[2, [30, 31]] = 0.75
    lengths = torch.tensor([w, w, w, 400], dtype=torch.int32)
    got = _run(logits, lengths, k, cap=32, sample=16, **v)
    _assert_same_sets(got, _expected(logits, lengths, k))
    assert sorted(got[0].tolist()) == [7, 20, 60, 100, 200, 260, 300, 450]


@pytest.mark.parametrize("v", configs("v4m1", "v4m2", "v4m1seg2", "v4split", "v4split_seg4", "v4fuse", "v4early_seg4",
                                     "v4d2", "v4fused"))
def test_v4_random_rows(v):
    """Random widths, lengths and value spreads (one tied, one constant, one -inf row) at k = 16."""
    k, w = 16, 1000
    logits = torch.randn(6, w) * torch.tensor([1.0, 1e-3, 1e4, 1.0, 1.0, 1.0])[:, None]
    logits[3] = 7.0
    logits[4, : w // 2] = float("-inf")
    logits[5] = torch.randint(-2, 2, (w,)).float()
    lengths = torch.tensor([w, 777, 65, w, 900, w], dtype=torch.int32)
    _assert_same_sets(_run(logits, lengths, k, cap=64, sample=32, **v), _expected(logits, lengths, k))


@pytest.mark.parametrize("v", configs())
def test_rows_come_out_in_column_order(v):
    """Every path of every version lists a row's selection in ascending column order: rows that fit the capacity,
    the sampled candidates (one filter program a row, or several: test_v4_segments_list_columns_in_order), the
    retries and the exact fallback (tie-heavy rows), and the -1 padding after them."""
    k, w = 8, 300
    logits = torch.randn(6, w)
    logits[1] = torch.randint(0, 3, (w,)).float()  # few distinct values: the fallback
    logits[2, 200:] = 5.0
    logits[4, ::2] = float("-inf")
    lengths = torch.tensor([w, w, w, 290, 250, 5], dtype=torch.int32)
    got = _run(logits, lengths, k, cap=32, sample=16, **v)
    _assert_same_sets(got, _expected(logits, lengths, k))
    for r in range(6):
        n = int((got[r] >= 0).sum())
        assert (got[r, n:] == -1).all() and torch.equal(got[r, :n], got[r, :n].sort().values), r


def test_reference_fallback_lists_as_the_kernels(monkeypatch):
    """Where the kernels cannot run (the CPU without TRITON_INTERPRET) topk() falls back to the reference twin and
    lists each row as the kernels do: the same entries in the same order, -1 padding last (so every path hands the
    attention the same list)."""
    k, w = 8, 300
    logits = torch.randn(6, w)
    logits[1] = torch.randint(0, 3, (w,)).float()
    logits[4, ::2] = float("-inf")
    lengths = torch.tensor([w, w, w, 290, 250, 5], dtype=torch.int32)
    kernel = topk(logits, lengths, k)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    fallback = topk(logits, lengths, k, out=torch.full((6, k), -7, dtype=torch.int32))
    assert torch.equal(fallback, kernel)
    assert (fallback[5, 5:] == -1).all() and not torch.equal(fallback, _expected(logits, lengths, k))


@pytest.mark.parametrize("v", configs("v4seg4", "v4m1seg2", "v4split_seg4", "v4early_seg4"))
def test_v4_segments_list_columns_in_order(v):
    """Several filter programs a row (their candidates in slot order the atomics decide on a GPU): every row lists
    its selection in ascending column order (launch_topk_v4's sort), with sort=False only the same set."""
    k, w = 16, 1000
    logits = torch.randn(5, w)
    lengths = torch.tensor([w, 777, 65, 900, 512], dtype=torch.int32)
    want = _expected(logits, lengths, k)
    got = _run(logits, lengths, k, cap=64, sample=32, **v)
    _assert_same_sets(got, want)
    for r in range(5):
        row = got[r][got[r] >= 0]
        assert torch.equal(row, row.sort().values), r
    _assert_same_sets(_run(logits, lengths, k, cap=64, sample=32, sort=False, **v), want)


@pytest.mark.parametrize("v", configs("v3", "v4m0", "v4m1", "v4m2", "v4seg4", "v4split", "v4early", "v4d2", "v4fused"))
def test_signed_zeros_tie(v):
    """-0.0 and +0.0 are equal logits (SPEC 4: a tie, lower position first), in registers and past the capacity.
    A -0.0 logit is what sum_h w * relu(0) gives with negative weights in fp32 arithmetic that keeps the sign."""
    k = 4
    short = torch.tensor([[-0.0, 0.0, -0.0, 0.0, -1.0, 0.0, -0.0, -2.0, 0.0, -0.0, -3.0, -0.0]])
    lengths = torch.tensor([12], dtype=torch.int32)
    assert sorted(_run(short, lengths, k, **v)[0].tolist()) == [0, 1, 2, 3]
    w = 300
    long = torch.randn(3, w).abs().neg() - 1.0  # every other logit below the zeros
    long[0, 7::5] = 0.0
    long[0, 10::5] = -0.0  # the zeros interleave: columns 7, 10, 12, 15 win
    long[1, 100:] = -0.0
    long[1, 200:220:2] = 0.0  # +0.0 after many -0.0: columns 100-103 win
    long[2, ::2] = -0.0
    long[2, 1::2] = 0.0  # every column ties: 0-3
    lengths = torch.full((3,), w, dtype=torch.int32)
    got = _run(long, lengths, k, cap=32, sample=16, **v)
    assert [sorted(r) for r in got.tolist()] == [[7, 10, 12, 15], [100, 101, 102, 103], [0, 1, 2, 3]]
    _assert_same_sets(got, _expected(long, lengths, k))


def test_public_op_strides_and_lengths():
    k = 8
    base = torch.randn(4, 90)
    logits = base[:, 5:75]  # row stride 90, width 70
    lengths = torch.tensor([70, 100, -3, 9], dtype=torch.int32)  # past W reads as W, negative as 0
    out_base = torch.full((4, 20), -9, dtype=torch.int32)
    out = out_base[:, 2:2 + k]
    got = topk(logits, lengths, k, out=out)
    assert got.data_ptr() == out.data_ptr()
    _assert_same_sets(got, _expected(logits, lengths, k))
    assert (out_base[:, :2] == -9).all() and (out_base[:, 2 + k:] == -9).all()


def test_scratch_spec_and_rejects():
    assert topk_scratch_spec(7, 100, 2048) == [((7, 0), torch.int32)]
    assert topk_scratch_spec(7, 65536, 2048) == [((7, 8192 + SCRATCH_META), torch.int32)]
    x = torch.randn(3, 10)
    n = torch.full((3,), 10, dtype=torch.int32)
    with pytest.raises(ValueError, match="logits must have dtype"):
        topk(x.double(), n, 4)
    with pytest.raises(ValueError, match="lengths must have dtype"):
        topk(x, n.long(), 4)
    with pytest.raises(ValueError, match="k must be"):
        topk(x, n, 0)
    with pytest.raises(ValueError, match="k must be <= 8192"):
        topk(x, n, MAX_TOPK + 1)
    with pytest.raises(ValueError, match="lengths must have a contiguous last dimension"):
        topk(x, torch.full((6,), 10, dtype=torch.int32)[::2], 4)  # a kernel would read it at stride 1
    with pytest.raises(ValueError, match="out must have shape"):
        topk(x, n, 4, out=torch.empty(3, 5, dtype=torch.int32))
    with pytest.raises(ValueError, match="scratch must be at least"):
        topk(torch.randn(3, 100), n, 4, scratch=torch.empty(3, 4, dtype=torch.int32))
    # launcher knobs are checked before the first launch: scratch keeps its poison
    long_x, long_n = torch.randn(3, 300), torch.full((3,), 300, dtype=torch.int32)
    scratch = torch.full((3, 2 * 32 + SCRATCH_META), -5, dtype=torch.int32)
    for knob in ("small", "tau_small"):
        with pytest.raises(ValueError, match=knob):
            launch_topk(long_x, long_n, 4, torch.empty(3, 4, dtype=torch.int32), scratch, version=4, cap=32,
                        sample=16, fuse_tau=False, **{knob: 0})
    assert (scratch == -5).all()


def _ordered_keys(x):
    bits = x.contiguous().view(torch.int32).long() & 0xFFFFFFFF
    key = torch.where(bits >= 1 << 31, bits ^ 0xFFFFFFFF, bits | (1 << 31))
    return torch.where(key >= 1 << 31, key - (1 << 32), key).to(torch.int32)  # the uint32's bits as int32


def _interleave(runs):
    """The runs' entries in a random interleaving that keeps each run's order."""
    owner = torch.cat([torch.full((len(r),), i) for i, r in enumerate(runs)])
    owner = owner[torch.randperm(len(owner))]
    out, at = [], [0] * len(runs)
    for i in owner.tolist():
        out.append(runs[i][at[i]])
        at[i] += 1
    return torch.stack(out)


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize("mode, split, early", [(0, 0, False), (1, 0, False), (2, 0, False), (2, 1, False),
                                               (2, 0, True)])
def test_v4_select_of_unordered_candidates(mode, split, early, sort):
    """The select stage alone on candidates stored in shuffled order (as several filter programs per row
    leave them on the GPU: each program's own in column order, the programs interleaved): ties at the k-th key
    still go to the lowest columns; with SEGS (the default launch's choice there) each row lists them in
    ascending column order."""
    from dsattn.ops.topk.select import _GROUP, _v4_select
    k, w, cap = 8, 256, 32
    x = torch.randn(3, w)
    x[0, ::16] = 2.5  # 16 tied candidates, 8 taken
    x[1, [5, 50, 90]] = 4.0  # 3 winners, then 5 of the 12 tied
    x[1, 100:112] = 3.0
    lengths = torch.tensor([w, w, 200], dtype=torch.int32)
    scratch = torch.full((3, 2 * cap + SCRATCH_META), -5, dtype=torch.int32)
    for r in range(3):
        thr = x[r, : lengths[r]].topk(20).values[-1]
        cols = (x[r, : lengths[r]] >= thr).nonzero()[:, 0]
        # 4 programs of 64 columns: each one's candidates in column order, interleaved at random
        cols = _interleave([cols[cols // 64 == s] for s in range(4)]).to(torch.int32)
        assert k <= len(cols) <= cap
        scratch[r, 0: 2 * len(cols): 2] = cols  # int64 slots: the column in the low word, the key above
        scratch[r, 1: 2 * len(cols): 2] = _ordered_keys(x[r, cols.long()])
        scratch[r, 2 * cap + 3] = len(cols)
    out = torch.full((3, k), -7, dtype=torch.int32)
    _v4_select[(3,)](x, x.stride(0), lengths, w, out, out.stride(0), scratch, scratch.stride(0), k, 64,
                     CAP=cap, PAD_BLOCK=cap, MODE=mode, ORDERED=False, SEGS=4 if sort else 1, SAMPLE=16, GROUP=_GROUP,
                     FIX_ROWS=2, SPLIT=split, SMALL=8, EARLY=early, num_warps=4)
    _assert_same_sets(out, _expected(x, lengths, k))
    if sort:
        assert torch.equal(out, out.sort(dim=1).values)


@triton.jit
def _kth_probe(keys, k_ptr, out, N: tl.constexpr, EARLY: tl.constexpr):
    r = tl.program_id(0)
    key = tl.load(keys + r * N + tl.arange(0, N)).to(tl.uint32, bitcast=True)
    t = _kth_largest_rel(key, tl.arange(0, N) < N, tl.load(k_ptr + r), out, 0, 16, 0, EARLY)
    tl.store(out + r, t.to(tl.int32, bitcast=True))


def test_early_steps_stop_at_exactly_k():
    """_kth_largest_rel with EARLY: a lower bound of the k-th largest with exactly as many keys >= it as
    the full search's result has (k when the k-th is not tied), and on random keys it does stop early."""
    n, rows = 128, 8
    x = torch.randn(rows, n)
    x[1] = torch.randint(0, 4, (n,)).float()  # ties at the k-th
    x[2, :] = x[2, 0]  # one value
    keys = _ordered_keys(x)
    ks = torch.tensor([1, 50, 7, 8, 32, 100, 127, 128], dtype=torch.int32)
    got = {}
    for early in (False, True):
        out = torch.zeros(rows, dtype=torch.int32)
        _kth_probe[(rows,)](keys, ks, out, N=n, EARLY=early, num_warps=4)
        got[early] = out.long() & 0xFFFFFFFF
    ukeys = keys.long() & 0xFFFFFFFF
    exact = ukeys.sort(dim=1, descending=True).values.gather(1, ks.long()[:, None] - 1)[:, 0]
    assert torch.equal(got[False], exact)
    assert (got[True] <= exact).all()
    ge = lambda t: (ukeys >= t[:, None]).sum(1)  # noqa: E731
    assert torch.equal(ge(got[True]), ge(exact))
    assert (got[True] < exact).any()  # some row stopped before the last step


def test_select_register_cap_only_past_two_programs_an_sm():
    """The select's register cap (3 programs an SM instead of 2) is taken only where the rows need more than two
    programs an SM: below that it buys no occupancy and its spills cost latency (session 40, topk_small_s40.json)."""
    from dsattn.ops.topk.select import select_register_cap
    assert select_register_cap(4096, 4096, 8, 132) == 80
    assert select_register_cap(265, 4096, 8, 132) == 80
    for rows in (1, 32, 128, 264):
        assert select_register_cap(rows, 4096, 8, 132) == 0
    assert select_register_cap(4096, 8192, 8, 132) == 0  # k > 2048: never capped
    assert select_register_cap(4096, 4096, 4, 132) == 0


def test_select_capacity_doubles_for_few_rows_a_little_wider():
    """Rows a little wider than the candidate capacity are selected in registers at twice it (one launch, not three)
    while there are at most two rows an SM; wider rows, more rows and caps past WIDE_CAP_MAX keep the usual capacity
    (session 41, bench/results/topk_cap_s41.json, topk_cap_rows_s41.json, topk_cap_k512_s41.json)."""
    from dsattn.ops.topk.select import WIDE_CAP_MAX, select_capacity
    assert select_capacity(1, 4096, 2048, 132) == 4096     # fits the usual capacity
    assert select_capacity(1, 4097, 2048, 132) == 8192
    assert select_capacity(264, 8192, 2048, 132) == 8192
    assert select_capacity(265, 8192, 2048, 132) == 4096   # more than two rows an SM
    assert select_capacity(1, 8193, 2048, 132) == 4096     # wider than twice the capacity
    assert select_capacity(1, 2048, 512, 132) == 2048
    assert select_capacity(1, 6000, 4096, 132) == 8192     # usual capacity already WIDE_CAP_MAX
    assert select_capacity(1, 9000, 4096, 132) == 8192
    assert WIDE_CAP_MAX == 8192


@pytest.mark.parametrize("v", configs("v4m2", "v4early"))
def test_default_capacity_takes_few_wide_rows_in_registers(v):
    """No cap given: 5 rows (lengths 5-30) of a 30-column buffer at k 8 (usual capacity 16) are selected in registers
    at capacity 32: the sets right and listed in column order, ties toward the lower column, every entry written."""
    k, w = 8, 30
    logits = torch.randn(5, w)
    logits[3, ::2] = logits[3, 0]  # ties at the cut
    lengths = torch.tensor([30, 17, 25, 30, 5], dtype=torch.int32)
    out = torch.full((5, k), -7, dtype=torch.int32)
    launch_topk(logits, lengths, k, out, torch.empty(0, 0, dtype=torch.int32), **v)  # no scratch: none is read
    want = _expected(logits, lengths, k)
    _assert_same_sets(out, want)
    for r in range(5):
        row = out[r][out[r] >= 0]
        assert torch.equal(row, row.sort().values)


def test_fused_tiles_in_column_order():
    """The one-launch path over 32 tiles of 32 columns a row: candidates spread over every tile, held by a few
    tiles with many empty ones before and between them (the table's search must skip those), ties at the k-th
    key across tiles (the lower columns win), rows shorter than the buffer (programs past the row count
    themselves in with no candidates), a row that fits the capacity (tile 0 alone) and one whose candidates
    overflow (the retries). Sets right, in column order, every entry written, on poisoned scratch."""
    k, w = 16, 1000
    x = torch.randn(7, w) - 5
    x[1, 900:] += 10  # every candidate in the last tiles
    x[2, [40, 41, 300, 700]] += 20  # four clear winners, the rest random: candidates in every tile
    x[3, ::50] = 3.0  # 20 ties over 20 tiles, 16 taken
    x[4, 500:520] = 1.0  # two tiles of candidates in the middle
    x[6] = torch.randint(0, 2, (w,)).float()  # half the row ties: the candidates overflow
    lengths = torch.tensor([w, w, 777, w, 530, 50, w], dtype=torch.int32)
    got = _run(x, lengths, k, cap=64, sample=32, version=4, fused=True, fused_tile=32)
    _assert_same_sets(got, _expected(x, lengths, k))
    assert sorted(got[3].tolist()) == list(range(0, 800, 50))
    for r in range(7):
        row = got[r][got[r] >= 0]
        assert len(row) == k and torch.equal(row, row.sort().values), r


def test_fused_default_and_rejects():
    """fused_tile_default (k 2048 and k 512 as measured in session 43, topk_few_s43.json, topk_rule_s43.json):
    4096-column tiles while every row's tiles have an SM each, then at 8 warps 8192-column ones while they have an
    SM each, or fit two an SM over rows of at least 32768 columns (at 4 warps the 2048-column tiles while two an SM
    fit), else three launches (0), and always for caps past 4096; rows of more than FUSED_MAX_TILES tiles too.
    fused=True is refused (before anything is written) for a scratch without the table's columns, rows of more tiles
    than the table holds, or a tile that is not a power of two."""
    from dsattn.ops.topk.select import FUSED_MAX_TILES, fused_tile_default
    assert fused_tile_default(1, 65536, 4096, 8, 132) == 4096
    assert fused_tile_default(8, 65536, 4096, 8, 132) == 4096     # 128 programs
    assert fused_tile_default(16, 65536, 4096, 8, 132) == 8192    # 256 of 4096, 128 of 8192
    assert fused_tile_default(32, 65536, 4096, 8, 132) == 8192    # 256 of 8192: two an SM, rows >= 32768 wide
    assert fused_tile_default(64, 12224, 4096, 8, 132) == 8192    # 128 of 8192
    assert fused_tile_default(128, 12224, 4096, 8, 132) == 0      # 256 of 8192 over narrow rows
    assert fused_tile_default(34, 65536, 4096, 8, 132) == 0       # 272 of 8192
    assert fused_tile_default(1, 4096 * FUSED_MAX_TILES + 1, 4096, 8, 132) == 8192
    assert fused_tile_default(1, 8192 * FUSED_MAX_TILES + 1, 4096, 8, 132) == 0
    assert fused_tile_default(32, 16384, 1024, 4, 132) == 2048    # k 512: 256 programs
    assert fused_tile_default(34, 16384, 1024, 4, 132) == 0
    assert fused_tile_default(1, 65536, 16384, 8, 132) == 0       # k 8192: not measured
    x, n = torch.randn(2, 300), torch.full((2,), 300, dtype=torch.int32)
    out = torch.full((2, 4), -7, dtype=torch.int32)
    for scratch_cols, kw, match in ((2 * 32 + 8, dict(fused_tile=32), "fused=True needs scratch"),
                                    (2 * 32 + SCRATCH_META, dict(fused_tile=4), "fused=True needs scratch"),
                                    (2 * 32 + SCRATCH_META, dict(fused_tile=48), "fused_tile")):
        scratch = torch.full((2, scratch_cols), -5, dtype=torch.int32)
        with pytest.raises(ValueError, match=match):
            launch_topk(x, n, 4, out, scratch, version=4, cap=32, sample=16, fused=True, **kw)
        assert (scratch == -5).all() and (out == -7).all()
    # the default without the table's columns: the three launches, still right
    scratch = torch.full((2, 2 * 32 + 8), -5, dtype=torch.int32)
    launch_topk(x, n, 4, out, scratch, version=4, cap=32, sample=16)
    _assert_same_sets(out, _expected(x, n, 4))


def test_sample_size():
    """4096 sample keys for 64 to 2 x SMs rows (where the retries a misjudged row costs outweigh the larger sample,
    session 43, topk_retry_s43.json), 2048 otherwise."""
    from dsattn.ops.topk.select import sample_size
    assert [sample_size(r, 132) for r in (1, 32, 63, 64, 128, 264, 265, 4096)] == [2048] * 3 + [4096] * 3 + [2048] * 2


def test_gluon_select_needs_its_device():
    """gluon=True (the Gluon select for rows that fit the capacity) is refused where it cannot run (the CPU, the
    interpreter) before anything launches; gluon=None falls back to the Triton select there."""
    from dsattn.ops.topk.select import launch_topk_v4
    x = torch.randn(2, 100)
    lengths = torch.tensor([100, 50], dtype=torch.int32)
    out = torch.full((2, 16), -7, dtype=torch.int32)
    with pytest.raises(ValueError, match="gluon"):
        launch_topk_v4(x, lengths, 16, out, torch.empty(2, 0, dtype=torch.int32), cap=256, gluon=True)
    assert (out == -7).all()


def test_gluon_select_compiles_for_sm90():
    """The Gluon select compiles for sm_90a on this machine (no GPU; bench/topk_gluon_check.py) at the decode
    capacities, one CTA a row and a cluster of 4 (also at 65536 columns, 16384 a CTA: DSATTN_TOPK_CLUSTER_CAP's
    widest): no spill, shared atomics in the SASS, and its dynamic shared memory exactly the words its inline PTX
    addresses (no shared memory of Triton's own that could overlap them); the cluster's build declares its 4 CTAs
    and adds into the other CTAs' words (ATOM.E) between cluster barriers."""
    pytest.importorskip("triton.experimental.gluon")
    import os
    import re
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.path.join(root, "src")}
    env.pop("TRITON_INTERPRET", None)
    res = subprocess.run([sys.executable, os.path.join(root, "bench", "topk_gluon_check.py"), "--caps", "1024", "8192",
                          "65536", "--ctas", "1", "4"], capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("cap ") and "skipped" not in ln]
    assert len(lines) == 5, res.stdout  # 65536 with one CTA is past MAX_CTA_COLS: skipped
    for ln in lines:
        assert int(re.search(r"shared=(\d+)", ln).group(1)) == int(re.search(r"raw_bytes=(\d+)", ln).group(1)), ln
        assert int(re.search(r"spill_st=(\d+)", ln).group(1)) == 0, ln
        assert "ATOMS" in ln, ln
        cluster = " ctas 4 " in ln
        assert (".reqnctapercluster 4" in ln) == cluster and ("ATOM.E.ADD" in ln) == cluster, ln
        assert ("UCGABAR" in ln) == cluster, ln


def test_gluon_wide_capacity(monkeypatch):
    """The Gluon select's one-launch capacity (gluon_select.wide_capacity): the power of two at or above max(2k, width)
    within 8192 columns at <= 2 x SMs rows, else 0 (the long-row path); within a cluster's limit where the rows go over
    clusters (default_ctas, or the ctas given: MAX_CTA_COLS columns a CTA, MAX_CLUSTER_CAP a row); within
    DSATTN_TOPK_CLUSTER_CAP where it is set."""
    from dsattn.ops.topk import gluon_select
    from dsattn.ops.topk.gluon_select import MAX_CAP, MAX_CLUSTER_CAP, wide_capacity
    monkeypatch.delenv("DSATTN_TOPK_CTAS", raising=False)
    monkeypatch.delenv("DSATTN_TOPK_CLUSTER_CAP", raising=False)
    assert wide_capacity(1, 8192, 2048, 132) == 8192 == MAX_CAP
    assert wide_capacity(1, 8193, 2048, 132, 1) == 0       # wider than the largest for one CTA
    assert wide_capacity(1, 8193, 2048, 132) == 16384      # 4 CTAs a row (default_ctas)
    assert wide_capacity(33, 16384, 2048, 132) == 16384
    assert wide_capacity(34, 9000, 2048, 132) == 16384     # 2 CTAs a row at 34-132 rows
    assert wide_capacity(132, 16384, 2048, 132) == 16384
    assert wide_capacity(133, 9000, 2048, 132) == 0        # one CTA a row past SMs rows: the long-row path
    assert wide_capacity(1, 16385, 2048, 132) == 32768     # 8 CTAs a row
    assert wide_capacity(15, 65536, 2048, 132) == 65536 == MAX_CLUSTER_CAP  # 8 CTAs of 8192
    assert wide_capacity(16, 65536, 2048, 132) == 65536    # 4 CTAs of 16384 at 16 rows
    assert wide_capacity(17, 65536, 2048, 132) == 0        # past 16 rows there: the long-row path
    assert wide_capacity(30, 32768, 2048, 132) == 32768    # 4 CTAs of 8192 up to 30 rows
    assert wide_capacity(31, 16385, 2048, 132) == 0        # past 30 rows: the long-row path
    assert wide_capacity(16, 65536, 2048, 132, 4) == 65536  # 4 CTAs of 16384, where asked for
    assert wide_capacity(1, 65537, 2048, 132) == 0         # wider than the largest
    assert wide_capacity(265, 5000, 2048, 132) == 0        # more than two rows an SM
    assert wide_capacity(128, 3000, 512, 132) == 4096
    assert wide_capacity(264, 8000, 512, 132) == 8192
    assert wide_capacity(1, 100, 512, 132) == 1024          # 2k
    assert wide_capacity(1, 12000, 8192, 132) == 16384      # k 8192's usual capacity, over 4 CTAs
    assert wide_capacity(1, 12000, 8192, 132, 1) == 0
    assert gluon_select.max_capacity(1) == MAX_CAP and gluon_select.max_capacity(2) == 32768
    assert gluon_select.max_capacity(4) == gluon_select.max_capacity(8) == MAX_CLUSTER_CAP
    assert wide_capacity(1, 40000, 2048, 132, 4) == 65536
    assert wide_capacity(1, 40000, 2048, 132, 2) == 0       # 2 CTAs of 32768 columns: past MAX_CTA_COLS
    assert wide_capacity(1, 30000, 2048, 132, 2) == 32768
    assert wide_capacity(1, 9000, 2048, 132, 1) == 0        # one CTA keeps MAX_CAP
    # DSATTN_TOPK_CLUSTER_CAP (A/B runs) narrows a cluster's rows: 16384 is session 49's limit
    monkeypatch.setenv("DSATTN_TOPK_CLUSTER_CAP", "16384")
    assert wide_capacity(1, 16385, 2048, 132) == 0
    assert wide_capacity(1, 12000, 2048, 132) == 16384
    for bad in ("8192", "20000", "131072", "x"):
        monkeypatch.setenv("DSATTN_TOPK_CLUSTER_CAP", bad)
        with pytest.raises(ValueError, match="DSATTN_TOPK_CLUSTER_CAP"):
            wide_capacity(1, 9000, 2048, 132, 4)

def test_gluon_select_cluster_size_checked(monkeypatch):
    """The Gluon select's CTAs a row (a thread-block cluster) must be 1, 2, 4 or 8, and leave each warp at least 32
    columns: a ValueError naming it before anything launches (the launch stand-in is never reached);
    DSATTN_TOPK_CTAS is checked the same way."""
    from dsattn.ops.topk import gluon_select
    x = torch.randn(2, 1000)
    lengths = torch.tensor([1000, 10], dtype=torch.int32)
    out = torch.full((2, 256), -7, dtype=torch.int32)

    def never(kernel):
        raise AssertionError("launched")
    for ctas in (0, 3, 16):
        with pytest.raises(ValueError, match="ctas"):
            gluon_select.launch_select_rows(x, lengths, 256, out, 1024, ctas=ctas, launch=never)
    with pytest.raises(ValueError, match="CTAs"):  # 1024 / 8 = 128 columns a CTA: fewer than 32 a warp of 8
        gluon_select.launch_select_rows(x, lengths, 256, out, 1024, num_warps=8, ctas=8, launch=never)
    wide = torch.randn(1, 40000)
    with pytest.raises(ValueError, match="at most 16384"):  # 2 CTAs of 32768 columns: past MAX_CTA_COLS
        gluon_select.launch_select_rows(wide, lengths[:1], 256, out[:1], 65536, ctas=2, launch=never)
    # k: at most cap / 2 (the output row's shared-memory copy), and over a cluster k + a CTA's columns below 2^15 (the
    # packed emit counts); the launchers above it pass k <= 8192, but a direct call must not reach the kernel
    for k, cap, ctas in ((0, 1024, 1), (513, 1024, 1), (16384, 65536, 4), (24576, 65536, 8)):
        big = torch.full((1, k or 1), -7, dtype=torch.int32)
        with pytest.raises(ValueError, match="k must be"):
            gluon_select.launch_select_rows(wide if cap > 1024 else x[:1], lengths[:1], k, big, cap, ctas=ctas,
                                            launch=never)
    seen = []
    gluon_select.launch_select_rows(wide, lengths[:1], 8192, torch.zeros(1, 8192, dtype=torch.int32), 65536, ctas=4,
                                    launch=lambda kernel: {(1,): lambda *a, **kw: seen.append(kw["CTAS"])})
    assert seen == [4]  # topk()'s largest k over 4 CTAs of 16384 columns: 8192 + 16384 < 2^15, launched
    assert (out == -7).all()
    monkeypatch.delenv("DSATTN_TOPK_CTAS", raising=False)
    assert gluon_select.default_ctas(1, 4160, 132) == 4     # a decode row past 4096 columns: 4 CTAs
    assert gluon_select.default_ctas(33, 8192, 132) == 4
    assert gluon_select.default_ctas(34, 8192, 132) == 1    # more than one wave of clusters, one CTA holds the row
    assert gluon_select.default_ctas(34, 8193, 132) == 2    # ... it does not: 2 CTAs up to SMs rows
    assert gluon_select.default_ctas(132, 16384, 132) == 2
    assert gluon_select.default_ctas(133, 16384, 132) == 1
    assert gluon_select.default_ctas(1, 4095, 132) == 1     # narrower rows: one CTA
    assert gluon_select.cluster_slots(132) == 120           # the driver's count on an H100 (session 56)
    assert gluon_select.default_ctas(15, 16385, 132) == 8   # past 16384 columns: 8 CTAs while 8 x rows <= 120
    assert gluon_select.default_ctas(15, 65536, 132) == 8
    assert gluon_select.default_ctas(16, 20000, 132) == 4   # ... then 4 while 4 x rows <= 120, up to 32768 columns
    assert gluon_select.default_ctas(30, 32768, 132) == 4
    assert gluon_select.default_ctas(31, 32768, 132) == 1   # a second wave: the Triton paths
    assert gluon_select.default_ctas(16, 32769, 132) == 4   # past 32768 columns 4 CTAs at 16 rows (SMs / 2) ...
    assert gluon_select.default_ctas(17, 32769, 132) == 1   # ... then the Triton paths
    assert gluon_select.default_ctas(12, 20000, 114) == 8   # an H100 PCIe's 114 SMs: 103 slots
    assert gluon_select.default_ctas(13, 20000, 114) == 4
    assert gluon_select.default_ctas(25, 20000, 114) == 4
    assert gluon_select.default_ctas(26, 20000, 114) == 1
    monkeypatch.setenv("DSATTN_TOPK_CTAS", "3")
    with pytest.raises(ValueError, match="DSATTN_TOPK_CTAS"):
        gluon_select.default_ctas(1, 8192, 132)
    monkeypatch.setenv("DSATTN_TOPK_CTAS", "4")
    assert gluon_select.default_ctas(1, 8192, 132) == 4


def test_gluon_cluster_columns():
    """A cluster's CTAs cover the row: span (a multiple of 16, at least 128) x ctas >= width, and each CTA's
    columns a power of two >= span; one CTA takes the capacity whole."""
    from dsattn.ops.topk.gluon_select import cluster_columns
    assert cluster_columns(4160, 8192, 1) == (8192, 8192)
    assert cluster_columns(4160, 8192, 2) == (2080, 4096)
    assert cluster_columns(4096, 4096, 4) == (1024, 1024)
    assert cluster_columns(300, 512, 8) == (128, 128)
    for width in (1, 15, 16, 17, 300, 1040, 2047, 2080, 3000, 4097, 4160, 6143, 8192):
        for ctas in (2, 4, 8):
            span, cols = cluster_columns(width, 1 << (width - 1).bit_length(), ctas)
            assert span * ctas >= width and span % 16 == 0 and span >= 128, (width, ctas, span)
            assert cols >= span and cols & (cols - 1) == 0 and cols < 2 * span, (width, ctas, cols)
