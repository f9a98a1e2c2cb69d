"""DSAAttention with the GPU kernels against transformers' DSA layers over a serving sequence: tests/
test_transformers_backend.py's sequence (prefill chunks, a mixed step, speculative and plain decodes, poisoned caches,
shared layers) with the backend on CUDA. transformers' modules run on the CPU in fp32. A kind whose module the
installed transformers lacks (the GPU machine's is 5.17; the reference is 5.24) is skipped."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: _hf_models, the CPU test

from conftest import needs_transformers  # noqa: E402

pytestmark = [pytest.mark.gpu, needs_transformers]
DEV = "cuda"

CASES = [  # kind, kpool, topk, heads, layout, block size, shared
    ("deepseek_v32", 1, 8, 4, "bf16", 5, False),
    ("deepseek_v32", 1, 8, 16, "fp8_ds_mla", 64, False),
    ("glm_moe_dsa", 1, 8, 32, "fp8_ds_mla", 16, False),
    ("glm_moe_dsa", 1, 8, 8, "bf16", 16, True),
    ("glm_moe_dsa", 1, 8, 8, "fp8_ds_mla", 64, True),
    ("glm5_next", 4, 8, 8, "fp8_ds_mla_nope", 8, False),
    ("glm5_next", 4, 8, 64, "fp8_ds_mla_nope", 16, False),
    ("glm5_next", 4, 8, 16, "bf16", 64, False),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-h{c[3]}-{c[4]}-bs{c[5]}" + ("-shared" if c[6] else "")
                                             for c in CASES])
def test_backend_steps_match_transformers_on_gpu(case):
    pytest.importorskip(f"transformers.models.{case[0]}")
    from test_transformers_backend import run_sequence
    run_sequence(*case, device=DEV)
