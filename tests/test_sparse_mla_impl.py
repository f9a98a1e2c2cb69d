"""DSATTN_SPARSE_MLA_IMPL and the choice between the Triton and the Gluon sparse MLA kernels (CPU only:
the Gluon kernels themselves run in tests/gpu/test_sparse_mla_gpu.py and compile in bench/mla_gluon_check.py)."""
import pytest
import torch

from dsattn.formats import KVLayout
from dsattn.ops.sparse_mla import launch, sparse_mla_prefill
from dsattn.ops.sparse_mla.testing import check_close, make_case, poisoned_outputs


@pytest.mark.parametrize("value, expected", [(None, "auto"), ("", "auto"), ("auto", "auto"), ("Triton", "triton"),
                                             (" gluon ", "gluon"), ("GLUON_WS", "gluon_ws"),
                                             ("Gluon64", "gluon64")])
def test_impl_knob(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("DSATTN_SPARSE_MLA_IMPL", raising=False)
    else:
        monkeypatch.setenv("DSATTN_SPARSE_MLA_IMPL", value)
    assert launch.sparse_mla_impl() == expected


def test_impl_knob_rejects_unknown(monkeypatch):
    monkeypatch.setenv("DSATTN_SPARSE_MLA_IMPL", "cuda")
    with pytest.raises(ValueError, match="DSATTN_SPARSE_MLA_IMPL"):
        launch.sparse_mla_impl()


def test_kernel_name_resolves_a_missing_variant_as_the_op_does(monkeypatch):
    """variant None: default_variant's choice (pad64 at 64 tokens, native past the SM count at 8 heads), so a
    benchmark record that passes the op's variant names the kernel that ran."""
    from dsattn.ops.sparse_mla.dispatch import DEFAULT_SM_COUNT
    monkeypatch.setattr(launch, "use_gluon64", lambda q, flat, layout, hp, impl=None: hp == 64)
    flat = torch.zeros(16, 656, dtype=torch.uint8)
    for t, want in ((64, "gluon64"), (DEFAULT_SM_COUNT + 1, "triton")):
        q = torch.zeros(t, 8, 576, dtype=torch.bfloat16)
        assert launch.kernel_name(q, flat, KVLayout.FP8_DS_MLA, None) == want
    assert launch.kernel_name(torch.zeros(64, 8, 576, dtype=torch.bfloat16), flat, KVLayout.FP8_DS_MLA,
                              "native") == "triton"


def test_gluon_never_chosen_off_gpu():
    q = torch.zeros(2, 8, 576, dtype=torch.bfloat16)
    flat = torch.zeros(16, 576, dtype=torch.bfloat16)
    assert not launch.gluon_usable(q, flat, KVLayout.BF16, 16)
    assert not launch.use_gluon(q, flat, KVLayout.BF16, 16, "auto")
    assert not launch.use_gluon(q, flat, KVLayout.BF16, 16, "triton")
    assert launch.kernel_name(q, flat, KVLayout.BF16, "native") == "triton"
    with pytest.raises(ValueError, match="DSATTN_SPARSE_MLA_IMPL=gluon"):
        launch.use_gluon(q, flat, KVLayout.BF16, 16, "gluon")
    # gluon_ws: auto takes it only where usable (never on a CPU tensor); over bf16 rows it stands for gluon;
    # forced where it cannot run, ValueError
    rows = torch.zeros(16, 656, dtype=torch.uint8)
    for impl in ("auto", "triton", "gluon"):
        assert not launch.use_gluon_ws(q, rows, KVLayout.FP8_DS_MLA, 16, impl)
    assert not launch.use_gluon_ws(q, flat, KVLayout.BF16, 16, "gluon_ws")
    assert not launch.use_gluon_ws(q, rows, KVLayout.FP8_DS_MLA, 64, "gluon_ws")
    assert launch.ws_preferred(KVLayout.FP8_DS_MLA, 16) and launch.ws_preferred(KVLayout.FP8_DS_MLA_NOPE, 16)
    assert launch.ws_preferred(KVLayout.FP8_DS_MLA, 32) and not launch.ws_preferred(KVLayout.BF16, 16)
    assert not launch.ws_preferred(KVLayout.FP8_DS_MLA, 64)
    with pytest.raises(ValueError, match="DSATTN_SPARSE_MLA_IMPL=gluon_ws"):
        launch.use_gluon_ws(q, rows, KVLayout.FP8_DS_MLA, 16, "gluon_ws")
    with pytest.raises(ValueError, match="DSATTN_SPARSE_MLA_IMPL=gluon"):
        launch.use_gluon(q, flat, KVLayout.BF16, 16, "gluon_ws")


def test_triton_forced_runs_interpreted(monkeypatch):
    """impl=triton is the interpreter's path anyway: a small prefill stays right."""
    monkeypatch.setenv("DSATTN_SPARSE_MLA_IMPL", "triton")
    case = make_case(3, 4, 576, num_slots=40, topk=32, layout="bf16", block_size=1, seed=1)
    out, lse = poisoned_outputs(3, 4)
    sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, out=out, lse=lse, variant="native")
    check_close(out, lse, *case.reference())


