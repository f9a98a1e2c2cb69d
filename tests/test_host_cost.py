"""ops/_fastlaunch.py on the CPU: its argument classes are at least as fine as Triton 3.6's specialization
(native_specialize_impl), and its cached launches pick the compiled kernel Triton's own binding and key pick, with the
same arguments in the same order. Triton's driver and compiler are stood in for (no GPU): a fake driver reports an
sm_90 device, compiling makes a fake compiled kernel per Triton key whose launcher records what it was given."""
from __future__ import annotations

import itertools

import pytest
import torch

triton = pytest.importorskip("triton")

from triton._C.libtriton import native_specialize_impl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import CUDABackend  # noqa: E402
from triton.runtime.driver import driver  # noqa: E402
from triton.runtime.jit import JITFunction, compute_cache_key  # noqa: E402

from dsattn.ops import _fastlaunch  # noqa: E402
from dsattn.ops._fastlaunch import KernelPointer  # noqa: E402

BACKEND = CUDABackend(GPUTarget("cuda", 90, 32))
INTS = [0, 1, 2, 15, 16, 17, 32, 48, 1024, 2047, -1, -16, -17, 2**31 - 16, 2**31 - 1, -2**31, -2**31 - 1, 2**31,
        2**31 + 16, 2**32, 2**63 - 16, 2**63 - 1, 2**63, 2**64 - 16]


def _spec(v, specialize=True, align=True):
    return native_specialize_impl(BACKEND, v, False, specialize, align)


def test_int_classes_refine_triton():
    """Ints of one class get one Triton specialization, whatever the parameter's specialize / align flags."""
    by_class = {}
    for v in INTS + list(range(-40, 70)):
        by_class.setdefault(_fastlaunch._INT_CLASS[v], []).append(v)
    for vals in by_class.values():
        for sp, al in itertools.product((True, False), repeat=2):
            assert len({_spec(v, sp, al) for v in vals}) == 1, (vals, sp, al)


def test_other_classes_refine_triton():
    """Floats (any value), bools, None: one specialization each; a tensor's is its dtype and 16-byte alignment alone
    (not its shape, strides, offset past alignment or device), and a KernelPointer's is the tensor's."""
    assert len({_spec(v) for v in (0.0, 1.0, -2.5, 1e30, float("inf"), float("nan"))}) == 1
    assert len({_spec(v) for v in (True,)}) == 1 and _spec(True) == _spec(False)
    base = torch.zeros(4096, dtype=torch.uint8)
    for dt in (torch.bfloat16, torch.float32, torch.int32, torch.float8_e4m3fn):
        views = {}
        for off in (0, 16, 32, 4, 8, 48):
            t = base[off:off + 1024].view(dt)
            for x in (t, t.view(2, -1), t.view(-1, 2)[:, 0], t.view(2, -1)[:, :8]):
                aligned = x.data_ptr() % 16 == 0
                views.setdefault(aligned, set()).add(_spec(x))
                assert _spec(KernelPointer(x.data_ptr(), dt)) == _spec(x)
        assert all(len(s) == 1 for s in views.values()) and len(views) == 2


@pytest.fixture
def fake_triton(monkeypatch):
    """A fake sm_90 driver and a compile step that makes one recording fake kernel per Triton key."""
    launched = []

    class Compiled:
        def __init__(self, key):
            self.key = key
            self.function = id(self)
            self.packed_metadata = (4, 1, 0)

        def launch_metadata(self, grid, stream, *args):
            return None

        @property
        def run(self):
            def run(gx, gy, gz, stream, function, packed, metadata, enter, exit_, *args):
                launched.append((self, (gx, gy, gz), args))
            return run

    class FakeDriver:
        def __init__(self):
            self.get_current_device = lambda: 0
            self.get_current_stream = lambda device: 0

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

    def compile_(self, key, signature, device, constexprs, options, attrs, warmup):
        kernel = Compiled(key)
        self.device_caches[device][0][key] = kernel
        return kernel

    saved = driver._active
    driver.set_active(FakeDriver())
    monkeypatch.setattr(JITFunction, "_do_compile", compile_)
    monkeypatch.setattr(_fastlaunch, "ENABLED", True)
    _fastlaunch._SITES.clear()
    try:
        yield launched
    finally:
        driver._active = saved
        _fastlaunch._SITES.clear()


