"""bench.common.alternating_medians on the CPU (wall time): each arm runs rounds x reps calls, the arms in turn
within every round, and the medians order a slow arm after a fast one. host_ms: the median wall time of single calls."""
import time

from dsattn.bench.common import alternating_medians, host_ms


def test_alternating_medians_order_and_counts():
    order = []
    arms = {"fast": lambda: order.append("fast"), "slow": lambda: order.append("slow") or time.sleep(0.002)}
    med = alternating_medians(arms, rounds=3, reps=2)
    assert order == (["fast"] * 2 + ["slow"] * 2) * 3
    assert set(med) == {"fast", "slow"}
    assert 0 <= med["fast"] < med["slow"] and med["slow"] >= 2.0


def test_host_ms_is_the_median_call():
    calls = []
    ms = host_ms(lambda: calls.append(1) or time.sleep(0.001 if len(calls) % 5 else 0.02), calls=11)
    assert len(calls) == 11
    assert 1.0 <= ms < 15.0  # two calls of 11 slept 20 ms: the median is a 1 ms call
