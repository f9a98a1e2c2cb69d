"""bench.common.alternating_medians on the CPU (wall time): each arm runs rounds x reps calls, the arms in turn
within every round, and the medians order a slow arm after a fast one."""
import time

from dsattn.bench.common import alternating_medians


def test_alternating_medians_order_and_counts():
    order = []
    arms = {"fast": lambda: order.append("fast"), "slow": lambda: order.append("slow") or time.sleep(0.002)}
    med = alternating_medians(arms, rounds=3, reps=2)
    assert order == (["fast"] * 2 + ["slow"] * 2) * 3
    assert set(med) == {"fast", "slow"}
    assert 0 <= med["fast"] < med["slow"] and med["slow"] >= 2.0
