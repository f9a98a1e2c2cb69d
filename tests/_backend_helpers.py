"""Shared by the backend tests (tests/test_backend*.py)."""
import importlib
import pkgutil

import dsattn.ops


def import_all_ops() -> None:
    """Import every module of ``dsattn.ops`` now, at collection.

    Triton decorates a kernel for the interpreter only if TRITON_INTERPRET=1 when its module is imported
    (conftest sets it on CPU machines before collection). A test module that switches the ops to their
    reference twins (TRITON_INTERPRET=0 with monkeypatch) must not be the first to import a kernel module,
    or later interpreted tests in the same process would get kernels built for a GPU.
    """
    for m in pkgutil.walk_packages(dsattn.ops.__path__, "dsattn.ops."):
        importlib.import_module(m.name)
