"""A cheaper host path for launching compiled Triton / Gluon kernels: ``launch(kernel, grid, *args, **kwargs)`` does
what ``kernel[grid](*args, **kwargs)`` does, skipping Triton's per-call binding and cache-key work when this call
site has launched the same specialization before.

Triton 3.6's ``JITFunction.run`` binds the arguments (a generated function calling ``native_specialize_impl`` per
argument), builds its cache key (``(tuple(specialization), str(options))``), looks the compiled kernel up, checks the
globals the kernel read, builds launch metadata (a LazyDict: Triton 3.6's launch hooks are HookChains, never None)
and calls the compiled kernel's C launcher, which calls the (empty) enter and exit hook chains. On the 2-core CPU
box with the C launcher stubbed (bench/host_overhead.py --stub), that was ~16-18 us a launch of the sparse MLA
kernels (binding ~8.5 us of it at 32 arguments), 7-14 us a launch of build_groups' small kernels.

Here the key is computed from the arguments directly, as a partition at least as fine as Triton's specialization
(so equal keys mean equal Triton keys; tests/test_host_cost.py checks the partition against ``native_specialize_impl``):

    torch.Tensor      (dtype, data_ptr % 16 == 0)            Triton: ('*<dtype>', 'D' or '')
    KernelPointer     the same (a pointer argument without a tensor, below)
    int (i32 range)   0 (v == 1), 1 (v % 16 == 0), 2 (else)  Triton: ('constexpr', 1) / ('i32', 'D' or '')
    int (else)        the value itself                       (i64 / u64 ranges: exact, so finer)
    bool              (bool, v)                              Triton: ('u1', None)
    float             one class                              Triton: ('fp32', None) whatever the value
    None              None                                   Triton: ('constexpr', None)
    constexpr params  (type, value)                          Triton: ('constexpr', value)

plus the keyword options (num_warps, num_stages, ...) by value, Triton's debug / instrumentation knobs and the
current device. Any other argument type, a kernel that is not a ``JITFunction`` (the interpreter's
``InterpretedFunction`` under ``TRITON_INTERPRET=1``), launch hooks (``knobs.runtime.launch_enter_hook`` /
``launch_exit_hook`` other than None or an empty HookChain, e.g. a profiler's) or pre-run hooks: Triton's own path,
every time. The fast path hands the launcher no metadata and no hooks (it calls none then), which is what the empty
chains amount to. A miss runs Triton's own path, which compiles or finds the kernel and launches it; the compiled
kernel it returns is then remembered under the key (at most MAX_ENTRIES a kernel, the table cleared when full). A hit
checks the globals the kernel read as Triton does, fetches the current stream and calls the compiled kernel's
launcher with the bound arguments (every parameter in order, defaults filled in), as ``JITFunction.run`` does.

DSATTN_FAST_LAUNCH (read at import): '1' (default) as above; '0' always Triton's path; 'check' the fast path plus, on
every hit, Triton's own binding and key, raising RuntimeError when Triton would pick another compiled kernel (a
validation mode for GPU runs; as slow as Triton's path).
"""
from __future__ import annotations

import functools
import operator
import os

try:
    import torch
    from triton import knobs
    from triton.knobs import HookChain
    from triton.runtime.driver import driver
    from triton.runtime.jit import JITFunction, compute_cache_key
except ImportError:  # pragma: no cover - triton is a test/kernels extra; nothing launches without it
    pass

MODES = ("1", "0", "check")
MODE = os.environ.get("DSATTN_FAST_LAUNCH", "1").strip().lower() or "1"
if MODE not in MODES:
    raise ValueError(f"DSATTN_FAST_LAUNCH must be one of {', '.join(MODES)}, got {MODE!r}")
ENABLED = MODE != "0"
MAX_ENTRIES = 256

_I32_LO, _I32_HI = -(1 << 31), (1 << 31) - 1


