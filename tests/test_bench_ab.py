"""The A/B harness: its statistics on known timings, argument parsing, and a tiny CLI run per op on the CPU."""
import json
import time

import pytest
import torch

from dsattn.bench import ab
from dsattn.cli import main


def test_ratio_ci_brackets_a_known_ratio():
    a = [2.0 + 0.01 * (i % 7) for i in range(40)]
    b = [1.0 + 0.01 * (i % 5) for i in range(40)]
    est, lo, hi = ab.ratio_ci(a, b)
    assert lo <= est <= hi and 1.9 < lo and hi < 2.1
    assert ab.verdict(lo, hi) == "B faster"
    est, lo, hi = ab.ratio_ci(b, a)
    assert ab.verdict(lo, hi) == "A faster"
    noisy = [1.0, 1.2, 0.8, 1.1, 0.9] * 4
    est, lo, hi = ab.ratio_ci(noisy, noisy[::-1])
    assert lo < 1 < hi and ab.verdict(lo, hi) == "no difference detected"


@pytest.mark.parametrize("kw, match", [(dict(a_ms=[], b_ms=[]), "a_ms and b_ms"),
                                       (dict(a_ms=[1.0], b_ms=[1.0, 2.0]), "a_ms and b_ms"),
                                       (dict(a_ms=[1.0], b_ms=[1.0], confidence=1.0), "confidence"),
                                       (dict(a_ms=[1.0], b_ms=[1.0], resamples=0), "resamples")])
def test_ratio_ci_rejects(kw, match):
    with pytest.raises(ValueError, match=match):
        ab.ratio_ci(**kw)


def test_ab_test_sees_a_slower_arm_and_restores_env(monkeypatch):
    monkeypatch.delenv("DSATTN_AB_PROBE", raising=False)
    seen = []

    def arm(delay):
        def fn():
            import os
            seen.append(os.environ.get("DSATTN_AB_PROBE"))
            time.sleep(delay)
        return fn
    res = ab.ab_test(arm(0.004), arm(0.001), env_a={"DSATTN_AB_PROBE": "a"}, env_b={"DSATTN_AB_PROBE": "b"},
                     blocks=8, calls=2, warmup=1, cuda=False)
    assert res["verdict"] == "B faster" and res["ratio_a_over_b"] > 2
    assert set(seen) == {"a", "b"}
    import os
    assert "DSATTN_AB_PROBE" not in os.environ
    with pytest.raises(ValueError, match="blocks"):
        ab.ab_test(arm(0), arm(0), blocks=0)


def test_parse_arm():
    assert ab.parse_arm("version=4,segs=2,mode=x,flag=True,env:A_B=3", "--a") == (
        dict(version=4, segs=2, mode="x", flag=True), {"A_B": "3"})
    assert ab.parse_arm("", "--b") == ({}, {})
    # ';' in an env value stands for ',' (named-field configs: DSATTN_PF_CONFIG, DSATTN_RX_CONFIG)
    assert ab.parse_arm("env:DSATTN_PF_CONFIG=f16=0;cvt_pipe=0,version=2", "--b") == (
        dict(version=2), {"DSATTN_PF_CONFIG": "f16=0,cvt_pipe=0"})
    with pytest.raises(ValueError, match="--b must be"):
        ab.parse_arm("version", "--b")


def test_arm_kwargs_checked_before_any_run():
    """A keyword the public op does not take is refused by name before anything is built: the comma of
    'env:DSATTN_PF_CONFIG=vst=1,cl=1' ended the env value and made cl a keyword (session 67's lost A/B)."""
    with pytest.raises(ValueError, match="--b: sparse_mla_prefill takes no argument 'cl'"):
        main(["bench", "ab", "--op", "sparse_mla_prefill", "--tokens", "4", "--heads", "2", "--slots", "64",
              "--topk", "32", "--b", "env:DSATTN_PF_CONFIG=vst=1,cl=1"])
    with pytest.raises(ValueError, match="--a: sparse_mla_decode takes no argument 'varaint'"):
        ab.check_arm_kwargs("sparse_mla_decode", {"varaint": "pad64"}, "--a")
    ab.check_arm_kwargs("sparse_mla_decode", {"variant": "pad64"}, "--a")  # a keyword it takes
    ab.check_arm_kwargs("topk", {"version": 4}, "--a")  # top-k arms are checked where they are used


