"""A whole transformers DSA model served through DSAAttention with the GPU kernels: tests/test_transformers_model.py's
runs (every attention layer of a three-layer model replaced by the backend, requests batched continuously, poisoned
caches; GLM-5.3-Flash's shared layers with its k-pool indexer, not yet run on a GPU; speculative decodes with rejected
drafts rolled back; a prefix-cache hit) with the backend on CUDA; transformers' modules run on the CPU in fp32. A
kind whose module the installed transformers lacks (the GPU machine's is 5.17; the reference is 5.24) is skipped."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: the CPU test, _hf_engine

from conftest import needs_transformers  # noqa: E402

pytestmark = [pytest.mark.gpu, needs_transformers]
DEV = "cuda"

CASES = [  # kind, kpool, layout, block size, heads
    ("deepseek_v32", 1, "bf16", 8, 4),
    ("deepseek_v32", 1, "fp8_ds_mla", 16, 16),
    ("glm_moe_dsa", 1, "bf16", 5, 8),
    ("glm_moe_dsa", 1, "fp8_ds_mla", 64, 8),
    ("glm_moe_dsa", 1, "fp8_ds_mla", 16, 32),
    ("glm_moe_dsa", 1, "bf16", 16, 64),
    ("glm5_next", 4, "bf16", 16, 16),
    ("glm5_next", 4, "fp8_ds_mla_nope", 8, 8),
    ("glm5_next", 4, "fp8_ds_mla_nope", 64, 32),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-bs{c[3]}-h{c[4]}" for c in CASES])
def test_model_steps_match_transformers_on_gpu(case):
    pytest.importorskip(f"transformers.models.{case[0]}")
    from test_transformers_model import run_lockstep
    stats = run_lockstep(*case, device=DEV)
    assert stats["agree"] >= 0.8 * stats["rows"], stats


SHARED_KPOOL_CASES = [  # kind, kpool, layout, block size, heads: a shared layer between two full ones, k-pool indexer
    ("glm5_next", 4, "bf16", 16, 16),
    ("glm5_next", 4, "fp8_ds_mla_nope", 8, 8),
    ("glm5_next", 4, "fp8_ds_mla_nope", 64, 32),
]


@pytest.mark.parametrize("case", SHARED_KPOOL_CASES,
                         ids=[f"{c[0]}-{c[2]}-bs{c[3]}-h{c[4]}" for c in SHARED_KPOOL_CASES])
def test_shared_layers_with_kpool_match_transformers_on_gpu(case):
    pytest.importorskip(f"transformers.models.{case[0]}")
    from test_transformers_model import run_lockstep
    stats = run_lockstep(*case, device=DEV, shared=True)
    assert stats["agree"] >= 0.8 * stats["rows"], stats


@pytest.mark.parametrize("kind,kpool", [("deepseek_v32", 1), ("glm_moe_dsa", 1), ("glm5_next", 4)])
def test_greedy_generation_matches_transformers_on_gpu(kind, kpool):
    pytest.importorskip(f"transformers.models.{kind}")
    from test_transformers_model import run_generation
    run_generation(kind, kpool, device=DEV)


SPEC_CASES = [  # kind, kpool, layout, block size, heads
    ("deepseek_v32", 1, "fp8_ds_mla", 16, 16),
    ("glm_moe_dsa", 1, "bf16", 8, 32),
    ("glm5_next", 4, "fp8_ds_mla_nope", 8, 8),
    ("glm5_next", 4, "fp8_ds_mla_nope", 64, 32),
    ("glm5_next", 4, "bf16", 16, 64),
]


@pytest.mark.parametrize("case", SPEC_CASES, ids=[f"{c[0]}-{c[2]}-bs{c[3]}-h{c[4]}" for c in SPEC_CASES])
def test_speculative_rollbacks_match_transformers_on_gpu(case):
    pytest.importorskip(f"transformers.models.{case[0]}")
    from test_transformers_model import run_speculative
    run_speculative(*case, device=DEV)


PREFIX_CASES = [  # kind, kpool, layout, heads (block size 8)
    ("deepseek_v32", 1, "fp8_ds_mla", 16),
    ("glm_moe_dsa", 1, "bf16", 64),
    ("glm5_next", 4, "fp8_ds_mla_nope", 8),
    ("glm5_next", 4, "bf16", 32),
]


@pytest.mark.parametrize("case", PREFIX_CASES, ids=[f"{c[0]}-{c[2]}-h{c[3]}" for c in PREFIX_CASES])
def test_prefix_cache_hit_matches_transformers_on_gpu(case):
    pytest.importorskip(f"transformers.models.{case[0]}")
    from test_transformers_model import run_prefix
    run_prefix(*case, device=DEV)
