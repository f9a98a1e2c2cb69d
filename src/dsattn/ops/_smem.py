"""Shared-memory words by inline PTX, for Gluon kernels that address their dynamic shared memory as raw 32-bit
words from `global_smem` (sparse_mla.grouping_smem's union kernels, topk.gluon_select): Triton and Gluon have no
shared-memory atomics or word-addressed loads and stores. Such a kernel runs no Triton operation that uses shared
memory (its scans and sums stay within a warp) and allocates one buffer of its words' size, written only after a
barrier that follows every raw access, so nothing of Triton's own shares those bytes. Offsets are in bytes.
Each helper is elementwise over its arguments' shape; with scalar arguments it returns a scalar."""
from __future__ import annotations

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    HAVE_GLUON = True
except Exception:  # pragma: no cover - a Triton without Gluon
    HAVE_GLUON = False

if HAVE_GLUON:
    @gluon.jit
    def sts(off, val):
        """st.shared.b32 [global_smem + off], val (the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a; mov.u32 a, global_smem; add.u32 a, a, $1; st.shared.b32 [a], $2; mov.u32 $0, 0; }",
            "=r,r,r", [off, val], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def sts_if(off, val, ok):
        """st.shared.b32 [global_smem + off], val where ok != 0 (the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a; .reg .pred p; setp.ne.u32 p, $3, 0; mov.u32 a, global_smem; add.u32 a, a, $1; "
            "@p st.shared.b32 [a], $2; mov.u32 $0, 0; }",
            "=r,r,r,r", [off, val, ok], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def lds(off):
        """ld.shared.b32 [global_smem + off] (not pure, so it stays after the barrier before it)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a; mov.u32 a, global_smem; add.u32 a, a, $1; ld.shared.b32 $0, [a]; }",
            "=r,r", [off], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def add(a, b):
        """The combine function of sums and scans."""
        return a + b
