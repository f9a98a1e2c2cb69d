"""DSATTN_SPARSE_MLA_IMPL and the choice between the Triton and the Gluon sparse MLA kernels (CPU only:
the Gluon kernel itself runs in tests/gpu/test_sparse_mla_gpu.py and compiles in bench/mla_gluon_check.py)."""
import pytest
import torch

from dsattn.formats import KVLayout
from dsattn.ops.sparse_mla import launch, sparse_mla_prefill
from dsattn.ops.sparse_mla.testing import check_close, make_case, poisoned_outputs


@pytest.mark.parametrize("value, expected", [(None, "auto"), ("", "auto"), ("auto", "auto"), ("Triton", "triton"),
                                             (" gluon ", "gluon")])
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


def test_gluon_never_chosen_off_gpu():
    q = torch.zeros(2, 8, 576, dtype=torch.bfloat16)
    flat = torch.zeros(16, 576, dtype=torch.bfloat16)
    assert not launch.gluon_usable(q, flat, KVLayout.BF16, 16)
    assert not launch.use_gluon(q, flat, KVLayout.BF16, 16, "auto")
    assert not launch.use_gluon(q, flat, KVLayout.BF16, 16, "triton")
    assert launch.kernel_name(q, flat, KVLayout.BF16, "native") == "triton"
    with pytest.raises(ValueError, match="DSATTN_SPARSE_MLA_IMPL=gluon"):
        launch.use_gluon(q, flat, KVLayout.BF16, 16, "gluon")


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
    # auto prefers Gluon over fp8 rows always, over bf16 rows only for 32-head programs
    assert launch.gluon_preferred(layout, hp) == (layout.is_fp8 or hp == 32)


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
