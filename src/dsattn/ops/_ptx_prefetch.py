"""L2 prefetch-size hints on a Gluon kernel's cp.async copies, by rewriting its PTX at compile time.

PTX lets a cp.async ask L2 to fetch more than the 16 bytes it copies (`cp.async.cg.shared.global.L2::256B`: the
256-byte block around the address). FlashMLA's sparse prefill gathers with that hint (Nsight Compute,
bench/results/s65_ncu/: LDGSTS.E.BYPASS.LTC256B.128). Triton 3.6 has no way to ask for it: its copies carry cache
hints and eviction policies only. So a kernel asks for it with a marker (`tag(x, size)` returns x through an inline
PTX move whose text names the size), and a compile hook (Triton's knobs.runtime.add_stages_inspection_hook, installed
once by `install()`) rewrites every `cp.async.cg.shared.global [` of a PTX that holds the marker into the hinted form.
PTX without the marker passes untouched; a hook installed before ours is still called first.

The size must also reach the kernel as a constexpr (it does through `tag`'s argument), so that hinted and plain builds
never share a Triton cache entry. install() must run before the kernel first compiles: the modules that tag a kernel
call it at import.
"""
from __future__ import annotations

import re

SIZES = (0, 64, 128, 256)   # 0: no hint
_MARK = re.compile(r"dsattn-l2-prefetch-(64|128|256)B")
_COPY = re.compile(r"cp\.async\.cg\.shared\.global \[")


def rewrite(ptx: str) -> str:
    """ptx with every cp.async.cg global -> shared copy hinted as its marker asks; ptx itself without a marker."""
    m = _MARK.search(ptx)
    if m is None:
        return ptx
    return _COPY.sub(f"cp.async.cg.shared.global.L2::{m.group(1)}B [", ptx)


def install() -> bool:
    """Put the rewrite into Triton's NVIDIA compile pipeline (after its PTX stage); idempotent. False where Triton has
    no stage hook (then tagged kernels compile without the hint)."""
    try:
        from triton import knobs
    except Exception:  # pragma: no cover - a Triton without knobs
        return False
    prev = getattr(knobs.runtime, "add_stages_inspection_hook", None)
    if getattr(prev, "_dsattn_l2_prefetch", False):
        return True

    def hook(backend, stages, options, language, capability):
        if prev is not None:
            prev(backend, stages, options, language, capability)
        make_ptx = stages.get("ptx")
        if make_ptx is None:
            return

        def ptx_stage(src, metadata):
            return rewrite(make_ptx(src, metadata))

        stages["ptx"] = ptx_stage

    hook._dsattn_l2_prefetch = True
    knobs.runtime.add_stages_inspection_hook = hook
    return True


try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def tag(x, SIZE: gl.constexpr):
        """x (an int32 scalar), and, when SIZE is not 0, the marker that makes the hook hint this kernel's copies with
        L2::SIZE B. The move has side effects, so it is never removed."""
        if SIZE == 64:
            x = gl.inline_asm_elementwise("mov.b32 $0, $1; // dsattn-l2-prefetch-64B", "=r,r", [x],
                                          dtype=gl.int32, is_pure=False, pack=1)
        elif SIZE == 128:
            x = gl.inline_asm_elementwise("mov.b32 $0, $1; // dsattn-l2-prefetch-128B", "=r,r", [x],
                                          dtype=gl.int32, is_pure=False, pack=1)
        elif SIZE == 256:
            x = gl.inline_asm_elementwise("mov.b32 $0, $1; // dsattn-l2-prefetch-256B", "=r,r", [x],
                                          dtype=gl.int32, is_pure=False, pack=1)
        return x
except Exception:  # pragma: no cover - older triton without Gluon
    tag = None
