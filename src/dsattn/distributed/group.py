"""The tensor-parallel group as dsattn sees it: size, rank, and whether collectives can run on it.

Everything here is a thin reading of ``torch.distributed`` (NCCL on GPUs, gloo on CPUs); no transport
of its own. ``group=None`` means the default (world) group. Without an initialized process group the
size is 1 and the rank 0, so single-process code needs no special case.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist


def initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def group_size(group=None) -> int:
    """Ranks in the group (1 without an initialized process group)."""
    return dist.get_world_size(group) if initialized() else 1


def group_rank(group=None) -> int:
    """This process's rank in the group: 0 without a process group, -1 when not a member."""
    return dist.get_rank(group) if initialized() else 0


def backend_for(group, device_type: str) -> str | None:
    """The backend that runs collectives of `group` on tensors of `device_type` ('cuda', 'cpu'), or None.

    A group maps device types to backends as torch reports it ("cpu:gloo,cuda:nccl"). torch 2.13 reports a
    plain gloo group as "cpu:gloo,cuda:gloo" (CUDA tensors staged through the host), so such a group serves
    CUDA tensors too and the sharded path may run over it; a plain NCCL group serves CUDA tensors only. Without
    a per-device config (torch without ``get_backend_config``) a plain backend serves its native device only.
    """
    if not initialized():
        return None
    config = dist.get_backend_config(group) if hasattr(dist, "get_backend_config") else dist.get_backend(group)
    config = str(config).lower()
    if ":" not in config:
        native = {"nccl": "cuda", "gloo": "cpu", "xccl": "xpu"}.get(config)
        return config if native in (None, device_type) else None
    for item in config.split(","):
        dev, _, backend = item.partition(":")
        if dev.strip() == device_type:
            return backend.strip()
    return None


def usable_group(group=None, device: torch.device | str | None = None) -> bool:
    """True when collectives can run on `group` (initialized, this process a member) for tensors on
    `device` (any device when None)."""
    if not initialized() or group_rank(group) < 0:
        return False
    if device is None:
        return True
    return backend_for(group, torch.device(device).type) is not None


def init_from_env() -> tuple[bool, torch.device]:
    """Join the process group that ``torchrun`` describes in the environment, if any.

    Returns (whether this call initialized the group, the device this rank should use). On GPUs each
    rank takes ``cuda:LOCAL_RANK`` and NCCL; otherwise gloo on the CPU. NVLink multicast (NVLS) stays
    off unless the caller set ``NCCL_NVLS_ENABLE``: the lent multi-GPU machines require it.
    """
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if initialized() or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False, device
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    if cuda:
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")
    return True, device