@pytest.mark.parametrize("layout, d_qk", [("fp8_ds_mla", 576), ("fp8_ds_mla", 512), ("fp8_ds_mla_nope", 512),
                                          ("bf16", 576), ("bf16", 512)])
@pytest.mark.parametrize("heads", [1, 8, 16, 17, 32])
def test_gluon_defaults_fit_shared_memory(layout, d_qk, heads):
    layout = KVLayout(layout)
    cfg = launch.gluon_config(layout, heads, d_qk)
    hp = 16 if heads <= 16 else 32
    assert cfg.block_n == 64 and cfg.num_warps in (4, 8) and 2 <= cfg.stages <= 4
    assert launch.gluon_smem_bytes(layout, d_qk, hp, cfg.block_n, cfg.stages) + 1024 <= launch.SMEM_LIMIT
    # auto prefers gluon_small at every program size it takes (bf16 rows below 17 heads too, since session 63)
    assert launch.gluon_preferred(layout, hp)


@pytest.mark.parametrize("layout, d_qk", [("fp8_ds_mla", 576), ("fp8_ds_mla", 512), ("fp8_ds_mla_nope", 512)])
@pytest.mark.parametrize("heads", [1, 8, 16, 17, 32])
def test_gluon_ws_defaults_fit_shared_memory(layout, d_qk, heads):
    from dsattn.ops.sparse_mla import gluon_ws
    layout = KVLayout(layout)
    cfg = gluon_ws.ws_config(layout, heads, d_qk)
    assert 2 <= cfg.stages <= 4
    hp = gluon_ws.ws_hp(heads)
    assert hp == (16 if heads <= 16 else 32)
    assert gluon_ws.ws_smem_bytes(layout, d_qk, hp, cfg.stages) + gluon_ws.SMEM_MARGIN <= gluon_ws.SMEM_LIMIT
    if cfg.stages < 4:  # as many stages as fit
        assert gluon_ws.ws_smem_bytes(layout, d_qk, hp, cfg.stages + 1) + gluon_ws.SMEM_MARGIN > gluon_ws.SMEM_LIMIT


def test_gluon_ws_config_ahead(monkeypatch):
    """WsConfig ahead (session 23: a gather's entries loaded 1 or 2 half-blocks before it is issued):
    DSATTN_WS_CONFIG's 4th field (the 5th until session 28 removed the L2 prefetch before it), anything else (or a
    5th field) a ValueError naming the variable; 2 is the default."""
    from dsattn.ops.sparse_mla import gluon_ws
    monkeypatch.setenv("DSATTN_WS_CONFIG", "2/128/4/2")
    assert gluon_ws.ws_config(KVLayout.FP8_DS_MLA, 32) == gluon_ws.WsConfig(2, 128, 4, ahead=2)
    monkeypatch.setenv("DSATTN_WS_CONFIG", "2/128/4/1")
    assert gluon_ws.ws_config(KVLayout.FP8_DS_MLA, 32).ahead == 1
    monkeypatch.delenv("DSATTN_WS_CONFIG")
    assert gluon_ws.ws_config(KVLayout.FP8_DS_MLA, 32).ahead == 2  # the default since session 23
    for bad in ("2/128/4/0", "2/128/4/3", "2/128/4/x", "2/128/4/2/1", "2/128/4/0/2"):
        monkeypatch.setenv("DSATTN_WS_CONFIG", bad)
        with pytest.raises(ValueError, match="DSATTN_WS_CONFIG"):
            gluon_ws.ws_config(KVLayout.FP8_DS_MLA, 32)


