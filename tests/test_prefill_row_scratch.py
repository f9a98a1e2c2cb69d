"""sparse_mla_prefill's row_scratch (session 68): the rows converted once (kernels.f16_rows) to what gluon_prefill's
producer makes of every gathered copy, so that the kernel runs without its conversion pass (config pre16). Here on
the CPU: the conversion kernel under the interpreter bit for bit against torch, the checks of the argument, the rule,
the launcher's substitution on a simulated sm_90, and outputs unchanged where the reference runs. The kernels'
bit-equality with the default on the GPU: tests/gpu/test_sparse_mla_prefill_gpu.py::test_row_scratch_bit_equal."""
import pytest
import torch

from conftest import KERNELS_INTERPRETED
from dsattn.ops.sparse_mla import launch, prefill_row_spec, sparse_mla_prefill
from dsattn.ops.sparse_mla.dispatch import prefill_converts_rows
from dsattn.ops.sparse_mla.testing import make_case, poisoned_outputs

interpreted = pytest.mark.skipif(not KERNELS_INTERPRETED, reason="the Triton kernels run interpreted on the CPU only")


def _torch_f16(x):
    """What f16_rows writes for the latent part: fp16(x x 2^-8) with one rounding, as bits."""
    return (x[:, :512].float() * 2.0 ** -8).half().view(torch.int16)


@interpreted
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # numpy's, on the 2^24 edge (inf is the point)
@pytest.mark.parametrize("d_qk", [576, 512])
def test_f16_rows_bit_exact(d_qk):
    """f16_rows against torch bit for bit: random rows and the edges (signed zeros, fp16's overflow at 2^24 and its
    subnormals, bf16 subnormals, infinities); RoPE copied; keyed rows with kmap (-1 and a zero row for a slot
    outside the source, nothing read there); rows past n untouched."""
    from dsattn.ops.sparse_mla.kernels import f16_rows
    x = (torch.randn(37, d_qk) * 3).to(torch.bfloat16)
    edges = torch.tensor([0.0, -0.0, 2.0 ** 24, -2.0 ** 24, 2.0 ** 24 * (1 - 2.0 ** -9), 2.0 ** -14, -2.0 ** -22 * 1.5,
                          2.0 ** -23 * 1.25, 2.0 ** -30, 3e-38, 1e-40, float("inf"), -float("inf")])
    x[0, :edges.numel()] = edges.to(torch.bfloat16)
    x[1] = (torch.rand(d_qk) * 2.0 ** -10).to(torch.bfloat16)  # fp16 subnormals after the scale
    dst = torch.full((40, d_qk), 7.0, dtype=torch.bfloat16)
    f16_rows(x, dst)
    assert torch.equal(dst[:37, :512].view(torch.int16), _torch_f16(x))
    assert torch.equal(dst[:37, 512:], x[:, 512:])
    assert (dst[37:] == 7.0).all()
    keys = torch.tensor([3, -1, 36, 37, 0, 2 ** 31 - 1, -2 ** 31, 36], dtype=torch.int32)
    rows = torch.full((10, d_qk), 7.0, dtype=torch.bfloat16)
    kmap = torch.full((10,), 99, dtype=torch.int32)
    f16_rows(x, rows, keys, kmap)
    ok = (keys >= 0) & (keys < 37)
    assert kmap[:8].tolist() == [k if v else -1 for k, v in enumerate(ok.tolist())] and (kmap[8:] == 99).all()
    src = x[keys.clamp(0, 36).long()]
    assert torch.equal(rows[:8][ok, :512].view(torch.int16), _torch_f16(src[ok]))
    assert torch.equal(rows[:8][ok, 512:], src[ok, 512:])
    assert (rows[:8][~ok] == 0).all() and (rows[8:] == 7.0).all()


