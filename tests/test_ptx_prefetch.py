"""ops/_ptx_prefetch.py: the L2 prefetch-size hint is put on the copies of a marked kernel's PTX only, the compile hook
is installed once and keeps a hook installed before it, and a marked gluon_prefill build compiles for sm_90a with
every cp.async hinted (Triton's bundled ptxas; no GPU needed)."""
import os
import re
import subprocess
import sys

import pytest

from dsattn.ops import _ptx_prefetch as pp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PTX = """.visible .entry k(
\tmov.b32 %r1, %r2; // dsattn-l2-prefetch-{n}B
\tcp.async.cg.shared.global [ %r65 + 0 ], [ %rd33 + 0 ], 0x10, %r66;
\tcp.async.cg.shared.global [ %r67 + 0 ], [ %rd34 + 0 ], 0x10;
\tcp.async.ca.shared.global [ %r69 + 0 ], [ %rd35 + 0 ], 0x4;
"""


@pytest.mark.parametrize("n", [64, 128, 256])
def test_rewrite_marked(n):
    got = pp.rewrite(_PTX.format(n=n))
    assert got.count(f"cp.async.cg.shared.global.L2::{n}B [") == 2
    assert "cp.async.cg.shared.global [" not in got
    assert "cp.async.ca.shared.global [ %r69" in got  # only .cg (16-byte) copies are hinted


def test_rewrite_unmarked_untouched():
    plain = _PTX.replace("// dsattn-l2-prefetch-{n}B", "")
    assert pp.rewrite(plain) is plain
    assert pp.rewrite(_PTX.format(n=100)) == _PTX.format(n=100)  # not a size PTX has


def test_install_once_and_chained(monkeypatch):
    from triton import knobs
    seen = []

    def earlier(backend, stages, options, language, capability):
        seen.append(language)
        stages["ptx"] = lambda src, md: src + "\n// earlier"

    monkeypatch.setattr(knobs.runtime, "add_stages_inspection_hook", earlier)
    assert pp.install() and pp.install()
    hook = knobs.runtime.add_stages_inspection_hook
    assert hook is not earlier and getattr(hook, "_dsattn_l2_prefetch", False)
    stages = {"ptx": None}
    hook(None, stages, None, "gluon", 90)
    assert seen == ["gluon"]
    out = stages["ptx"](_PTX.format(n=256), {})
    assert out.endswith("// earlier") and out.count("L2::256B") == 2


def test_prefill_l2pf_compiles_hinted(tmp_path):
    """config l2pf=256 at 32 heads: every cp.async of the PTX carries the hint, ptxas takes it (LDGSTS ... LTC256B in
    the SASS is what FlashMLA's gathers use), and it spills nothing; l2pf 0 carries none."""
    res = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "mla_gluon_check.py"), "--kernel", "prefill",
                          "--cases", "prefill-bf16-32", "--configs", "l2pf=256,l2pf=0", "--dump", str(tmp_path)],
                         capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")))
    assert res.returncode == 0, res.stderr[-2000:]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"prefill-bf16-32\s+(l2pf=\d+)\s.*", res.stdout)}
    assert set(rows) == {"l2pf=256", "l2pf=0"}, res.stdout
    assert all("spill_st=0" in r for r in rows.values()), rows
    hinted = (tmp_path / "prefill-bf16-32_l2pf_256.ptx").read_text()
    plain = (tmp_path / "prefill-bf16-32_l2pf_0.ptx").read_text()
    n = len(re.findall(r"cp\.async\.cg\.shared\.global", plain))
    assert n > 0 and hinted.count("cp.async.cg.shared.global.L2::256B [") == n
    assert "L2::" not in plain