def _kernel_fn(x_ptr, y_ptr, n, stride, scale, flag, BLOCK: "tl.constexpr", MODE: "tl.constexpr" = 3):  # noqa: F821
    pass


def _triton_pick(kernel, args, kwargs):
    kw = dict(kwargs)
    kw["debug"] = kernel.debug or triton.knobs.runtime.debug
    kw["instrumentation_mode"] = triton.knobs.compilation.instrumentation_mode
    cache, key_cache, _, _, binder = kernel.device_caches[0]
    _, spec, opts = binder(*args, **kw)
    return cache[compute_cache_key(key_cache, spec, opts)]


def test_fast_launch_picks_tritons_kernel(fake_triton):
    import triton.language as tl
    _kernel_fn.__annotations__.update(BLOCK=tl.constexpr, MODE=tl.constexpr)
    kernel = JITFunction(_kernel_fn)
    buf = torch.zeros(1024, dtype=torch.uint8)
    x = buf[:256].view(torch.float32)
    calls = []
    for xo, n, stride, scale, flag, block, warps in itertools.product(
            (0, 4, 16), (1, 16, 17, 2**31 + 16), (1, 32), (0.5, 2.0), (True, False), (32, 64), (4, 8)):
        xx = buf[xo:xo + 256].view(torch.bfloat16)
        calls.append(((xx, x, n, stride, scale, flag), dict(BLOCK=block, num_warps=warps)))
    calls.append(((x, KernelPointer(x.data_ptr() + 16, torch.float32), 5, 7, 1.0, None), dict(BLOCK=16, MODE=1)))
    calls.append(((x, x, 5, 7, 1.0, None, 16), {}))
    for round_ in range(2):  # the first round fills the cache (misses and repeats), the second hits only
        for args, kwargs in calls:
            before = dict(_fastlaunch.STATS)
            fake_triton.clear()
            _fastlaunch.launch(kernel, (3, 2), *args, **kwargs)
            (compiled, grid, got), = fake_triton
            assert compiled is _triton_pick(kernel, args, kwargs)
            assert grid == (3, 2, 1)
            # every parameter in order, defaults filled in: what JITFunction.run hands the launcher
            bound = kernel.device_caches[0][4](*args, **kwargs)[0]
            assert got == tuple(bound.values())
            if round_:
                assert _fastlaunch.STATS["hit"] == before["hit"] + 1


def test_fast_launch_falls_back(fake_triton, monkeypatch):
    """Launch hooks, an uncovered argument type or ENABLED False: Triton's path, which still launches."""
    import triton.language as tl
    _kernel_fn.__annotations__.update(BLOCK=tl.constexpr, MODE=tl.constexpr)
    kernel = JITFunction(_kernel_fn)
    x = torch.zeros(64, dtype=torch.float32)
    args = (x, x, 5, 7, 1.0, True)
    _fastlaunch.launch(kernel, (1,), *args, BLOCK=16)
    slow = _fastlaunch.STATS["slow"]
    hook = triton.knobs.runtime.launch_enter_hook
    monkeypatch.setattr(triton.knobs.runtime, "launch_enter_hook", lambda metadata: None)
    fake_triton.clear()
    _fastlaunch.launch(kernel, (1,), *args, BLOCK=16)
    assert len(fake_triton) == 1 and _fastlaunch.STATS["slow"] == slow + 1
    monkeypatch.setattr(triton.knobs.runtime, "launch_enter_hook", hook)
    monkeypatch.setattr(_fastlaunch, "ENABLED", False)
    _fastlaunch.launch(kernel, (1,), *args, BLOCK=16)
    assert len(fake_triton) == 2 and _fastlaunch.STATS["slow"] == slow + 2
