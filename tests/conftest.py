"""Shared test setup: a fresh, reproducible RNG per test, and skips for what a machine may lack.

- Every test starts with ``torch.manual_seed`` derived from its node id, so inputs differ between
  tests, do not depend on test order, and a failing test reproduces when run alone.
- ``@pytest.mark.gpu`` tests, and every test under ``tests/gpu/``, skip without CUDA.
- ``needs_transformers`` is a skip mark: ``from conftest import needs_transformers``.
- Without CUDA, ``TRITON_INTERPRET=1`` is set here, before any test module is imported: Triton reads it
  when a kernel module is imported (``ops/_triton.py`` fixes its bf16-dot workaround then), so setting it
  later in one test module would depend on collection order. Tests that want the reference fallback
  set it to "0" with monkeypatch (dispatch reads it at call time).
- ``@pytest.mark.interpreted`` (or a module's ``pytestmark``): the test runs the Triton kernels on CPU tensors under
  the interpreter, through public ops that fall back to their reference twins where kernels cannot run. Where the
  kernel modules were not defined interpreted (a CUDA machine, or ``TRITON_INTERPRET=0`` set before pytest started)
  such a test would compare the reference with itself and pass; it is skipped there instead, saying why.
"""
from __future__ import annotations

import importlib.util
import os
import zlib

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
KERNELS_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"  # as the kernel modules will see it at import

needs_transformers = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                        reason="needs transformers (pip install -e .[test])")

_GPU_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu") + os.sep


@pytest.fixture(autouse=True)
def _seed(request):
    """torch.manual_seed from the test's node id (crc32: stable across runs and processes)."""
    seed = zlib.crc32(request.node.nodeid.encode())
    torch.manual_seed(seed)
    return seed


def pytest_collection_modifyitems(config, items):
    if not KERNELS_INTERPRETED:
        skip = pytest.mark.skip(reason="runs the Triton kernels under the interpreter, but the kernel modules were "
                                       "not defined interpreted here (TRITON_INTERPRET was not 1 when pytest started)")
        for item in items:
            if item.get_closest_marker("interpreted") is not None:
                item.add_marker(skip)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None or str(item.path).startswith(_GPU_DIR):
            item.add_marker(skip)
