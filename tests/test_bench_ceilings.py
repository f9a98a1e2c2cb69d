"""bench.common.ceilings: which ceilings the kernel tables' floors divide by (the H200's from BENCHMARKS.md on an
H200, measured on any other GPU), checked on the CPU with the device name and the measurement stubbed."""
import pytest
import torch

from dsattn.bench import common


@pytest.fixture
def gpu(monkeypatch):
    """Pretend a CUDA device of the given name; measure_ceilings returns fixed values and counts its calls."""
    calls = []

    def use(name):
        monkeypatch.setattr(common, "_CEILINGS", None)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: name)
        monkeypatch.setattr(common, "measure_ceilings",
                            lambda: calls.append(1) or {"hbm_bytes_per_s": 3.0e12, "bf16_flops": 600e12,
                                                        "fp8_flops": 1100e12})
        return calls
    monkeypatch.delenv("DSATTN_CEILINGS", raising=False)
    return use


def test_h200_takes_benchmarks_md(gpu):
    calls = gpu("NVIDIA H200")
    c = common.ceilings()
    assert (c["hbm_bytes_per_s"], c["bf16_flops"], c["fp8_flops"]) == (4.27e12, 680e12, 1245e12)
    assert "H200" in c["source"] and not calls


def test_other_gpu_measures_once(gpu):
    calls = gpu("NVIDIA H100 80GB HBM3")
    c = common.ceilings()
    assert (c["hbm_bytes_per_s"], c["bf16_flops"], c["fp8_flops"]) == (3.0e12, 600e12, 1100e12)
    assert "H100" in c["source"] and "measured" in c["source"]
    common.ceilings()
    assert len(calls) == 1  # once a process


@pytest.mark.parametrize("mode, name, measured", [("measure", "NVIDIA H200", True),
                                                  ("h200", "NVIDIA H100 80GB HBM3", False)])
def test_env_overrides(gpu, monkeypatch, mode, name, measured):
    calls = gpu(name)
    monkeypatch.setenv("DSATTN_CEILINGS", mode)
    c = common.ceilings()
    assert bool(calls) == measured
    assert c["hbm_bytes_per_s"] == (3.0e12 if measured else 4.27e12)


def test_env_rejects_other_values(gpu, monkeypatch):
    gpu("NVIDIA H200")
    monkeypatch.setenv("DSATTN_CEILINGS", "h100")
    with pytest.raises(ValueError, match="DSATTN_CEILINGS"):
        common.ceilings()


def test_cpu_takes_h200(monkeypatch):
    monkeypatch.setattr(common, "_CEILINGS", None)
    monkeypatch.delenv("DSATTN_CEILINGS", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert common.ceilings()["hbm_bytes_per_s"] == 4.27e12