def test_gluon_ws_rejects_bf16_rows():
    from dsattn.ops.sparse_mla import gluon_ws
    q = torch.zeros(2, 8, 576, dtype=torch.bfloat16)
    flat = torch.zeros(16, 576, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="fp8 rows"):
        gluon_ws.run_attention_ws(q, flat, KVLayout.BF16, torch.zeros(2, 64, dtype=torch.int32), 0.1, None,
                                  torch.empty(2, 8, 512), torch.empty(2, 8))


def test_gluon64_choice():
    """gluon64: under auto and gluon64 only for 64-head programs over fp8 rows; auto falls back where it cannot run
    (here: CPU tensors), gluon64 raises ValueError; never under triton; gluon / gluon_ws / gluon_prefill leave
    64-head programs to auto (here: nothing, on CPU tensors; on a simulated sm_90:
    test_sparse_mla_prefill_impl.py::test_forced_decode_kernels_on_a_simulated_sm90); the other kernels' choices
    stay auto's."""
    q = torch.zeros(2, 64, 576, dtype=torch.bfloat16)
    rows = torch.zeros(16, 656, dtype=torch.uint8)
    flat = torch.zeros(16, 576, dtype=torch.bfloat16)
    for impl in ("auto", "triton", "gluon", "gluon_ws", "gluon_prefill"):
        assert not launch.use_gluon64(q, rows, KVLayout.FP8_DS_MLA, 64, impl)
    assert not launch.g64_usable(q, rows)
    assert not launch.use_gluon64(q, flat, KVLayout.BF16, 64, "gluon64")
    assert not launch.use_gluon64(q, rows, KVLayout.FP8_DS_MLA, 32, "gluon64")
    with pytest.raises(ValueError, match="DSATTN_SPARSE_MLA_IMPL=gluon64"):
        launch.use_gluon64(q, rows, KVLayout.FP8_DS_MLA, 64, "gluon64")
    with pytest.raises(ValueError, match="DSATTN_SPARSE_MLA_IMPL=gluon64"):
        launch.use_gluon64(q, rows, KVLayout.FP8_DS_MLA_NOPE, 64, "gluon64")
    # elsewhere gluon64 is auto: on a CPU tensor neither Gluon few-head kernel, and no ValueError
    assert not launch.use_gluon(q, rows, KVLayout.FP8_DS_MLA, 16, "gluon64")
    assert not launch.use_gluon_ws(q, rows, KVLayout.FP8_DS_MLA, 16, "gluon64")


def test_gluon64_forced_small_heads_runs_interpreted(monkeypatch):
    """Under gluon64 a launch without 64-head programs runs what auto runs (the interpreter's Triton kernel)."""
    monkeypatch.setenv("DSATTN_SPARSE_MLA_IMPL", "gluon64")
    case = make_case(3, 4, 576, num_slots=40, topk=32, layout="bf16", block_size=1, seed=2)
    out, lse = poisoned_outputs(3, 4)
    sparse_mla_prefill(case.q, case.flat, case.indices, case.sm_scale, out=out, lse=lse, variant="native")
    check_close(out, lse, *case.reference())


@pytest.mark.parametrize("layout, d_qk", [("fp8_ds_mla", 576), ("fp8_ds_mla", 512), ("fp8_ds_mla_nope", 512)])
def test_gluon64_fits_shared_memory(layout, d_qk):
    from dsattn.ops.sparse_mla import gluon64
    layout = KVLayout(layout)
    assert gluon64.g64_smem_bytes(layout, d_qk) + gluon64.SMEM_MARGIN <= gluon64.SMEM_LIMIT
    cfg = gluon64.g64_config(layout, 64, d_qk)
    assert cfg.producer_warps == 4 and cfg.producer_regs % 8 == 0


def test_gluon64_config_knob(monkeypatch):
    from dsattn.ops.sparse_mla import gluon64
    monkeypatch.delenv("DSATTN_G64_CONFIG", raising=False)
    assert gluon64.g64_config(KVLayout.FP8_DS_MLA, 64) == gluon64.G64Config()
    monkeypatch.setenv("DSATTN_G64_CONFIG", "4/104/32/1")
    assert gluon64.g64_config(KVLayout.FP8_DS_MLA, 64) == gluon64.G64Config(4, 104, 32, 1)
    monkeypatch.setenv("DSATTN_G64_CONFIG", "4/112/16/2/0")  # vst, the 5th field since session 28
    assert gluon64.g64_config(KVLayout.FP8_DS_MLA, 64) == gluon64.G64Config(vst=0)
    for bad in ("4/104/16/1", "8/104/16/3", "4/100/16/3", "4/120/16/4", "4/120/16", "fast", "4/112/16/2/0/1",
                "4/112/16/2/2"):
        monkeypatch.setenv("DSATTN_G64_CONFIG", bad)
        with pytest.raises(ValueError, match="DSATTN_G64_CONFIG"):
            gluon64.g64_config(KVLayout.FP8_DS_MLA, 64)


