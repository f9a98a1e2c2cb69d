"""Every default Gluon sparse MLA build that 'auto' launches on sm_90 compiles for sm_90a on this machine (no GPU;
bench/mla_gluon_check.py, Triton's bundled ptxas) with the properties its measured speed rests on, so that a change
made on a CPU machine cannot quietly lose them:
- the build compiles, ptxas does not serialize its wgmma (C7513 / C7514: every wgmma of the kernel then waits for the
  one before), and its shared memory fits one CTA on sm_90;
- spills stay at what the committed defaults compile to today (none, or 4 bytes in gluon_rx's 16-head producer, in
  its 32-head ping-pong builds' prologue and in gluon64; session 54's compile check and session 59's,
  notes/sparse_mla.md);
- gluon_rx's 16-head programs keep two CTAs an SM (rx_config's launch cap of 128 registers, and twice the shared
  memory within the SM's 228 KB), the reason they are the default there (session 19, 2.8-6.0% faster).
Which kernel takes which case is checked against launch's own preference rules. About 40 s of compiles.

tests/gpu/ runs these kernels against their references; this file only compiles them."""

import os
import re
import subprocess
import sys

import pytest

from dsattn.formats import KVLayout
from dsattn.ops.sparse_mla import dispatch, launch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SM_SHARED = 233472  # bytes of shared memory an sm_90 SM has (228 KB), of which one CTA may take launch.SMEM_LIMIT
CTA_RESERVED = 1024  # bytes the hardware keeps per resident CTA

# kernel, cases (mla_gluon_check's names: decode-<fp8|nope>-H, prefill-<bf16|bf16n>-H), the spill bytes allowed
DEFAULT_BUILDS = [
    ("rx", "decode-fp8-8,decode-nope-8,decode-nope-16", 0),
    ("rx", "decode-fp8-16", 4),          # 4 B in the producer partition (24 / 48 registers)
    ("rx", "decode-fp8-32,decode-nope-32", 4),   # ping-pong at 32-head programs (session 59): 4 B before the partitions
    ("g64", "decode-fp8-64,decode-nope-64", 4),
    ("prefill", "prefill-bf16-8,prefill-bf16-16,prefill-bf16-32,prefill-bf16-64,prefill-bf16n-8,prefill-bf16n-32", 0),
]


def test_the_cases_are_what_auto_launches():
    """The builds below are those 'auto' picks: gluon_rx at programs of <= 32 heads over fp8 rows (gluon_ws took 17-32
    until session 59), gluon64 at 64-head programs (64 and 128 heads), gluon_prefill for every prefill head count."""
    for layout in (KVLayout.FP8_DS_MLA, KVLayout.FP8_DS_MLA_NOPE):
        for heads, kernel in ((8, "rx"), (16, "rx"), (32, "rx"), (64, "g64"), (128, "g64")):
            hp = dispatch.heads_per_program("native", heads)
            got = ("rx" if launch.rx_preferred(layout, hp) else "ws" if launch.ws_preferred(layout, hp)
                   else "g64" if hp == 64 else "?")
            assert got == kernel, (layout, heads, hp, got)
    assert all(launch.gluon_prefill_preferred(h) for h in (8, 16, 32, 64, 128))


@pytest.mark.parametrize("kernel, cases, spill", DEFAULT_BUILDS, ids=[f"{k}-{c.split(',')[0]}" for k, c, _ in
                                                                     DEFAULT_BUILDS])
def test_default_gluon_builds_compile_for_sm90a(kernel, cases, spill):
    pytest.importorskip("triton.experimental.gluon")
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src")}
    for name in ("TRITON_INTERPRET", "DSATTN_RX_CONFIG", "DSATTN_RX_CONSUMERS", "DSATTN_PF_CONFIG",
                 "DSATTN_WS_CONFIG", "DSATTN_G64_CONFIG", "DSATTN_PF_PROFILE"):
        env.pop(name, None)
    res = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "mla_gluon_check.py"), "--kernel", kernel,
                          "--cases", cases], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    names = cases.split(",")
    assert len(lines) == len(names), res.stdout
    for name, ln in zip(names, lines):
        assert ln.startswith(name) and "FAILED" not in ln, ln
        assert "WGMMA_SERIALIZED" not in ln, ln
        smem = int(re.search(r"smem=\s*(\d+)", ln).group(1))
        regs = int(re.search(r"regs=(\d+)", ln).group(1))
        assert smem <= launch.SMEM_LIMIT, ln
        assert int(re.search(r"spill_st=(\d+)", ln).group(1)) <= spill, ln
        assert int(re.search(r"wgmma=(\d+)", ln).group(1)) > 0, ln
        if kernel == "rx" and name.endswith("-16"):  # one consumer, two CTAs an SM
            assert regs <= 128, ln
            assert 2 * (smem + CTA_RESERVED) <= SM_SHARED, ln
