"""gluon_rx.py on the CPU: the column permutations its register operands rely on, its launch choice and config
(the kernel itself runs in tests/gpu/test_sparse_mla_rx_gpu.py and compiles in bench/mla_gluon_check.py --kernel rx)."""
import numpy as np
import pytest
import torch

from dsattn.formats import KVLayout
from dsattn.ops.sparse_mla import gluon_rx, launch


def test_s_permutation_matches_the_register_chain():
    """_k_operand loads physical columns p of a group, reshapes [64, 128] -> [64, 4, 2, 4, 2, 2], permutes
    (0, 2, 3, 4, 1, 5) and reshapes back: logical column c must then hold physical column s_phys(c)."""
    p = np.broadcast_to(np.arange(128), (64, 128))
    x = p.reshape(64, 4, 2, 4, 2, 2).transpose(0, 2, 3, 4, 1, 5).reshape(64, 128)
    c = np.arange(128)
    assert (x == np.array([gluon_rx.s_phys(int(v)) for v in c])[None, :]).all()
    full = [gluon_rx.s_phys(c) for c in range(512)]
    assert sorted(full) == list(range(512))
    assert all(full[c] // 128 == c // 128 for c in range(512))  # groups (scales) kept


def test_v_permutation_matches_the_register_chain():
    """_v_operand: [16 keys, 4 groups, 128] -> [16, 4, 8, 8, 2], permute (3, 1, 4, 2, 0), reshape [512, 16]:
    logical row d must hold physical column v_phys(d) (the same for every key)."""
    p = np.broadcast_to(np.arange(512).reshape(4, 128), (16, 4, 128))
    x = p.reshape(16, 4, 8, 8, 2).transpose(3, 1, 4, 2, 0).reshape(512, 16)
    v = np.array([gluon_rx.v_phys(d) for d in range(512)])
    assert (x == v[:, None]).all()
    assert sorted(v.tolist()) == list(range(512))
    t = torch.arange(512)
    assert torch.equal(gluon_rx.v_phys(t), torch.from_numpy(v)) and torch.equal(
        gluon_rx.s_phys(t), torch.tensor([gluon_rx.s_phys(c) for c in range(512)]))


def test_epilogue_permutation_puts_rows_in_physical_order():
    """_ot_phys (config vst): O^T's accumulator rows m (0..511) reshaped to 2 x ... x 2, permuted
    (3, 4, 6, 7, 8, 0, 1, 2, 5) and reshaped back: position p must hold the row m with v_phys(m) = p, so that storing
    position p at out column p writes what _store_ot writes at v_phys(m); and _ot_phys_layout's registers are 16
    consecutive positions a thread."""
    m = np.arange(512)
    x = m.reshape([2] * 9).transpose(3, 4, 6, 7, 8, 0, 1, 2, 5).reshape(512)
    assert all(gluon_rx.v_phys(int(x[p])) == p for p in range(512))
    if not gluon_rx.HAVE_GLUON:
        return
    for hp in (8, 16, 32):
        lay = gluon_rx._ot_phys_layout.fn(hp)  # (the constexpr_function's Python body)
        reg = [tuple(b) for b in lay.reg_bases]
        assert reg[:4] == [(1 << i, 0) for i in range(4)]
        # every (row, head) once: the bases span [512, hp]
        pts = {(0, 0)}
        for b in reg + [tuple(b) for b in lay.lane_bases] + [tuple(b) for b in lay.warp_bases]:
            pts |= {(r ^ b[0], c ^ b[1]) for r, c in pts}
        assert len(pts) == 512 * hp and max(r for r, _ in pts) == 511 and max(c for _, c in pts) == hp - 1


def test_rx_choice():
    """gluon_rx: under auto only for fp8 rows at <= 32 heads a program (<= 16 until session 59) where usable (never on
    a CPU tensor, no ValueError); under gluon_rx over fp8 rows at <= 32 heads, ValueError where it cannot run."""
    q = torch.zeros(2, 8, 576, dtype=torch.bfloat16)
    assert launch.rx_preferred(KVLayout.FP8_DS_MLA, 16) and launch.rx_preferred(KVLayout.FP8_DS_MLA_NOPE, 8)
    assert launch.rx_preferred(KVLayout.FP8_DS_MLA, 32) and launch.rx_preferred(KVLayout.FP8_DS_MLA_NOPE, 32)
    assert not launch.rx_preferred(KVLayout.FP8_DS_MLA, 64) and not launch.rx_preferred(KVLayout.BF16, 16)
    rows = torch.zeros(16, 656, dtype=torch.uint8)
    flat = torch.zeros(16, 576, dtype=torch.bfloat16)
    for impl in ("auto", "triton", "gluon", "gluon_ws", "gluon64", "gluon_prefill"):
        assert not launch.use_gluon_rx(q, rows, KVLayout.FP8_DS_MLA, 16, impl)
    assert not launch.use_gluon_rx(q, flat, KVLayout.BF16, 16, "gluon_rx")
    assert not launch.use_gluon_rx(q, rows, KVLayout.FP8_DS_MLA, 64, "gluon_rx")
    assert not launch.use_gluon_ws(q, rows, KVLayout.FP8_DS_MLA, 16, "gluon_rx")
    assert not launch.use_gluon64(q, rows, KVLayout.FP8_DS_MLA, 64, "gluon_rx")
    with pytest.raises(ValueError, match="DSATTN_SPARSE_MLA_IMPL=gluon_rx"):
        launch.use_gluon_rx(q, rows, KVLayout.FP8_DS_MLA, 16, "gluon_rx")
    with pytest.raises(ValueError, match="DSATTN_SPARSE_MLA_IMPL=gluon"):  # bf16 rows: gluon_small's, as gluon_ws
        launch.use_gluon(q, flat, KVLayout.BF16, 16, "gluon_rx")
    # bf16 rows in 32-head programs: gluon_rxb, under gluon_rx only (session 61)
    assert not launch.use_gluon_rx(q, flat, KVLayout.BF16, 32, "auto")
    with pytest.raises(ValueError, match="DSATTN_SPARSE_MLA_IMPL=gluon_rx"):
        launch.use_gluon_rx(q, flat, KVLayout.BF16, 32, "gluon_rx")


def test_rxb_choice_on_a_simulated_sm90(monkeypatch):
    """Where it can run (an sm_90 stand-in), DSATTN_SPARSE_MLA_IMPL=gluon_rx sends bf16-row launches of 32-head
    programs (prefill 'native' at 17..32 heads, bf16 decode) to gluon_rxb; 16-head programs stay gluon_small's, and
    'auto' never takes it."""
    import types
    monkeypatch.setitem(launch._SM90, 0, True)
    for m in ("gluon_prefill", "gluon_small", "gluon64", "gluon_ws", "gluon_rx"):
        monkeypatch.setitem(launch._HAVE_GLUON, m, True)
    monkeypatch.setattr(launch, "interpreting", lambda: False)
    flat = torch.zeros(64, 576, dtype=torch.bfloat16)
    for h, hp in ((32, 32), (17, 32), (16, 16)):
        q = types.SimpleNamespace(shape=(4, h, 576), device=torch.device("cuda", 0))
        assert launch.use_gluon_rx(q, flat, KVLayout.BF16, hp, "gluon_rx") == (hp == 32)
        assert not launch.use_gluon_rx(q, flat, KVLayout.BF16, hp, "auto")
        monkeypatch.setenv("DSATTN_SPARSE_MLA_IMPL", "gluon_rx")
        assert launch.kernel_name(q, flat, KVLayout.BF16, "native", prefill=True) == (
            "gluon_rxb" if hp == 32 else "gluon")
        monkeypatch.delenv("DSATTN_SPARSE_MLA_IMPL")
        assert launch.kernel_name(q, flat, KVLayout.BF16, "native", prefill=True) == "gluon_prefill"


def test_rxb_rejects_what_it_does_not_take():
    """run_attention_rxb: bf16 rows of D_qk 512 / 576, 17..32 heads and a timing build 0..3, else ValueError before any
    launch."""
    from dsattn.ops.sparse_mla import gluon_rxb
    flat = torch.zeros(64, 576, dtype=torch.bfloat16)
    idx = torch.zeros(2, 64, dtype=torch.int32)
    out, lse = torch.empty(2, 32, 512, dtype=torch.bfloat16), torch.empty(2, 32)
    with pytest.raises(ValueError, match="17..32 heads"):
        gluon_rxb.run_attention_rxb(torch.zeros(2, 16, 576, dtype=torch.bfloat16), flat, idx, 0.1, None, out, lse)
    with pytest.raises(ValueError, match="bf16 rows"):
        gluon_rxb.run_attention_rxb(torch.zeros(2, 32, 576, dtype=torch.bfloat16), flat.view(torch.uint8), idx, 0.1,
                                    None, out, lse)
    with pytest.raises(ValueError, match="profile"):
        gluon_rxb.run_attention_rxb(torch.zeros(2, 32, 576, dtype=torch.bfloat16), flat, idx, 0.1, None, out, lse,
                                    profile=4)


def test_rx_config(monkeypatch):
    monkeypatch.delenv("DSATTN_RX_CONFIG", raising=False)
    monkeypatch.delenv("DSATTN_RX_CONSUMERS", raising=False)
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 8, 576) == gluon_rx.RxConfig(stages=4, producer_regs=56, consumers=2,
                                                                                  hp8=1, pingpong=1)
    # session 19; vpair (V's bytes paired by key) at 16- and 32-head programs since session 60
    two_ctas = gluon_rx.RxConfig(stages=2, producer_regs=48, consumers=1, hp8=1, maxnreg=128, vpair=1)
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 16, 576) == two_ctas
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA_NOPE, 12, 512) == two_ctas
    for layout, d in ((KVLayout.FP8_DS_MLA, 576), (KVLayout.FP8_DS_MLA_NOPE, 512)):  # two CTAs fit an SM
        assert 2 * (gluon_rx.rx_smem_bytes(layout, d, 16, 2) + gluon_rx.SMEM_MARGIN) <= gluon_rx.SMEM_LIMIT
    # 32-head programs: ping-pong since session 59 (the merge buffer in the raw stages, so 4 / 5 of them fit)
    pp32 = dict(producer_regs=40, pv_depth=0, consumers=2, hp8=1, pingpong=1, spillfix=1, vpair=1)
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 32, 576) == gluon_rx.RxConfig(stages=4, **pp32)
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA_NOPE, 24, 512) == gluon_rx.RxConfig(stages=5, **pp32)
    assert gluon_rx.rx_smem_bytes(KVLayout.FP8_DS_MLA, 576, 32, 4, 2) + gluon_rx.SMEM_MARGIN <= gluon_rx.SMEM_LIMIT
    one32 = gluon_rx.RxConfig(stages=4, pv_depth=0, consumers=1, hp8=1, vpair=1)  # DSATTN_RX_CONSUMERS=1
    monkeypatch.setenv("DSATTN_RX_CONSUMERS", "2")  # the 16-head default of sessions 13-18 (ping-pong)
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 16, 576) == gluon_rx.RxConfig(stages=4, producer_regs=48,
                                                                                   consumers=2, hp8=1, pingpong=1,
                                                                                   spillfix=1, vpair=1)
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA_NOPE, 12, 512) == gluon_rx.RxConfig(stages=5, producer_regs=48,
                                                                                      consumers=2, hp8=1, pingpong=1,
                                                                                      spillfix=1, vpair=1)
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 8, 576) == gluon_rx.RxConfig(stages=4, producer_regs=56, consumers=2,
                                                                                  hp8=1, pingpong=1)
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 32, 576) == gluon_rx.RxConfig(stages=4, **pp32)
    monkeypatch.setenv("DSATTN_RX_CONSUMERS", "1")
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 8, 576) == gluon_rx.RxConfig(stages=5, consumers=1, hp8=1)
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 32, 576) == one32
    for c in ("", "1", "2"):
        monkeypatch.setenv("DSATTN_RX_CONSUMERS", c)
        for h in (1, 8, 16, 32):
            hp = 8 if h <= 8 else gluon_rx.rx_hp(h)
            for layout, d in ((KVLayout.FP8_DS_MLA, 576), (KVLayout.FP8_DS_MLA_NOPE, 512)):
                cfg = gluon_rx.rx_config(layout, h, d)
                assert cfg.pingpong == (cfg.consumers == 2)
                assert (gluon_rx.rx_smem_bytes(layout, d, hp, cfg.stages, cfg.consumers)
                        + gluon_rx.SMEM_MARGIN <= gluon_rx.SMEM_LIMIT)
    monkeypatch.setenv("DSATTN_RX_CONSUMERS", "3")
    with pytest.raises(ValueError, match="DSATTN_RX_CONSUMERS"):
        gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 8)
    monkeypatch.delenv("DSATTN_RX_CONSUMERS")
    monkeypatch.setenv("DSATTN_RX_CONFIG", "stages=3, pv_depth=2")  # fields left out: RxConfig's defaults
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 8) == gluon_rx.RxConfig(stages=3, pv_depth=2)
    # the positional form of sessions 10-27, unknown or repeated fields, non-integers: refused, naming the variable
    for bad in ("3/64/4/0/2", "stages=3/64", "prefetch=1", "alu=1", "pipe=1", "stages=3,stages=4", "stages=x",
                "stages", "stages=3,"):
        monkeypatch.setenv("DSATTN_RX_CONFIG", bad)
        with pytest.raises(ValueError, match="DSATTN_RX_CONFIG"):
            gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 8)
    monkeypatch.delenv("DSATTN_RX_CONFIG")
    for layout, d in ((KVLayout.FP8_DS_MLA, 576), (KVLayout.FP8_DS_MLA_NOPE, 512)):
        for h in (8, 16, 32):  # rx_config_spec writes what parse_rx_config reads
            cfg = gluon_rx.rx_config(layout, h, d)
            assert gluon_rx.parse_rx_config(gluon_rx.rx_config_spec(cfg)) == cfg


