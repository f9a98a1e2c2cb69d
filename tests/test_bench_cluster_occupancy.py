"""bench/cluster_occupancy.py: its ctypes structures match cuda.h's sizes, and wave_check holds default_ctas to the
driver's counts of clusters at once that session 56 measured on an H100 (132 SMs, committed in bench/results): past
16384 columns every row count the rule sends over a cluster fits one wave there, and a rule that sends one row more
than the count is reported."""
import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_INTERPRET_BEFORE = os.environ.get("TRITON_INTERPRET")
spec = importlib.util.spec_from_file_location("cluster_occupancy",
                                              os.path.join(HERE, "..", "bench", "cluster_occupancy.py"))
cluster_occupancy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cluster_occupancy)


def _h100_counts():
    with open(os.path.join(HERE, "..", "bench", "results", "cluster_occupancy_h100_s56.json")) as f:
        return json.load(f)


def test_structs():
    cluster_occupancy.check_structs()


def test_import_leaves_the_environment():
    """Importing the script (as this file does) must not change TRITON_INTERPRET, which the CPU suite runs under."""
    assert os.environ.get("TRITON_INTERPRET") == _INTERPRET_BEFORE


def test_default_ctas_fits_one_wave_on_the_h100(monkeypatch):
    from dsattn.ops.topk import gluon_select
    monkeypatch.delenv("DSATTN_TOPK_CTAS", raising=False)
    d = _h100_counts()
    waves = cluster_occupancy.wave_check(d["rows"], d["sms"], gluon_select.default_ctas)
    assert {(w["width"], w["ctas"]) for w in waves} >= {(24576, 8), (32768, 8), (32768, 4), (65536, 8), (65536, 4)}
    assert all(w["ok"] for w in waves), waves
    assert {(w["width"], w["ctas"]): w["rows"] for w in waves}[(65536, 8)] == 15
    assert {(w["width"], w["ctas"]): w["rows"] for w in waves}[(32768, 4)] == 30


def test_wave_check_reports_a_second_wave():
    d = _h100_counts()

    def one_more(rows, width, sms):  # 8 CTAs up to 16 rows: one more cluster than the driver's 15 at 65536 columns
        return 8 if rows <= 16 else 1
    waves = cluster_occupancy.wave_check(d["rows"], d["sms"], one_more)
    bad = [(w["width"], w["ctas"]) for w in waves if not w["ok"]]
    assert bad == [(65536, 8)], waves
