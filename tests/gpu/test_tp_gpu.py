"""Tensor-parallel indexer prefill on GPUs: ``dsattn bench tp`` at small sizes, checking its equality flags.

One GPU: TP = 1 (the fallback, and the projected slices). Two or more: the bench under torchrun with
NCCL, sharded indices against the replicated ones and both row exchanges into poisoned rows. Skips
without a GPU.
"""
import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


def test_bench_tp1(tmp_path):
    from dsattn.bench import tp
    # a generous budget: the bench skips cases predicted to run past it (one was, with other GPU tests
    # running beside it)
    assert tp.main(["--contexts", "4K,16K", "--rows", "0", "--reps", "1", "--project", "2", "--budget-s", "600",
                    "--out", str(tmp_path), "--name", "tp1"]) == 0
    rows = json.load(open(tmp_path / "tp1.json"))["rows"]
    assert [(r["mode"], r.get("plan")) for r in rows] == [("replicated", None), ("projected", "keys"),
                                                           ("projected", "model")] * 4
    assert all(r["equal"] for r in rows)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_bench_nccl(tmp_path):
    n = min(4, torch.cuda.device_count())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n), "-m", "dsattn.cli", "bench",
           "tp", "--contexts", "8K,24K", "--rows", "0", "--reps", "1", "--min-rows-per-rank", "3000",
           "--out", str(tmp_path), "--name", "tp_nccl"]
    subprocess.run(cmd, env=env, check=True, timeout=600)
    res = json.load(open(tmp_path / "tp_nccl.json"))
    assert res["meta"]["backend"] == "nccl"
    assert res["meta"]["nccl_nvls_enable"] == os.environ.get("NCCL_NVLS_ENABLE", "0")
    for r in res["rows"]:
        assert r["equal"] is True, r
        assert r["mode"] == ("sharded" if r["rows"] >= 3000 * n else "replicated"), r
        if r["mode"] == "sharded":
            assert r["gather_equal"] is True, r
            assert r["plan"] in ("keys", "model") and len(r["boundaries"]) == n + 1, r
