"""bench/indexer_recall.py: the Hadamard matrix its --rotate uses is orthonormal (so rotating q and k leaves every
exact logit as it was and changes only what fp8 quantization loses), and a small run lists a recall above 0.5 for
each key kind and quantized operand, rotated or not."""
import importlib.util
import os

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("indexer_recall", os.path.join(HERE, "..", "bench", "indexer_recall.py"))
indexer_recall = importlib.util.module_from_spec(spec)
spec.loader.exec_module(indexer_recall)


def test_hadamard_is_orthonormal_and_keeps_logits():
    h = indexer_recall.hadamard()
    assert h.shape == (128, 128)
    assert torch.equal(h.abs(), torch.full((128, 128), 128 ** -0.5))
    torch.testing.assert_close(h @ h.T, torch.eye(128), atol=1e-6, rtol=0)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(3, 4, 128, generator=g), torch.randn(50, 128, generator=g)
    w = torch.randn(3, 4, generator=g)
    torch.testing.assert_close(indexer_recall._logits(q @ h, w, k @ h), indexer_recall._logits(q, w, k),
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rotate", [False, True])
def test_small_run(rotate):
    table = indexer_recall.run(rows=2, ctx=4096, seed=0, weights="signed", rotate=rotate)
    assert list(table) == ["iid", "heavy", "outlier"]
    for rec in table.values():
        for col in ("fp8 q + fp8 k", "bf16 q + fp8 k", "fp32 q + fp8 k", "fp8 q + fp32 k"):
            assert 0.5 < rec[col] <= 1.0
