"""What every Triton kernel of dsattn shares: whether Triton is importable, whether kernels run under
the interpreter (``TRITON_INTERPRET=1``, the CPU tests), and a matrix-product helper that stays right
there.

Triton 3.6's interpreter multiplies the raw bits of bf16 operands in ``tl.dot`` (triton-lang/triton
#11584); fp16, fp8 and fp32 dots are right. Kernels call ``mma`` instead of ``tl.dot`` so that bf16
operands are upcast to fp32 under the interpreter and stay bf16 on the GPU.
"""
from __future__ import annotations

import os

try:
    import triton
    import triton.language as tl
    HAVE_TRITON = True
except ImportError:  # pragma: no cover - triton is a test/kernels extra
    triton = None
    tl = None
    HAVE_TRITON = False


def interpreting() -> bool:
    """True when Triton kernels run under the CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def kernels_available(device: "torch.device | str") -> bool:  # noqa: F821
    """Whether Triton kernels can run for tensors on `device` (a CUDA GPU, or the interpreter on CPU)."""
    import torch
    if not HAVE_TRITON:
        return False
    dev = torch.device(device)
    return dev.type == "cuda" or (dev.type == "cpu" and interpreting())


def next_pow2(n: int) -> int:
    """triton.next_power_of_2 for launch code (the same values: 0 for 0, else the least power of two >= n) at ~40 ns a
    call instead of ~2.5 us: Triton's is a ConstexprFunction whose call unwraps every argument (timeit, the 2-core CPU
    box, session 38); the sparse MLA combine, the k-pool, logits and cache-write launches each took one a call."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


_SM_COUNTS: dict = {}


def sm_count(device: "torch.device", default: int) -> int:  # noqa: F821
    """Streaming multiprocessors of a CUDA device (cached per device), or `default` for any other device
    (the interpreter: each launcher picks what keeps its interpreted grids small or realistic)."""
    import torch
    if device.type != "cuda":
        return default
    i = device.index if device.index is not None else torch.cuda.current_device()
    if i not in _SM_COUNTS:
        _SM_COUNTS[i] = torch.cuda.get_device_properties(i).multi_processor_count
    return _SM_COUNTS[i]


if HAVE_TRITON:
    INTERPRET = tl.constexpr(interpreting())

    @triton.jit
    def mma(a, b, acc):
        """acc + a @ b, fp32 accumulation (tl.dot), exact under the interpreter too."""
        if INTERPRET:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
        else:
            return tl.dot(a, b, acc)


def allow_runtime_loop_bounds() -> None:
    """Let interpreted kernels loop to a runtime scalar (``for i in range(n)`` with n a tensor).

    The interpreter holds a scalar as a one-element numpy array and turns it into a loop bound with
    ``int(array)``, which numpy >= 2.3 refuses for arrays with a dimension. This wraps the interpreter's
    tensor patching so the bound is read as the array's single element. Compiled kernels are untouched;
    call it in a test module that runs kernels under ``TRITON_INTERPRET=1``. Idempotent.
    """
    if not HAVE_TRITON:
        return
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "_dsattn_scalar_index", False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._dsattn_scalar_index = True
    interpreter._patch_lang_tensor = patched
