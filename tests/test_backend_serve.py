"""``dsattn bench serve`` end to end on the CPU at scaled-down shapes (--tiny): every path runs a mixed step
through the backend and the results file holds a row per step with its time and workspace bytes."""
import json

from _backend_helpers import import_all_ops

from dsattn.bench import serve

import_all_ops()  # at collection: the test below runs the reference twins (interpreted steps take seconds)


def test_bench_serve_tiny(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    configs = ["glm-5:8:fp8_ds_mla", "glm-5:2:fp8_ds_mla", "glm-5.3-flash:8:bf16"]
    assert serve.main(["--tiny", "--quick", "--configs", *configs, "--rep-ms", "1", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "serve.json").read_text())
    rows = data["rows"]
    assert [(r["preset"], r["tp"], r["path"]) for r in rows] == [
        ("glm-5", 8, "fp8_mixed"), ("glm-5", 2, "fp8_gathered"), ("glm-5.3-flash", 8, "bf16_prefill")]
    for r in rows:
        assert r["scenario"] == "mixed" and r["tokens"] == 15 and r["step_ms"] > 0 and r["layer_ms"] > 0
        assert r["prepare_ms"] > 0 and r["prepare_batch_ms"] > 0
        total = r["workspace_MiB"] * 2**20  # step-long consumers plus the largest phase
        assert max(r["workspace"].values()) < total < sum(r["workspace"].values())
    assert "attention.gathered_context" in rows[1]["workspace"]
    assert "results ->" in capsys.readouterr().out


def test_bench_serve_needs_a_gpu_without_tiny(capsys):
    assert serve.main(["--device", "cpu"]) == 2
    assert serve.main(["--tiny", "--graph", "--device", "cpu"]) == 2
    assert "--graph needs a CUDA GPU" in capsys.readouterr().out


def test_bench_serve_scenarios(tmp_path, monkeypatch):
    """--scenarios picks the steps (long: a chunk after a long context, not in the default run); an unknown name is
    an argument error."""
    import pytest
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert serve.main(["--tiny", "--scenarios", "long", "--configs", "glm-5:8:fp8_ds_mla", "--rep-ms", "1",
                       "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "serve.json").read_text())["rows"]
    assert [(r["scenario"], r["tokens"], r["context_tokens"]) for r in rows] == [("long", 16, 128)]
    assert serve.DEFAULT_SCENARIOS == ("decode", "mixed", "prefill")
    with pytest.raises(SystemExit):
        serve.main(["--tiny", "--scenarios", "nope"])