@pytest.mark.parametrize("argv", [
    ["--op", "topk", "--rows", "3", "--width", "300", "--topk", "16", "--a", "version=3", "--b", "version=4"],
    ["--op", "sparse_mla_decode", "--tokens", "2", "--heads", "2", "--slots", "256", "--block-size", "16",
     "--topk", "32", "--a", "variant=pad64", "--b", "variant=native"],
    ["--op", "sparse_mla_prefill", "--tokens", "4", "--heads", "2", "--slots", "64", "--topk", "32"],
])
def test_cli_tiny(argv, tmp_path, capsys):
    assert main(["bench", "ab", *argv, "--blocks", "2", "--calls", "1", "--warmup", "0", "--resamples", "50",
                 "--out", str(tmp_path)]) == 0
    row = json.loads((tmp_path / "ab.json").read_text())["rows"][0]
    assert len(row["a_samples_ms"]) == 2 and row["ci_low"] <= row["ratio_a_over_b"] <= row["ci_high"]
    if row["op"] == "topk":
        assert row["rows_with_other_set"] == 0
    else:
        assert row["max_abs_out_diff"] < 2e-2 and row["max_rel_lse_diff"] < 1e-4
    assert "verdict" in capsys.readouterr().out


def test_ratio_ci_drops_as_many_ratios_at_each_end():
    """The percentile interval of R resampled ratios drops the same count at both ends (0.9 / 2000 dropped 99 below
    and 100 above before session 35); at the defaults (0.95 / 2000: 50 and 50) nothing changed."""
    import random
    import statistics
    rng = random.Random(1)
    a = [1 + rng.random() for _ in range(9)]
    b = [1 + rng.random() for _ in range(9)]
    for conf, r, cut in ((0.9, 2000, 100), (0.95, 999, 24), (0.99, 100, 0), (0.95, 2000, 50), (0.5, 1, 0)):
        rr = random.Random(3)  # the resamples ratio_ci draws with seed 3
        ratios = []
        for _ in range(r):
            pick = [rr.randrange(9) for _ in range(9)]
            ratios.append(statistics.median(a[i] for i in pick) / statistics.median(b[i] for i in pick))
        ratios.sort()
        _, lo, hi = ab.ratio_ci(a, b, confidence=conf, resamples=r, seed=3)
        assert (lo, hi) == (ratios[cut], ratios[r - 1 - cut]), (conf, r)


def test_arms_that_disagree_exit_1(monkeypatch, tmp_path, capsys):
    """Timed all the same, but a run whose arms compute different functions exits 1 with a warning."""
    assert ab._agreement("topk", (torch.tensor([[1, 2]]),), (torch.tensor([[2, 1]]),))["outputs_agree"]
    assert not ab._agreement("topk", (torch.tensor([[1, 2]]),), (torch.tensor([[1, 3]]),))["outputs_agree"]
    out, lse = torch.rand(2, 3, 512).bfloat16(), torch.tensor([[1.0, float("-inf"), 2.0]] * 2)
    assert ab._agreement("sparse_mla_decode", (out, lse), (out.clone(), lse.clone()))["outputs_agree"]
    assert not ab._agreement("sparse_mla_decode", (out + 0.5, lse), (out, lse))["outputs_agree"]
    monkeypatch.setattr(ab, "_agreement", lambda op, a, b: dict(rows_with_other_set=1, outputs_agree=False))
    argv = ["--op", "topk", "--rows", "3", "--width", "300", "--topk", "16", "--a", "version=3", "--b", "version=4"]
    assert main(["bench", "ab", *argv, "--blocks", "2", "--calls", "1", "--warmup", "0", "--resamples", "50",
                 "--out", str(tmp_path)]) == 1
    assert "outputs differ" in capsys.readouterr().err
    assert (tmp_path / "ab.json").exists()


