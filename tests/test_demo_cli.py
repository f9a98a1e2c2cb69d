"""The main job (``dsattn demo``), the CLI router and the README's commands."""
import os
import re
import subprocess
import sys

import pytest

from dsattn import cli
from dsattn.demo import run_demo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def reference_ops(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")


def test_demo_step_matches_reference_stack():
    stats = run_demo(topk=32, block_size=16, spans=[(90, 1), (0, 1), (40, 13), (0, 21)], quiet=True)
    assert stats["path"] == "fp8_mixed"
    assert stats["within_tolerance"] and stats["shared_equal"]
    assert stats["out"].shape == (36, 8, 512)


def test_demo_command_prints_and_succeeds(capsys):
    assert cli.main(["demo", "--topk", "32"]) == 0
    text = capsys.readouterr().out
    for word in ("workspace", "caches", "within 2e-3", "shared layer equal"):
        assert word in text


def test_cli_routes_and_rejects_unknown(capsys):
    assert cli.main(["info"]) == 0
    assert "glm-5.3-flash" in capsys.readouterr().out
    assert cli.main(["no-such-command"]) == 2


def test_readme_commands_and_ci_agree():
    readme = open(os.path.join(ROOT, "README.md")).read()
    blocks = re.findall(r"```\n(.*?)\n```", readme, flags=re.S)
    demo = [b for b in blocks if "dsattn demo" in b]
    tests = [b for b in blocks if "pytest" in b]
    assert len(demo) == 1 and len(tests) == 1
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    assert tests[0].strip() in ci


def test_console_script_entry_point():
    r = subprocess.run([sys.executable, "-m", "dsattn.cli", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "dsattn demo" in r.stdout


def test_every_routed_command_has_a_main():
    import importlib
    for module in cli.COMMANDS.values():
        assert callable(importlib.import_module(module).main), module
