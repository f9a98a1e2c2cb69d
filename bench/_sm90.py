"""What the sm_90a compile-check tools share (bench/mla_compile_check.py, mla_gluon_check.py,
topk_compile_check.py): a stand-in for a kernel that compiles each launch for Hopper with Triton's bundled
toolchain on a machine without a GPU."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.runtime.jit import create_function_from_signature

TARGET = GPUTarget("cuda", 90, 32)
BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
PTXAS = os.path.join(BIN, "ptxas")


class Intercept:
    """Stands in for a (Gluon)JITFunction: kernel[grid](*args, **kw) compiles for TARGET instead of launching
    and calls record(fn, compiled, options). source: ASTSource, or GluonASTSource for Gluon kernels."""

    def __init__(self, fn, record, source=ASTSource):
        self.fn, self.record, self.source = fn, record, source

    def __getitem__(self, grid):
        def call(*args, **kwargs):
            backend = make_backend(TARGET)
            binder = create_function_from_signature(self.fn.signature, self.fn.params, backend)
            bound, spec, options = binder(*args, **kwargs)
            options, signature, constexprs, attrs = self.fn._pack_args(backend, kwargs, bound, spec, options)
            compiled = triton.compile(self.source(self.fn, signature, constexprs, attrs), target=TARGET,
                                      options=options.__dict__)
            self.record(self.fn, compiled, options)
        return call


def ptxas_report(ptx: str) -> str:
    """ptxas -v of one PTX for sm_90a: 'regs=N spill_st=B', with ' WGMMA_SERIALIZED' when ptxas says it
    serialized the wgmma instructions, or 'ptxas FAILED ...'."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        res = subprocess.run([PTXAS, "-v", "--gpu-name", "sm_90a", path, "-o", os.path.join(d, "k.cubin")],
                             capture_output=True, text=True)
    text = res.stdout + res.stderr
    regs = re.search(r"Used (\d+) registers", text)
    spill = re.search(r"(\d+) bytes spill stores", text)
    if res.returncode:
        return "ptxas FAILED " + text[-400:]
    report = f"regs={regs.group(1) if regs else '?'} spill_st={spill.group(1) if spill else '?'}"
    return report + " WGMMA_SERIALIZED" if "serialized" in text else report
