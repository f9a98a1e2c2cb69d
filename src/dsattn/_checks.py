"""Argument checks shared by every public op.

Each check raises ValueError naming the argument, so bad input is rejected before a kernel runs or a
cache is touched.
"""
from __future__ import annotations

import functools
import numbers
import operator
from collections.abc import Sequence

import torch


@functools.lru_cache(maxsize=None)
def _as_device(device) -> torch.device:
    """torch.device(device), parsed once per distinct argument (check_tensor runs 34 times an eager glm-5 decode layer:
    bench/layer_host_cost.py --profile)."""
    return torch.device(device)


def check_tensor(
    name: str,
    t,
    *,
    dtype: torch.dtype | Sequence[torch.dtype] | None = None,
    ndim: int | Sequence[int] | None = None,
    shape: Sequence[int | None] | None = None,
    device: torch.device | str | None = None,
    last_dim_contiguous: bool = True,
) -> torch.Tensor:
    """Validate one tensor argument; `shape` entries of None are free."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if dtype is not None and (t.dtype != dtype if isinstance(dtype, torch.dtype) else t.dtype not in dtype):
        allowed = (dtype,) if isinstance(dtype, torch.dtype) else tuple(dtype)
        raise ValueError(f"{name} must have dtype {' or '.join(map(str, allowed))}, got {t.dtype}")
    if ndim is not None and (t.dim() != ndim if isinstance(ndim, int) else t.dim() not in ndim):
        allowed_nd = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        raise ValueError(f"{name} must have {' or '.join(map(str, allowed_nd))} dims, got shape {tuple(t.shape)}")
    if shape is not None:
        sizes = t.shape
        bad = len(sizes) != len(shape)
        if not bad:
            for s, d in zip(shape, sizes):
                if s is not None and s != d:
                    bad = True
                    break
        if bad:
            want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
            raise ValueError(f"{name} must have shape {want}, got {list(t.shape)}")
    if device is not None:
        want_device, have = _as_device(device), t.device
        if want_device.type != have.type or (want_device.index is not None and have != want_device):
            raise ValueError(f"{name} must be on {device}, got {have}")
    if last_dim_contiguous and t.dim() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{name} must have a contiguous last dimension, got strides {t.stride()}")
    return t


def check_same_device(**tensors) -> None:
    """All given tensors (None skipped) on one device."""
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        desc = ", ".join(f"{n} on {d}" for n, d in devices.items())
        raise ValueError(f"tensors must share one device: {desc}")


def check_positive(name: str, value, *, allow_zero: bool = False) -> None:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}")
    # `not >=` also rejects NaN, which every ordered comparison lets through.
    if not value >= 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value}")


FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
INDEX_DTYPES = (torch.int32, torch.int64)


def check_values(name: str, t: torch.Tensor, *, lo: int | None = None, hi: int | None = None) -> None:
    """Every element of `t` within [lo, hi] (a bound of None is open). Reads the values: for
    references and host-side checks, not for paths that must stay free of device syncs."""
    if t.numel() == 0:
        return
    if lo is not None and bool((t < lo).any()):
        raise ValueError(f"{name} must be >= {lo}, got min {t.min().item()}")
    if hi is not None and bool((t > hi).any()):
        raise ValueError(f"{name} must be <= {hi}, got max {t.max().item()}")


def check_int(name: str, value, *, lo: int | None = None) -> int:
    """An integer (Python, numpy or 0-dim integer tensor; not bool) >= lo, returned as int."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an int, got bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an int, got {type(value).__name__}") from None
    if lo is not None and value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return value