class KernelPointer:
    """A kernel's pointer argument without a tensor: what Triton reads from one (data_ptr() for the address and its
    16-byte specialization, dtype for the pointer type; the C launcher calls data_ptr() too). Creating one took
    ~0.35 us on the 2-core CPU box against ~2.8 us for a dtype view plus a column slice (sparse_mla/launch.py's
    _row_views took 7 us a fp8 decode call with views). CUDA launches only: the interpreter reads memory through
    real tensors. It keeps no storage alive: the caller holds the tensor it points into over the launch."""
    __slots__ = ("_ptr", "dtype")

    def __init__(self, ptr: int, dtype: torch.dtype):
        self._ptr = ptr
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self._ptr


_MISSING = object()
_SITES: dict = {}
STATS = {"hit": 0, "miss": 0, "slow": 0}  # counters (tests and the bench read them)
_DATA_PTR = operator.methodcaller("data_ptr")
_DTYPE = operator.attrgetter("dtype")
_NONE_TYPE = type(None)


class _IntClasses(dict):
    """int -> its class (module docstring), remembered (up to 65536 values)."""

    def __missing__(self, v):
        c = (0 if v == 1 else 1 if not v & 15 else 2) if _I32_LO <= v <= _I32_HI else (int, v)
        if len(self) < 65536:
            self[v] = c
        return c


_INT_CLASS = _IntClasses()


def _getter(positions):
    """A function returning the tuple of the items at `positions`."""
    if not positions:
        return lambda v: ()
    if len(positions) == 1:
        i = positions[0]
        return lambda v: (v[i],)
    return operator.itemgetter(*positions)


class _Site:
    """What the fast path keeps per kernel: which parameters are constexpr, names and defaults, how calls of a given
    form bind (plans: (positional count, keyword names) -> (bind, option names)), where the pointers and ints sit
    for a given tuple of argument types (shapes), and key -> (launcher, function, packed metadata)."""
    __slots__ = ("kernel", "const", "names", "defaults", "nparams", "table", "plans", "shapes")

    def __init__(self, kernel):
        self.kernel = kernel
        self.const = tuple(p.is_constexpr for p in kernel.params)
        self.names = tuple(p.name for p in kernel.params)
        self.defaults = tuple(p.default if p.has_default else _MISSING for p in kernel.params)
        self.nparams = len(kernel.params)
        self.table = {}
        self.plans = {}
        self.shapes = {}

    def plan(self, nargs: int, kwnames: tuple):
        """(bind(args, kwargs) -> every parameter's value in order, option names), or None when such a call does not
        bind (Triton's path then, which raises its own error)."""
        names = self.names
        if nargs > self.nparams or any(k in names[:nargs] for k in kwnames):
            return None
        tail = []
        for i in range(nargs, self.nparams):
            if names[i] in kwnames:
                tail.append((True, names[i]))
            elif self.defaults[i] is not _MISSING:
                tail.append((False, self.defaults[i]))
            else:
                return None
        opts = tuple(k for k in kwnames if k not in names)
        if all(from_kw for from_kw, _ in tail):
            get = _getter([n for _, n in tail])
            return (lambda args, kwargs: args + get(kwargs)), opts
        return (lambda args, kwargs: args + tuple(kwargs[x] if from_kw else x for from_kw, x in tail)), opts

    def shape(self, types: tuple):
        """(constexpr getter, pointer getter, int getter) for arguments of these types, or None when a
        non-constexpr argument has a type the partition does not cover."""
        cpos, ppos, ipos = [], [], []
        for i, (ty, const) in enumerate(zip(types, self.const)):
            if const:
                cpos.append(i)
            elif ty is torch.Tensor or ty is KernelPointer:
                ppos.append(i)
            elif ty is int:
                ipos.append(i)
            elif ty not in (float, bool, _NONE_TYPE):
                return None
        return _getter(cpos), _getter(ppos), _getter(ipos)