def test_rx_rejects_bad_launches():
    q = torch.zeros(2, 40, 576, dtype=torch.bfloat16)
    rows = torch.zeros(16, 656, dtype=torch.uint8)
    out, lse = torch.empty(2, 40, 512), torch.empty(2, 40)
    idx = torch.zeros(2, 64, dtype=torch.int32)
    with pytest.raises(ValueError, match="at most 32 heads"):
        gluon_rx.run_attention_rx(q, rows, KVLayout.FP8_DS_MLA, idx, 0.1, None, out, lse)
    with pytest.raises(ValueError, match="fp8 rows"):
        gluon_rx.run_attention_rx(q[:, :8], rows, KVLayout.BF16, idx, 0.1, None, out, lse)
    with pytest.raises(ValueError, match="pv_depth"):
        gluon_rx.run_attention_rx(q[:, :8], rows, KVLayout.FP8_DS_MLA, idx, 0.1, None, out, lse,
                                  config=gluon_rx.RxConfig(pv_depth=5))
    with pytest.raises(ValueError, match="consumers"):
        gluon_rx.run_attention_rx(q[:, :8], rows, KVLayout.FP8_DS_MLA, idx, 0.1, None, out, lse,
                                  config=gluon_rx.RxConfig(consumers=3))
    for bad in (gluon_rx.RxConfig(consumers=2, pingpong=1, maxnreg=128), gluon_rx.RxConfig(consumers=1, maxnreg=100),
                gluon_rx.RxConfig(consumers=1, maxnreg=32), gluon_rx.RxConfig(consumers=1, maxnreg=256)):
        with pytest.raises(ValueError, match="config.maxnreg"):
            gluon_rx.run_attention_rx(q[:, :8], rows, KVLayout.FP8_DS_MLA, idx, 0.1, None, out, lse, config=bad)
    for bad in (gluon_rx.RxConfig(idxpf=5), gluon_rx.RxConfig(idxpf=-1)):
        with pytest.raises(ValueError, match="config.idxpf"):
            gluon_rx.run_attention_rx(q[:, :8], rows, KVLayout.FP8_DS_MLA, idx, 0.1, None, out, lse, config=bad)
    with pytest.raises(ValueError, match="config.sraw"):
        gluon_rx.run_attention_rx(q[:, :8], rows, KVLayout.FP8_DS_MLA, idx, 0.1, None, out, lse,
                                  config=gluon_rx.RxConfig(sraw=2))
    with pytest.raises(ValueError, match="config.vpair"):
        gluon_rx.run_attention_rx(q[:, :8], rows, KVLayout.FP8_DS_MLA, idx, 0.1, None, out, lse,
                                  config=gluon_rx.RxConfig(vpair=2))


