"""The GPU test files stay runnable: their own logic, dry on the CPU (tests/conftest.py, DSATTN_GPU_DRYRUN).

The GPU tests run only where a device is lent, so a change of an API, a helper or a reference that breaks one of them
would otherwise first show as a failed device call. Here each file runs in a child pytest with DSATTN_GPU_DRYRUN=1 and
TRITON_INTERPRET=0: the tests that need no GPU run on the public ops' reference fallbacks at their real sizes (their
inputs, references, bounds and bookkeeping; no kernel is checked), the rest end skipped naming what they need, and
every file must at least collect. The backend file's dry run takes ~10 min on a 2-core machine (its 32 tests that
need no GPU ~6 min), so only the ones in BACKEND_TESTS run here. Session 55, 2-core CPU: the other files 205 s, the
backend subset 127 s (the whole file: DSATTN_GPU_DRYRUN=1 TRITON_INTERPRET=0 pytest tests/gpu/test_backend_gpu.py).
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKEND = "tests/gpu/test_backend_gpu.py"
BACKEND_TESTS = [BACKEND + "::" + t for t in (  # a fp8 gathered and a bf16 prefill step, five random steps, rollbacks
    "test_step_matches_reference[deepseek-v3.2-fp8_ds_mla-128-fp8_gathered]",
    "test_step_matches_reference[glm-5-bf16-8-bf16_prefill]",
    *(f"test_random_step[{seed}]" for seed in (0, 5, 9, 13, 14)),
    "test_rejected_speculative_tokens_roll_back")]


def _dry(args: list[str], timeout: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, DSATTN_GPU_DRYRUN="1", TRITON_INTERPRET="0")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine runs the GPU tests themselves")
@pytest.mark.parametrize("part", ["files", "backend"])
def test_gpu_tests_dry_run(part):
    if part == "files":
        files = sorted(os.path.relpath(f, ROOT) for f in glob.glob(os.path.join(ROOT, "tests", "gpu", "test_*.py")))
        res = _dry([f for f in files if f != BACKEND], timeout=1800)
    else:
        res = _dry(BACKEND_TESTS, timeout=1800)
    tail = res.stdout[-6000:] + res.stderr[-2000:]
    assert res.returncode == 0, tail
    assert " passed" in res.stdout.splitlines()[-1], tail  # something ran on the fallbacks, not only skips