def _key(site: _Site, vals: tuple):
    """The classes of the arguments (module docstring) as one hashable key, or None for an argument type the
    partition does not cover. Types decide floats, bools and None (one Triton class each)."""
    types = tuple(map(type, vals))
    shape = site.shapes.get(types, _MISSING)
    if shape is _MISSING:
        shape = site.shapes[types] = site.shape(types)
    if shape is None:
        return None
    consts, ptrs, ints = shape
    p = ptrs(vals)
    addrs = tuple(map(_DATA_PTR, p))
    aligned = not functools.reduce(operator.or_, addrs, 0) & 15
    return (types, consts(vals), tuple(map(_DTYPE, p)), True if aligned else tuple(not a & 15 for a in addrs),
            tuple(map(_INT_CLASS.__getitem__, ints(vals))))


def _idle(hook) -> bool:
    """A launch hook that does nothing: None or an empty HookChain (Triton 3.6's default: knobs.runtime's enter / exit
    hooks are HookChains, which the C launcher calls with the launch metadata, each call looping over no hooks)."""
    return hook is None or (type(hook) is HookChain and not hook.calls)


def launch(kernel, grid, *args, **kwargs) -> None:
    """``kernel[grid](*args, **kwargs)``, through the cached launcher when this specialization ran before (module
    docstring). grid: a tuple of 1 to 3 ints."""
    if not ENABLED or not isinstance(kernel, JITFunction) or kernel.pre_run_hooks or callable(grid) \
            or not _idle(knobs.runtime.launch_enter_hook) or not _idle(knobs.runtime.launch_exit_hook):
        STATS["slow"] += 1
        kernel[grid](*args, **kwargs)
        return
    site = _SITES.get(id(kernel))  # (by id: JITFunction.__hash__ takes a lock; the site keeps the kernel alive)
    if site is None:
        site = _SITES[id(kernel)] = _Site(kernel)
    form = (len(args), tuple(kwargs))
    plan = site.plans.get(form, _MISSING)
    if plan is _MISSING:
        plan = site.plans[form] = site.plan(*form)
    key = None
    if plan is not None:
        bind, opt_names = plan
        vals = bind(args, kwargs)
        classes = _key(site, vals)
        if classes is not None:
            device = driver.active.get_current_device()
            debug = kwargs.get("debug", kernel.debug) or knobs.runtime.debug
            key = (device, classes, opt_names, tuple(kwargs[k] for k in opt_names), debug,
                   knobs.compilation.instrumentation_mode)
            hit = site.table.get(key)
            if hit is not None:
                run, function, packed = hit
                for (name, _), (val, globals_dict) in kernel.used_global_vals.items():
                    if globals_dict.get(name, _MISSING) != val:
                        key = None  # Triton's path raises its RuntimeError
                        break
                else:
                    if MODE == "check":
                        _check(kernel, args, kwargs, device, hit)
                    STATS["hit"] += 1
                    n = len(grid)
                    run(grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1,
                        driver.active.get_current_stream(device), function, packed, None, None, None, *vals)
                    return
    STATS["miss" if key is not None else "slow"] += 1
    compiled = kernel.run(*args, grid=grid, warmup=False, **kwargs)
    if key is None or compiled is None or not hasattr(compiled, "packed_metadata"):
        return
    if len(site.table) >= MAX_ENTRIES:
        site.table.clear()
    site.table[key] = (compiled.run, compiled.function, compiled.packed_metadata)


def _check(kernel, args, kwargs, device, hit) -> None:
    """DSATTN_FAST_LAUNCH=check: Triton's own binding and key must find the kernel the fast path launches."""
    kw = dict(kwargs)
    kw["debug"] = kw.get("debug", kernel.debug) or knobs.runtime.debug
    kw["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    kernel_cache, kernel_key_cache, _, _, binder = kernel.device_caches[device]
    _, specialization, options = binder(*args, **kw)
    compiled = kernel_cache.get(compute_cache_key(kernel_key_cache, specialization, options))
    if compiled is None or compiled.function != hit[1] or compiled.packed_metadata != hit[2]:
        raise RuntimeError(f"DSATTN_FAST_LAUNCH=check: {kernel.fn.__name__}: the fast path's kernel is not Triton's "
                           f"for specialization {specialization}")