def test_rx_maxnreg_config(monkeypatch):
    """maxnreg (DSATTN_RX_CONFIG takes it; the default sets 128 at 16-head programs only)."""
    monkeypatch.delenv("DSATTN_RX_CONSUMERS", raising=False)
    monkeypatch.setenv("DSATTN_RX_CONFIG", "stages=2,producer_regs=48,consumers=1,hp8=1,maxnreg=128")
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 8) == gluon_rx.RxConfig(
        stages=2, producer_regs=48, consumers=1, hp8=1, maxnreg=128)
    monkeypatch.delenv("DSATTN_RX_CONFIG")
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 8).maxnreg == 0
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 16).maxnreg == 128
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 32).maxnreg == 0
    monkeypatch.setenv("DSATTN_RX_CONSUMERS", "1")
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 16).maxnreg == 0


def test_rx_idxpf_config(monkeypatch):
    """idxpf (L1 prefetch of the index lines) and sraw (S^T from unscaled fp8 values, a group's accumulator each;
    session 19): both are in the default only at 8-head fp8_ds_mla_nope programs (session 20)."""
    monkeypatch.delenv("DSATTN_RX_CONSUMERS", raising=False)
    monkeypatch.setenv("DSATTN_RX_CONFIG", "stages=5,producer_regs=56,consumers=2,hp8=1,pingpong=1,idxpf=2")
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA_NOPE, 8, 512) == gluon_rx.RxConfig(
        stages=5, producer_regs=56, consumers=2, hp8=1, pingpong=1, idxpf=2)
    monkeypatch.setenv("DSATTN_RX_CONFIG", "stages=2,producer_regs=48,consumers=1,hp8=1,maxnreg=128,sraw=1")
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 16) == gluon_rx.RxConfig(
        stages=2, producer_regs=48, consumers=1, hp8=1, maxnreg=128, sraw=1)
    monkeypatch.delenv("DSATTN_RX_CONFIG")
    assert all(gluon_rx.rx_config(KVLayout.FP8_DS_MLA, h).idxpf == 0 for h in (8, 16, 32))
    assert all(gluon_rx.rx_config(KVLayout.FP8_DS_MLA, h).sraw == 0 for h in (8, 16, 32))
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA_NOPE, 8, 512) == gluon_rx.RxConfig(
        stages=5, producer_regs=48, consumers=2, hp8=1, pingpong=1, idxpf=2, sraw=1, vpair=1)
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA, 8, 576).vpair == 0  # (session 60: 0.994x on an H200)
    for h in (4, 8):  # both run as 8-head programs
        assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA_NOPE, h, 512).sraw == 1
    assert all(gluon_rx.rx_config(KVLayout.FP8_DS_MLA_NOPE, h, 512).sraw == 0 for h in (9, 16, 32))
    monkeypatch.setenv("DSATTN_RX_CONSUMERS", "2")  # ping-pong at 8 and 16 heads: the nope fields at 8 only
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA_NOPE, 8, 512).idxpf == 2
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA_NOPE, 16, 512).idxpf == 0
    monkeypatch.setenv("DSATTN_RX_CONSUMERS", "1")
    assert gluon_rx.rx_config(KVLayout.FP8_DS_MLA_NOPE, 8, 512).sraw == 0  # one consumer: not measured with it