def test_provenance_prefers_the_named_commit(monkeypatch):
    from dsattn.bench.common import provenance, src_digest
    monkeypatch.setenv("DSATTN_GIT_COMMIT", "abc1234")
    info = provenance()
    assert info["git_commit"] == "abc1234" and info["git_dirty"] is None
    assert info["src_digest"] == src_digest()


def test_src_digest_follows_the_sources(tmp_path):
    """src_digest names the code by content: a changed, added or renamed .py file changes it; other files and
    __pycache__ do not."""
    from dsattn.bench.common import src_digest
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    base = src_digest(str(tmp_path))
    assert len(base) == 12 and int(base, 16) >= 0 and src_digest(str(tmp_path)) == base
    (tmp_path / "notes.md").write_text("prose")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.py").write_text("cached")
    assert src_digest(str(tmp_path)) == base
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    changed = src_digest(str(tmp_path))
    assert changed != base
    (tmp_path / "pkg" / "a.py").rename(tmp_path / "pkg" / "b.py")
    assert src_digest(str(tmp_path)) not in (base, changed)


@pytest.mark.parametrize("argv, match", [(["--slots", "100", "--block-size", "64"], "--slots must be a multiple"),
                                         (["--heads", "0"], "--heads must be >= 1")])
def test_cli_rejects(argv, match):
    with pytest.raises(ValueError, match=match):
        ab.parse_args(["--op", "sparse_mla_decode", *argv])


def test_graph_ms_without_cuda_calls_once():
    """bench.common.graph_ms (CUDA-graph replays of reps calls) runs fn once and returns nan without CUDA."""
    import math
    from dsattn.bench import common
    if common.torch.cuda.is_available():
        pytest.skip("the CPU fallback only")
    calls = []
    assert math.isnan(common.graph_ms(lambda: calls.append(1)))
    assert calls == [1]


def test_spread_marks_a_busy_machine():
    # arm A's blocks of two committed runs of the same 8-head prefill (H100): session 75's quiet machine and
    # session 74's busy one (bench/results/s75/ab_s75_pe1_1024_h8_h100.json, s74/ab_s74_lazy_1024_h8_h100.json)
    quiet = [0.252, 0.246, 0.245, 0.251, 0.251, 0.246, 0.242, 0.245, 0.245, 0.244, 0.241, 0.242, 0.245, 0.244, 0.240,
             0.246, 0.242, 0.242, 0.240, 0.242, 0.245, 0.245, 0.243, 0.241, 0.243, 0.242, 0.241, 0.242, 0.241, 0.240]
    busy = [0.425, 0.449, 0.470, 0.420, 0.404, 0.395, 0.381, 0.397, 0.468, 0.419, 0.383, 0.369, 0.381, 0.360, 0.410,
            0.421, 0.441, 0.391, 0.406, 0.384, 0.397, 0.358, 0.364, 0.384, 0.371, 0.376, 0.407, 0.375, 0.375, 0.417]
    assert ab.spread(quiet) < 0.03 < ab.NOISY_SPREAD < 0.15 < ab.spread(busy)
    assert ab.spread([1.0]) == 0.0 and ab.spread([1.0, 3.0, 2.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="samples"):
        ab.spread([])


def test_ab_test_reports_spread_and_paired_ratio():
    ticks = iter([0.002, 0.001] * 3 + [0.010, 0.005] + [0.002, 0.001] * 3)

    def arm():
        time.sleep(next(ticks))
    res = ab.ab_test(arm, arm, blocks=6, calls=1, warmup=1, seed=5, cuda=False)
    for k in ("a_spread", "b_spread", "paired_ratio", "noisy"):
        assert k in res
    assert isinstance(res["noisy"], bool) and res["a_spread"] >= 0 and res["paired_ratio"] > 0
