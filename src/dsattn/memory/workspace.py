"""The workspace (SPEC section 6): one device buffer that every per-step intermediate is a view of.

Consumers declare the buffers they need at once as ``{name: (shape, dtype)}``. Each consumer owns a
region of the buffer; a region is as large as the largest set of buffers the consumer ever declared.
A consumer lives either for the whole step (``phase=None``: metadata, the indices one layer hands to
the next) or in a named phase; consumers of different phases never run at the same time (all work is
ordered on one stream), so phases share bytes:

    [ step-long consumers, one after another ][ max over phases of (that phase's consumers) ]

Every view starts at a 256-byte aligned offset. Only ``reserve`` grows the buffer: before ``lock()`` a
reservation larger than a region frees and reallocates the buffer (views taken earlier are stale and the
contents are lost, so reserve at construction or in a profile step); after ``lock()`` it raises
``WorkspaceLockedError`` naming the consumer and the bytes. ``views`` never grows anything (a step that
grew the buffer half-way would lose its step-long data): buffers that do not fit their consumer's region
raise ``WorkspaceLockedError`` when locked, ValueError before. Taking a view touches the device allocator
only when the buffer does not exist yet (before ``allocate()``, or after a reserve that grew a region).
The views of a (consumer, specs) pair are made once and handed out again while the buffer stays (the
layers of a step ask for the same ones: an eager decode layer's stubbed host time, glm-5 TP8, 320-321 -> 271-274
us, bench/logs/s50/views_ab.log); each call returns its own dict of them.

Holders that share a workspace share its regions too: a step-long region written by one holder (a step's
metadata, say) is overwritten by the next holder that writes it. ``stamp`` records what a region holds now
(a step id); a holder checks ``stamp_of`` before it reads data an earlier call left there. Stamps are
dropped when the buffer is reallocated (its contents are lost then).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import torch

ALIGN = 256

BufferSpec = tuple[Sequence[int], torch.dtype]


class WorkspaceLockedError(RuntimeError):
    """A locked workspace was asked for more bytes than a consumer reserved.

    Attributes: ``consumer`` (its name), ``requested`` and ``reserved`` (bytes of its region).
    """

    def __init__(self, consumer: str, requested: int, reserved: int):
        self.consumer, self.requested, self.reserved = consumer, requested, reserved
        super().__init__(
            f"workspace is locked: consumer {consumer!r} needs {requested} bytes but {reserved} are reserved "
            f"for it; reserve the largest batch before lock() (at construction or in the profile step)")


_VIEW_CACHE_MAX = 256  # (consumer, specs) keys kept; a step's layers reuse a few dozen


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _nbytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    n = 1
    for s in shape:
        if int(s) < 0:
            raise ValueError(f"shape must have sizes >= 0, got {list(shape)}")
        n *= int(s)
    return n * dtype.itemsize


def specs_nbytes(specs: Mapping[str, BufferSpec]) -> int:
    """Bytes a set of buffers takes in one region (each starting 256-byte aligned)."""
    return sum(_align(_nbytes(shape, dtype)) for shape, dtype in specs.values())


@dataclasses.dataclass
class _Region:
    phase: str | None
    nbytes: int = 0
    offset: int = 0


class Workspace:
    """One device buffer, carved into per-consumer regions (see the module docstring).

    >>> ws = Workspace("cpu")
    >>> ws.reserve("indexer.logits", {"logits": ((4096, 8192), torch.float32)}, phase="indexer")
    >>> v = ws.views("indexer.logits", {"logits": ((100, 300), torch.float32)})["logits"]
    """

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self._regions: dict[str, _Region] = {}
        self._buffer: torch.Tensor | None = None
        self._locked = False
        self._stamps: dict[str, object] = {}
        # views handed out, by (consumer, specs), while the buffer stays: the layers of a step ask for the same ones
        self._view_cache: dict[tuple, dict[str, torch.Tensor]] = {}

    # -- declaring ------------------------------------------------------------------------------

    def reserve(self, consumer: str, specs: Mapping[str, BufferSpec], *, phase: str | None = None) -> None:
        """Declare that `consumer` may need all of `specs` at once (its region becomes at least that big).

        A consumer keeps the phase it was first declared with. Raises WorkspaceLockedError if locked and
        the region would grow.
        """
        self.reserve_bytes(consumer, specs_nbytes(specs), phase=phase)

    def reserve_bytes(self, consumer: str, nbytes: int, *, phase: str | None = None) -> None:
        """Like ``reserve``, for a consumer whose need is known as a byte bound (its views are laid out
        with ``specs_nbytes``, so a bound computed with it fits exactly)."""
        need = _align(int(nbytes))
        region = self._regions.get(consumer)
        if region is None:
            if self._locked:
                raise WorkspaceLockedError(consumer, need, 0)
            region = self._regions[consumer] = _Region(phase)
        elif region.phase != phase:
            raise ValueError(f"phase of consumer {consumer!r} is {region.phase!r}, got {phase!r}")
        if need > region.nbytes:
            if self._locked:
                raise WorkspaceLockedError(consumer, need, region.nbytes)
            region.nbytes = need
            self._buffer = None  # laid out again and reallocated on the next view
            self._stamps.clear()

    def allocate(self) -> None:
        """Take the device memory the reservations need now (else it happens at the first view)."""
        self._ensure_buffer()

    def lock(self) -> None:
        """No region may grow from now on (call after warm-up / the profile step)."""
        self._ensure_buffer()
        self._locked = True

    @property
    def locked(self) -> bool:
        return self._locked

    # -- using ----------------------------------------------------------------------------------

    def views(self, consumer: str, specs: Mapping[str, BufferSpec]) -> dict[str, torch.Tensor]:
        """Views of exactly the given shapes, laid out in `consumer`'s region in the order given.

        The views alias other phases' consumers. Buffers larger than the region raise (see the module
        docstring): WorkspaceLockedError when locked, ValueError before.
        """
        key = (consumer, tuple((name, tuple(shape), dtype) for name, (shape, dtype) in specs.items()))
        hit = self._view_cache.get(key)
        if hit is not None and self._buffer is not None:
            return dict(hit)
        need = specs_nbytes(specs)
        region = self._regions.get(consumer)
        have = region.nbytes if region is not None else 0
        if need > have or region is None:
            if self._locked:
                raise WorkspaceLockedError(consumer, need, have)
            raise ValueError(f"consumer {consumer!r} needs {need} bytes but {have} are reserved for it; "
                             f"reserve() it first")
        buf = self._ensure_buffer()
        off = self._regions[consumer].offset
        out = {}
        for name, (shape, dtype) in specs.items():
            n = _nbytes(shape, dtype)
            out[name] = buf.narrow(0, off, n).view(dtype).view(tuple(int(s) for s in shape))
            off += _align(n)
        if len(self._view_cache) >= _VIEW_CACHE_MAX:
            self._view_cache.clear()
        self._view_cache[key] = out
        return dict(out)

    def view(self, consumer: str, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """The one buffer of a single-buffer consumer (``views`` with one spec)."""
        return self.views(consumer, {"buf": (shape, dtype)})["buf"]

    def stamp(self, consumer: str, value: object) -> None:
        """Record what `consumer`'s region holds from now on (e.g. the id of the step that wrote it)."""
        if consumer not in self._regions:
            raise ValueError(f"consumer {consumer!r} has no region; reserve() it first")
        self._stamps[consumer] = value

    def stamp_of(self, consumer: str) -> object:
        """The last ``stamp`` of `consumer`'s region (None: none, or the buffer was reallocated since)."""
        return self._stamps.get(consumer)

    # -- accounting -----------------------------------------------------------------------------

    def _layout(self) -> int:
        """Assign region offsets; returns the total bytes."""
        off = 0
        for r in self._regions.values():
            if r.phase is None:
                r.offset, off = off, off + r.nbytes
        base, top = off, off
        phases: dict[str, int] = {}
        for r in self._regions.values():
            if r.phase is not None:
                r.offset = base + phases.get(r.phase, 0)
                phases[r.phase] = phases.get(r.phase, 0) + r.nbytes
                top = max(top, r.offset + r.nbytes)
        return top

    def _ensure_buffer(self) -> torch.Tensor:
        if self._buffer is None:
            self._view_cache.clear()  # views of the buffer before
            self._buffer = torch.empty(self._layout(), dtype=torch.uint8, device=self.device)
        return self._buffer

    @property
    def nbytes(self) -> int:
        """Bytes of the device buffer the current reservations need (what a profile step predicts)."""
        return self._layout()

    def report(self) -> list[dict]:
        """One row per consumer: name, phase ('step' for step-long), reserved bytes, offset."""
        self._layout()
        return [{"consumer": name, "phase": r.phase or "step", "bytes": r.nbytes, "offset": r.offset}
                for name, r in self._regions.items()]

    def format_report(self) -> str:
        rows = self.report()
        width = max([len(r["consumer"]) for r in rows] + [8])
        lines = [f"{'consumer':{width}s}  {'phase':9s} {'MiB':>10s}"]
        lines += [f"{r['consumer']:{width}s}  {r['phase']:9s} {r['bytes'] / 2**20:10.2f}" for r in rows]
        lines.append(f"{'total':{width}s}  {'':9s} {self.nbytes / 2**20:10.2f}")
        return "\n".join(lines)