def test_rx_config_guards():
    """The register split (two consumers: the register file less the producer's warpgroup), and the configs refused
    before any kernel runs: three consumers (removed: measured slower twice, gluon_rx's docstring), spillfix other
    than 0 / 1 or without ping-pong, producer warps other than 4 / 8 (Triton pads fewer to a warpgroup)."""
    assert gluon_rx.rx_consumer_regs(2, 4, 56) == 224  # the 8-head default's split
    assert gluon_rx.rx_consumer_regs(2, 4, 48) == 232  # 16-head programs
    assert gluon_rx.rx_consumer_regs(2, 4, 40) == 232  # 32-head programs (multiples of 8: 236 -> 232)
    assert gluon_rx.rx_consumer_regs(2, 4, 64) == 224
    assert gluon_rx.rx_consumer_regs(2, 8, 64) == 192
    q = torch.zeros(2, 8, 576, dtype=torch.bfloat16)
    rows = torch.zeros(16, 656, dtype=torch.uint8)
    out, lse = torch.empty(2, 8, 512), torch.empty(2, 8)
    idx = torch.zeros(2, 64, dtype=torch.int32)
    for bad, what in ((gluon_rx.RxConfig(consumers=3, hp8=1, pingpong=1), "config.consumers"),
                      (gluon_rx.RxConfig(consumers=3, hp8=1, pingpong=1, spillfix=3), "config.consumers"),
                      (gluon_rx.RxConfig(consumers=2, hp8=1, pingpong=1, spillfix=2), "config.spillfix"),
                      (gluon_rx.RxConfig(consumers=2, hp8=1, pingpong=1, spillfix=3), "config.spillfix"),
                      (gluon_rx.RxConfig(consumers=1, hp8=1, spillfix=1), "config.spillfix"),
                      (gluon_rx.RxConfig(consumers=1, hp8=1, pingpong=1), "config.pingpong"),
                      # two consumers in step (the halves, pingpong 0): removed in session 34
                      (gluon_rx.RxConfig(consumers=2, hp8=1), "config.pingpong"),
                      (gluon_rx.RxConfig(consumers=2, hp8=1, spillfix=1), "config.pingpong"),
                      (gluon_rx.RxConfig(consumers=2, hp8=1, pingpong=2), "config.pingpong"),
                      (gluon_rx.RxConfig(consumers=2, hp8=1, pingpong=1, producer_warps=2), "config.producer_warps"),
                      (gluon_rx.RxConfig(consumers=2, hp8=1, pingpong=1, producer_warps=1), "config.producer_warps")):
        with pytest.raises(ValueError, match=what):
            gluon_rx.run_attention_rx(q, rows, KVLayout.FP8_DS_MLA, idx, 0.1, None, out, lse, config=bad)
    for bad_profile, cfg in ((4, gluon_rx.RxConfig(consumers=2, hp8=1, pingpong=1)),
                             (1, gluon_rx.RxConfig(consumers=1, hp8=1)), (2, gluon_rx.RxConfig(consumers=1, hp8=1)),
                             (3, gluon_rx.RxConfig(consumers=1, hp8=1))):
        with pytest.raises(ValueError, match="profile"):  # timing builds: ping-pong configs only
            gluon_rx.run_attention_rx(q, rows, KVLayout.FP8_DS_MLA, idx, 0.1, None, out, lse, config=cfg,
                                      profile=bad_profile)