def test_gluon64_rejects_bf16_rows():
    from dsattn.ops.sparse_mla import gluon64
    q = torch.zeros(2, 64, 576, dtype=torch.bfloat16)
    flat = torch.zeros(16, 576, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="fp8 rows"):
        gluon64.run_attention_g64(q, flat, KVLayout.BF16, torch.zeros(2, 64, dtype=torch.int32), 0.1, None,
                                  torch.empty(2, 64, 512), torch.empty(2, 64))


def test_gluon_kernel_compiles_for_sm90a():
    """The Gluon kernel compiles for sm_90a on this machine (no GPU): bench/mla_gluon_check.py, two cases."""
    import os
    import re
    import subprocess
    import sys
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.path.join(root, "src")}
    env.pop("TRITON_INTERPRET", None)
    res = subprocess.run([sys.executable, os.path.join(root, "bench", "mla_gluon_check.py"), "--cases",
                          "decode-fp8-16,prefill-bf16-32"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 2 and not any("FAILED" in ln for ln in lines), res.stdout
    for ln in lines:
        assert int(re.search(r"smem=\s*(\d+)", ln).group(1)) <= launch.SMEM_LIMIT
        assert int(re.search(r"cp.async=(\d+)", ln).group(1)) > 0 and int(re.search(r"wgmma=(\d+)", ln).group(1)) > 0
    # the warp-specialized kernel (gluon_ws.py): partitions' register budgets and mbarrier hand-offs in the PTX
    res = subprocess.run([sys.executable, os.path.join(root, "bench", "mla_gluon_check.py"), "--kernel", "ws",
                          "--cases", "decode-fp8-16"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1 and "FAILED" not in lines[0], res.stdout
    ln = lines[0]
    assert int(re.search(r"smem=\s*(\d+)", ln).group(1)) <= launch.SMEM_LIMIT
    assert re.search(r"spill_st=0\b", ln), ln
    for what in ("cp.async", "wgmma", "mbar.wait", "mbar.arrive", "setmaxnreg"):
        assert int(re.search(what.replace(".", r"\.") + r"=(\d+)", ln).group(1)) > 0, (what, ln)
    # the 64-head kernel (gluon64.py): shared memory, register split, mbarrier hand-offs, no cp.async (global
    # loads into the producer's registers), the e4m3 conversions
    res = subprocess.run([sys.executable, os.path.join(root, "bench", "mla_gluon_check.py"), "--kernel", "g64",
                          "--cases", "decode-fp8-64"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1 and "FAILED" not in lines[0], res.stdout
    ln = lines[0]
    assert int(re.search(r"smem=\s*(\d+)", ln).group(1)) <= launch.SMEM_LIMIT
    assert "ptxas FAILED" not in ln and int(re.search(r"spill_st=(\d+)", ln).group(1)) <= 64, ln
    for what in ("wgmma", "mbar.wait", "mbar.arrive", "setmaxnreg", "ld.global", "cvt.e4m3"):
        assert int(re.search(what.replace(".", r"\.") + r"=(\d+)", ln).group(1)) > 0, (what, ln)


def test_gluon_small_cvt_asm_compiles_for_sm90a(tmp_path):
    """GluonConfig.cvt_asm (session 61; the default since session 62): gluon_small over bf16 rows compiles for sm_90a
    without spills at cvt_asm 1 and 0, and its PTX converts V by mul.rn.bf16x2 at 1 only."""
    import os
    import subprocess
    import sys
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.path.join(root, "src")}
    env.pop("TRITON_INTERPRET", None)
    res = subprocess.run([sys.executable, os.path.join(root, "bench", "mla_gluon_check.py"), "--cases",
                          "prefill-bf16-16", "--configs", "64/2/8/0,64/2/8/1", "--dump", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 2 and all("spill_st=0 " in ln for ln in lines), res.stdout
    ptx = {c: (tmp_path / f"prefill-bf16-16_64_2_8_{c}.ptx").read_text() for c in (0, 1)}
    assert "mul.rn.bf16x2" not in ptx[0] and ptx[1].count("mul.rn.bf16x2") == 64
