"""``dsattn calibrate``: the table built from measured rows, and a tiny functional run of the command on the
CPU (kernels under TRITON_INTERPRET=1; the timings mean nothing here, the file's shape does)."""
import json

import pytest

pytest.importorskip("triton")

from dsattn.backend import calibrate
from dsattn.backend.policy import choose_variant, load_table
from dsattn.ops._triton import allow_runtime_loop_bounds

allow_runtime_loop_bounds()


def test_table_from_rows():
    rows = []
    for tokens, (native, pad) in {64: (2.0, 1.0), 128: (2.0, 1.5), 256: (1.0, 1.5), 512: (2.0, 3.0)}.items():
        rows += [{"kernel": "decode/fp8_ds_mla", "heads": 8, "tokens": tokens, "variant": "native", "ms": native},
                 {"kernel": "decode/fp8_ds_mla", "heads": 8, "tokens": tokens, "variant": "pad64", "ms": pad}]
    table = {"table": calibrate.table_from_rows(rows)}
    assert table["table"] == {"decode/fp8_ds_mla": {"8": [{"max_tokens": 181, "variant": "pad64"},
                                                          {"max_tokens": None, "variant": "native"}]}}
    assert [choose_variant("decode", 8, t, table, layout="fp8_ds_mla") for t in (1, 181, 182, 10**5)] == \
        ["pad64", "pad64", "native", "native"]


@pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)
@pytest.mark.parametrize("extra, kernel", [([], "decode/fp8_ds_mla_nope"), (["--graph"], "decode/fp8_ds_mla_nope"),
                                           ([], "decode/bf16")])  # without CUDA, --graph times the calls themselves
def test_calibrate_command_writes_a_table(tmp_path, monkeypatch, extra, kernel):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "cal.json"
    assert calibrate.main(["--kernels", kernel, "--tokens", "2", "3", "--heads", "8",
                           "--slots", "256", "--block-size", "16", "--topk", "16", "--rep-ms", "1",
                           "--device", "cpu", "--out", str(out), *extra]) == 0
    data = json.loads(out.read_text())
    assert data["meta"]["graph"] == bool(extra)
    assert {"provenance", "sm_count", "meta", "table", "rows"} <= set(data)
    assert len(data["rows"]) == 4 and {r["variant"] for r in data["rows"]} == {"native", "pad64"}
    buckets = load_table(out)["table"][kernel]["8"]
    assert buckets[-1]["max_tokens"] is None and all(b["variant"] in ("native", "pad64") for b in buckets)


def test_calibrate_needs_a_device(monkeypatch, capsys):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert calibrate.main(["--device", "cpu"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out
