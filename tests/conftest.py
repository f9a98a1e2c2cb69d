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
- ``DSATTN_GPU_DRYRUN=1`` with ``TRITON_INTERPRET=0`` (both set before pytest starts, on a machine without CUDA): a
  dry run of the GPU tests' own logic before device time is spent on them. Tests under ``tests/gpu/`` and marked
  ``gpu`` run instead of skipping, with their module's ``DEV`` set to "cpu", so the public ops fall back to their
  reference twins and the test's inputs, references, bounds and bookkeeping run at the test's real sizes. A test
  that needs what only a GPU has (a kernel launched directly, ``torch.cuda`` calls) ends skipped with the error named;
  every other failure is the test's own (or a bound the reference itself misses). Kernels are not checked by it:
  the reference is compared with itself wherever a public op falls back.
  ``DSATTN_GPU_DRYRUN=1 TRITON_INTERPRET=0 pytest tests/gpu/test_indexer_gpu.py -q -rs``
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
GPU_DRYRUN = os.environ.get("DSATTN_GPU_DRYRUN") == "1" and not torch.cuda.is_available()
# errors that mean "this needs a GPU", not "this test is wrong", in a dry run
_NEEDS_GPU = ("0 active drivers", "Torch not compiled with CUDA", "no NVIDIA driver", "CUDA driver", "CUDA device",
              "CUDA GPU", "requires CUDA", "dummy base class CUDAGraph")

needs_transformers = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                        reason="needs transformers (pip install -e .[test])")

_GPU_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu") + os.sep


def pytest_configure(config):
    if GPU_DRYRUN and KERNELS_INTERPRETED:
        raise pytest.UsageError("DSATTN_GPU_DRYRUN=1 needs TRITON_INTERPRET=0 set before pytest starts (the GPU "
                                "tests' sizes are far too large for the interpreter; the dry run takes the reference "
                                "fallbacks)")


@pytest.fixture(autouse=True)
def _seed(request):
    """torch.manual_seed from the test's node id (crc32: stable across runs and processes)."""
    seed = zlib.crc32(request.node.nodeid.encode())
    torch.manual_seed(seed)
    return seed


@pytest.fixture(autouse=True)
def _dryrun_device(request, monkeypatch):
    """In a GPU dry run, the test module's DEV is "cpu" (the GPU test files name their device so)."""
    if GPU_DRYRUN and request.module is not None and hasattr(request.module, "DEV"):
        monkeypatch.setattr(request.module, "DEV", "cpu")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if not GPU_DRYRUN or call.excinfo is None:
        return
    rep = outcome.get_result()
    text = str(call.excinfo.value)
    if rep.failed and any(s in text for s in _NEEDS_GPU):
        rep.outcome = "skipped"
        rep.longrepr = (str(item.path), item.location[1] or 0,
                        f"GPU dry run: needs a GPU ({call.excinfo.typename}: {text.splitlines()[0][:120]})")


def pytest_collection_modifyitems(config, items):
    if not KERNELS_INTERPRETED:
        skip = pytest.mark.skip(reason="runs the Triton kernels under the interpreter, but the kernel modules were "
                                       "not defined interpreted here (TRITON_INTERPRET was not 1 when pytest started)")
        for item in items:
            if item.get_closest_marker("interpreted") is not None:
                item.add_marker(skip)
    if torch.cuda.is_available() or GPU_DRYRUN:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") is not None or str(item.path).startswith(_GPU_DIR):
            item.add_marker(skip)
