"""A model of gluon_prefill's split-consumer mbarrier protocol (producer, warpgroup 0 `_wg_s`, warpgroup 1 `_wg_v`),
run under random interleavings: no schedule deadlocks, and no stage is rewritten by the producer while a consumer
may still read the block it holds (an async wgmma counts as reading from its issue to its retirement).

mbarriers are modelled with their parity semantics (a wait on parity p returns once the barrier's completed-phase
count has the other parity: fresh barriers count as phase 1 complete), so a consumer or producer running a whole
phase ahead would be caught as it is on the GPU. Schedules: the default (overlap 0) and overlap 1 (S(b + 1) before
the softmax of b, three stages at least).
The kernel's own sequence of barrier operations is transcribed by hand from gluon_prefill.py; a change there needs
the same change here.
"""
import random

import pytest

BLOCKED = object()  # what a partition yields while its mbarrier wait has not passed


class Barrier:
    def __init__(self, count):
        self.count, self.pending, self.phases = count, 0, 0

    def arrive(self):
        self.pending += 1
        assert self.pending <= self.count
        if self.pending == self.count:
            self.pending, self.phases = 0, self.phases + 1

    def passed(self, parity):
        return self.phases % 2 != parity


def _run(schedule, nblocks, ns, seed):
    rnd = random.Random(seed)
    full = [Barrier(1) for _ in range(ns)]
    free = [Barrier(2) for _ in range(ns)]  # both consumer warpgroups release a stage
    p_ready, p_free = Barrier(1), Barrier(1)
    stage = [None] * ns                     # the block a stage holds (or is being overwritten with)

    def holds(st, b):
        assert stage[st] == b, f"stage {st} holds {stage[st]}, block {b} still read ({schedule}, {nblocks}, {ns})"

    def wait(bar, parity):
        while not bar.passed(parity):
            yield BLOCKED

    def producer():
        for i in range(min(ns - 1, nblocks)):
            stage[i % ns] = i
            yield
        for b in range(nblocks):
            yield                           # block b lands (cp.async wait_group)
            full[b % ns].arrive()
            nb = b + ns - 1
            if nb < nblocks:
                yield from wait(free[nb % ns], ((nb // ns) & 1) ^ 1)
                stage[nb % ns] = nb         # the gather of block nb starts overwriting the stage
            yield

    def softmax_handoff(b):
        yield from wait(p_free, (b & 1) ^ 1)
        p_ready.arrive()

    def wg0():
        in_flight = []                      # (stage, block) of async products not yet retired

        def retire_all():
            for st, blk in in_flight:
                if blk is not None:
                    holds(st, blk)
            in_flight.clear()

        if schedule == "overlap" and nblocks > 0:
            yield from wait(full[0], 0)
            holds(0, 0)                     # S(0), retired
        for b in range(nblocks):
            st = b % ns
            if schedule in ("default", "default_no_free", "default_early_free"):
                if schedule == "default_early_free":  # (a broken variant: the model must catch it)
                    if b > 0:
                        free[(b + ns - 1) % ns].arrive()
                    yield
                    retire_all()            # P V(b - 1) retired after its stage was released
                else:
                    retire_all()            # P V(b - 1)
                    if b > 0 and schedule == "default":  # (default_no_free: a broken variant that must deadlock)
                        free[(b + ns - 1) % ns].arrive()
                yield from wait(full[st], (b // ns) & 1)
                holds(st, b)                # S(b), issued and retired
                yield
            elif schedule == "overlap":
                retire_all()
                if b > 0:
                    free[(b + ns - 1) % ns].arrive()
                nxt = b + 1 < nblocks
                if nxt:
                    yield from wait(full[(b + 1) % ns], ((b + 1) // ns) & 1)
                    holds((b + 1) % ns, b + 1)
                in_flight.append(((b + 1) % ns, b + 1) if nxt else (st, None))  # S(b + 1)
                yield
            yield from softmax_handoff(b)
            holds(st, b)
            in_flight.append((st, b))       # P V(b) issued
            yield
            if schedule == "overlap":
                s_next = in_flight.pop(0)   # S(b + 1) retired; P V(b) may still run
                if s_next[1] is not None:
                    holds(*s_next)
        retire_all()
        yield from wait(p_free, (nblocks & 1) ^ 1)
        p_ready.arrive()                    # 1 / l for warpgroup 1

    def wg1():
        for b in range(nblocks):
            yield from wait(p_ready, b & 1)
            holds(b % ns, b)                # its half of P V(b), issued and retired
            yield
            holds(b % ns, b)
            p_free.arrive()
            free[b % ns].arrive()
        yield from wait(p_ready, nblocks & 1)

    procs = [producer(), wg0(), wg1()]
    blocked = 0                             # steps since the last one that was not a failed wait
    while procs:
        p = rnd.choice(procs)
        try:
            blocked = blocked + 1 if next(p) is BLOCKED else 0
        except StopIteration:
            procs.remove(p)
            blocked = 0
        assert blocked < 1000, f"deadlock: {schedule}, {nblocks} blocks, {ns} stages, seed {seed}"


@pytest.mark.parametrize("schedule, stages", [("default", 2), ("default", 3), ("overlap", 3), ("overlap", 4)])
def test_protocol_has_no_deadlock_and_no_early_overwrite(schedule, stages):
    for nblocks in range(0, 9):
        for seed in range(40):
            _run(schedule, nblocks, stages, seed)


def test_the_model_catches_an_early_release():
    """The default schedule with warpgroup 0 releasing stage b - 1 before its P V(b - 1) retired: some interleaving
    lets the producer overwrite the stage first, and the model reports it (the check above would catch such a
    kernel)."""
    caught = 0
    for seed in range(200):
        try:
            _run("default_early_free", 6, 2, seed)
        except AssertionError as e:
            assert "still read" in str(e)
            caught += 1
    assert caught > 0


def test_the_model_catches_a_deadlock():
    """Warpgroup 0 never releasing its stages: the producer waits forever once the ring is full."""
    with pytest.raises(AssertionError, match="deadlock"):
        _run("default_no_free", 4, 2, 0)