def test_rxb_compiles_for_sm90a(tmp_path):
    """gluon_rxb (session 61; run on an H100 in session 62) compiles for sm_90a at D_qk 576 and 512 without spills or
    wgmma serialization, within the shared-memory limit, its V^T operand loaded by ldmatrix .trans (8 a 16-key chunk,
    4 chunks, two consumers) and converted by mul.rn.bf16x2 (_bf16_to_f16_scaled)."""
    import os
    import re
    import subprocess
    import sys
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.path.join(root, "src")}
    env.pop("TRITON_INTERPRET", None)
    cases = ["prefill-bf16-32", "prefill-bf16n-32"]
    res = subprocess.run([sys.executable, os.path.join(root, "bench", "mla_gluon_check.py"), "--kernel", "rxb",
                          "--cases", ",".join(cases), "--dump", str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == len(cases), res.stdout
    for name, ln in zip(cases, lines):
        assert ln.startswith(name) and "FAILED" not in ln and "WGMMA_SERIALIZED" not in ln, ln
        assert int(re.search(r"spill_st=(\d+)", ln).group(1)) == 0, ln
        assert int(re.search(r"smem=\s*(\d+)", ln).group(1)) <= launch.SMEM_LIMIT, ln
        ptx = (tmp_path / f"{name}_default.ptx").read_text()
        assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.trans") == 64, name
        assert ptx.count("mul.rn.bf16x2") == 2 * 4 * 32, name  # consumers x chunks x pairs a thread