def test_row_spec_and_rule():
    assert prefill_row_spec(10) == [((10, 576), torch.bfloat16), ((10,), torch.int32)]
    assert prefill_row_spec(0, 512) == [((0, 512), torch.bfloat16), ((0,), torch.int32)]
    for bad in (dict(num_rows=-1), dict(num_rows=4, d_qk=64)):
        with pytest.raises(ValueError):
            prefill_row_spec(**bad)
    # issue 3's prefill case: 16384 rows, topk 2048, s_q 1024 (ratio 1: 8 heads at 0.5 not converted, 16..128 are)
    assert not prefill_converts_rows(1024, 8, 2048, 16384)
    assert all(prefill_converts_rows(1024, h, 2048, 16384) for h in (16, 32, 64, 128))
    assert prefill_converts_rows(2048, 8, 2048, 16384) and prefill_converts_rows(512, 32, 2048, 16384)
    assert not prefill_converts_rows(511, 32, 2048, 16384)
    assert not prefill_converts_rows(1024, 128, 2048, 1 << 20)  # a whole engine cache's flat view
    assert not prefill_converts_rows(16, 64, 64, 16384)          # a short prefill, few keys


def test_row_scratch_checked():
    """A wrong row_scratch is a ValueError naming it, before anything runs; out stays as it was."""
    case = make_case(6, 8, 576, num_slots=200, topk=32)
    n = case.flat.shape[0]
    good = [torch.zeros(s, dtype=dt) for s, dt in prefill_row_spec(n)]
    keys = torch.arange(50, dtype=torch.int32)
    r0, r1 = "row_scratch\\[0\\]", "row_scratch\\[1\\]"
    bad_sets = [
        (good[0], None, "single tensor"), (good[:1], None, "2 tensors"), ([good[0][:, :512], good[1]], None, r0),
        ([good[0].float(), good[1]], None, r0), ([good[0], good[1].long()], None, r1),
        ([good[0][:-1], good[1]], None, "at least"), ([good[0], good[1][:-1]], None, "at least"),
        ([good[0][:49], good[1]], keys, "at least"), ([good[0][::2], good[1]], None, r0),
        ([case.flat, good[1]], None, "overlap"), ([case.flat[10:], good[1]], keys, "overlap")]
    for bad, ks, msg in bad_sets:
        out, lse = poisoned_outputs(6, 8, "cpu")
        with pytest.raises(ValueError, match=msg):
            sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, out=out, lse=lse, key_slots=ks,
                               row_scratch=bad)
        assert out.isnan().all() and lse.isnan().all()
    sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, row_scratch=[])  # empty: none
    sparse_mla_prefill(case.q, case.flat, keys[:32].expand(6, 32).contiguous(), case.sm_scale, key_slots=keys,
                       row_scratch=[good[0][:50], good[1][:50]])  # NK rows are enough with key_slots


@pytest.mark.parametrize("keyed", [False, True])
def test_row_scratch_outputs_unchanged(monkeypatch, keyed):
    """Where the reference runs (TRITON_INTERPRET=0 here), row_scratch changes nothing."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    case = make_case(9, 16, 576, num_slots=300, topk=48, with_length=True, empty_rows=1)
    n = case.flat.shape[0]
    ks, idx = None, case.indices
    if keyed:
        clean = (~case.flat.isnan().any(1)).nonzero()[:, 0]  # (with_length's cut-off entries point at NaN rows)
        ks = clean[torch.randperm(clean.numel())[:120]].to(torch.int32)
        ks[5] = -1
        idx = torch.randint(-3, 125, case.indices.shape, dtype=torch.int32)
    base = sparse_mla_prefill(case.q, case.flat, idx, case.sm_scale, topk_length=case.topk_length, key_slots=ks)
    scratch = [torch.full(s, 3, dtype=dt) for s, dt in prefill_row_spec(n)]
    got = sparse_mla_prefill(case.q, case.flat, idx, case.sm_scale, topk_length=case.topk_length, key_slots=ks,
                             row_scratch=scratch)
    assert torch.equal(got[0], base[0]) and torch.equal(got[1], base[1])


@interpreted
@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("h", [32, 64])
def test_launcher_converts_on_a_simulated_sm90(monkeypatch, keyed, h):
    """launch_prefill on an sm_90 stand-in (gluon_prefill's launch recorded, not run): with row_scratch and the rule
    met, the rows converted by f16_rows and the kernel handed them with config pre16 (and pair where
    gluon_prefill.rows_config puts it, 1-32 heads: at 32 here, not 64; keyed: kmap in key_slots' place, over NK
    rows); the rule not met, or f16 0 (DSATTN_PF_CONFIG), or no row_scratch: kv and the config as before."""
    from dsattn.ops.sparse_mla import gluon_prefill
    seen = []
    monkeypatch.setattr(launch, "use_gluon_prefill", lambda *a, **k: True)
    monkeypatch.setattr(gluon_prefill, "run_prefill_gluon", lambda q, kv, idx, *a, config=None, key_slots=None, **k:
                        seen.append((kv, config, key_slots, idx)))
    monkeypatch.delenv("DSATTN_PF_CONFIG", raising=False)
    t, n = 120, 100
    q = torch.randn(t, h, 576).to(torch.bfloat16)
    kv = torch.randn(n, 576).to(torch.bfloat16)
    idx = torch.randint(0, 30 if keyed else n, (t, 128), dtype=torch.int32)  # 120 x 32 x 128 >= 2 x 2048 x 100
    ks = torch.randperm(n)[:30].to(torch.int32) if keyed else None
    nr = 30 if keyed else n
    rows, kmap = [torch.zeros(s, dtype=dt) for s, dt in prefill_row_spec(nr + 3)]
    out, lse = poisoned_outputs(t, h, "cpu")

    def go(**kw):
        seen.clear()
        launch.launch_prefill(q, kv, idx, 0.1, None, out, lse, "native", key_slots=ks, **kw)
        return seen[0]

    kv_seen, cfg, ks_seen, idx_seen = go(rows=rows, kmap=kmap)
    assert cfg.pre16 == 1 and kv_seen.data_ptr() == rows.data_ptr() and kv_seen.shape[0] == nr
    # gluon_prefill.rows_config: gluon_pair (with lazy 1, session 74, vst 1, session 78, and odd 1, session 79) at
    # 1..32 heads (session 69), so not at 64 (where vst 1 is prefill_config's default anyway)
    assert cfg.pair == (h == 32) and cfg.lazy == (h == 32) and cfg.odd == (h == 32) and cfg.vst == 1
    src = kv if ks is None else kv[ks.long()]
    assert torch.equal(rows[:nr, :512].view(torch.int16), _torch_f16(src))
    if keyed:
        assert kmap[:nr].tolist() == list(range(nr))
        if h == 32:  # grouped: the union lists over the keys, kmap in key_slots' place
            assert ks_seen.data_ptr() == kmap.data_ptr() and idx_seen is idx
        else:  # one token a program: the keys looked up through kmap (here each key its own row)
            assert ks_seen is None and torch.equal(idx_seen, idx)
    assert go()[1] is None  # no row_scratch
    monkeypatch.setenv("DSATTN_PF_CONFIG", "f16=0,cvt_pipe=0,producer_regs=56")
    assert go(rows=rows, kmap=kmap)[0] is kv or keyed  # f16 0: nothing converted
    monkeypatch.delenv("DSATTN_PF_CONFIG")
    q1 = q[:1]
    seen.clear()
    launch.launch_prefill(q1, kv, idx[:1], 0.1, None, out[:1], lse[:1], "native", key_slots=ks, rows=rows, kmap=kmap)
    assert seen[0][1] is None  # one token: the rule says no


def test_env_config_refuses_pre16(monkeypatch):
    from dsattn.ops.sparse_mla import gluon_prefill
    with pytest.raises(ValueError, match="pre16"):
        gluon_prefill.parse_prefill_config("pre16=1")
    assert gluon_prefill.parse_prefill_config("pre16=1", allow_pre16=True).pre16 == 1
    with pytest.raises(ValueError, match="pre16"):
        gluon_prefill.parse_prefill_config("f16=0,cvt_pipe=0,pre16=1", allow_pre16=True)


def test_pair_config_parse_and_fallback(monkeypatch):
    """Config pair (gluon_pair, session 69): DSATTN_PF_CONFIG may name it with the fp16 default's 64 x 2 blocks only;
    run_prefill_gluon runs it over converted rows (pre16) at D_qk 576 and otherwise the split consumer (its launch
    recorded here, not run)."""
    from dsattn.ops.sparse_mla import gluon_prefill
    assert gluon_prefill.parse_prefill_config("pair=1").pair == 1
    assert gluon_prefill.parse_prefill_config("pair=1,sfold=1,prel=1").prel == 1
    assert gluon_prefill.parse_prefill_config("pair=1,fq=1,qreg=1").qreg == 1
    assert gluon_prefill.parse_prefill_config("pair=1,lazy=1").lazy == 1
    assert gluon_prefill.parse_prefill_config("pair=1,odd=1").odd == 1
    for bad in ("pair=1,f16=0,cvt_pipe=0", "pair=1,block_n=32", "pair=1,stages=3", "pair=2", "sfold=2", "prel=2",
                "fq=2", "qreg=2", "lazy=2", "odd=2", "pair=1,lazy=1,pe=1", "pair=1,ring=1", "pair=1,qpf=1",
                "pair=1,pers=1"):
        with pytest.raises(ValueError, match="pair"):
            gluon_prefill.parse_prefill_config(bad)
    seen = []
    monkeypatch.setattr(gluon_prefill, "_launch", lambda *a: seen.append(a[-2]))
    monkeypatch.setattr(gluon_prefill, "combine_splits", lambda *a: None)
    pair = gluon_prefill.PrefillConfig(pair=1)
    for d, pre16, want in ((576, 1, 1), (576, 0, 0), (512, 1, 0)):
        q = torch.zeros(3, 64, d, dtype=torch.bfloat16)
        kv = torch.zeros(10, d, dtype=torch.bfloat16)
        idx = torch.zeros(3, 64, dtype=torch.int32)
        out, lse = poisoned_outputs(3, 64, "cpu")
        seen.clear()
        cfg = gluon_prefill.PrefillConfig(pair=1, pre16=pre16)
        gluon_prefill.run_prefill_gluon(q, kv, idx, 0.1, None, out, lse, config=cfg)
        assert seen[0].pair == want and seen[0].pre16 == pre16, (d, pre16)
    assert pair.producer_regs == 80  # the split consumer's; gluon_pair's producer takes PAIR_PRODUCER_REGS


@interpreted
def test_launcher_passes_pair_over_converted_rows(monkeypatch):
    """DSATTN_PF_CONFIG=pair=1 with row_scratch and the rule met: the kernel gets pair 1 and pre16 1 over the rows;
    without row_scratch, pair 1 and pre16 0 (run_prefill_gluon then runs the split consumer)."""
    from dsattn.ops.sparse_mla import gluon_prefill
    seen = []
    monkeypatch.setattr(launch, "use_gluon_prefill", lambda *a, **k: True)
    monkeypatch.setattr(gluon_prefill, "run_prefill_gluon", lambda q, kv, idx, *a, config=None, **k:
                        seen.append((kv, config)))
    monkeypatch.setenv("DSATTN_PF_CONFIG", "pair=1")
    t, h, n = 120, 32, 100
    q = torch.randn(t, h, 576).to(torch.bfloat16)
    kv = torch.randn(n, 576).to(torch.bfloat16)
    idx = torch.randint(0, n, (t, 128), dtype=torch.int32)
    rows, kmap = [torch.zeros(s, dtype=dt) for s, dt in prefill_row_spec(n)]
    out, lse = poisoned_outputs(t, h, "cpu")
    launch.launch_prefill(q, kv, idx, 0.1, None, out, lse, "native", rows=rows, kmap=kmap)
    assert seen[0][0].data_ptr() == rows.data_ptr() and (seen[0][1].pair, seen[0][1].pre16) == (1, 1)
    seen.clear()
    launch.launch_prefill(q, kv, idx, 0.1, None, out, lse, "native")
    assert seen[0][0] is kv and seen[0][1] is None
