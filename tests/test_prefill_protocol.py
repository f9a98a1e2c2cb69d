"""A model of gluon_prefill's split-consumer mbarrier protocol (producer, warpgroup 0 `_wg_s`, warpgroup 1 `_wg_v`),
run under random interleavings: no schedule deadlocks, and no stage is rewritten by the producer while a consumer
may still read the block it holds (an async wgmma counts as reading from its issue to its retirement).

mbarriers are modelled with their parity semantics (a wait on parity p returns once the barrier's completed-phase
count has the other parity: fresh barriers count as phase 1 complete), so a consumer or producer running a whole
phase ahead would be caught as it is on the GPU. Schedules: the default (overlap 0) and overlap 1 (S(b + 1) before
the softmax of b, three stages at least; removed from the kernel in session 30, its model kept); config pair
(`_wg_pair`, FlashMLA's staggered pair with bf16 P, session 65; session 26 wrote the model for its fp16 version).
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


def _run_pair(nblocks, ns, seed, broken=None):
    """Config pair (gluon_prefill._wg_pair): warpgroup H takes blocks 2 i + H, the running max goes warpgroup 0 -> 1
    through x_smem[0] (xbar[0]) and back through x_smem[1] (xbar[1]), P through p[H] (pbar[H]: warpgroup 0's P in block
    2 i's RoPE tile, warpgroup 1's in p1); warpgroup 0 releases its own block's stage once its own P V retired, and
    both release the other block's stage once their products retired. Checked besides the stages: every read of
    x_smem[k] sees the value of its own step (not an older one, not the next one), p[k] is not rewritten while the
    other warpgroup's P V may still read it, and block 2 i's stage (whose RoPE tile holds warpgroup 0's P) still holds
    block 2 i while warpgroup 1 reads that P. broken: 'early_p' (warpgroup 0 writes its P before waiting xbar[1]) must
    be caught."""
    rnd = random.Random(seed)
    full = [Barrier(1) for _ in range(ns)]
    free = [Barrier(2) for _ in range(ns)]
    xbar, pbar, qbar = [Barrier(1), Barrier(1)], [Barrier(1), Barrier(1)], Barrier(2)
    stage = [None] * ns
    x_val = [None] * 4                      # the step whose value each x_smem slot holds
    p_val = [None, None]                    # the step whose P each p slot holds
    p_reading = [set(), set()]              # steps of P V products (by the other warpgroup) reading p[k]

    def holds(st, b):
        assert stage[st] == b, f"stage {st} holds {stage[st]}, block {b} still read (pair, {nblocks}, {ns})"

    def wait(bar, parity):
        while not bar.passed(parity):
            yield BLOCKED

    def producer():
        for i in range(min(ns - 1, nblocks)):
            stage[i % ns] = i
            yield
        for b in range(nblocks):
            yield
            full[b % ns].arrive()
            nb = b + ns - 1
            if nb < nblocks:
                yield from wait(free[nb % ns], ((nb // ns) & 1) ^ 1)
                stage[nb % ns] = nb
            yield

    def write_p(h, i):
        assert not p_reading[h], f"p[{h}] rewritten at step {i} while step {p_reading[h]}'s P V reads it"
        p_val[h] = i

    def wg(h):
        qbar.arrive()
        yield from wait(qbar, 0)
        npairs = (nblocks + 1) // 2
        for i in range(npairs):
            b, ob = 2 * i + h, 2 * i + 1 - h
            st = (b if b < nblocks else 2 * i) % ns
            ost = (ob if ob < nblocks else 2 * i) % ns
            if b < nblocks:
                yield from wait(full[st], (b // ns) & 1)
                holds(st, b)                # S(b), issued and retired
            yield
            if h == 0:
                x_val[0] = i
                xbar[0].arrive()
                own = (st, b if b < nblocks else None)  # its P V, in flight
                yield
                if broken == "early_p":
                    holds(st, b)            # its P goes into block 2 i's RoPE tile
                    write_p(0, i)
                yield from wait(xbar[1], i & 1)
                assert x_val[1] == i, f"warpgroup 0 read x_smem[1] of step {x_val[1]} at step {i}"
                if broken != "early_p":
                    holds(st, b)
                    write_p(0, i)
                pbar[0].arrive()
                if own[1] is not None:
                    holds(*own)             # its P V retired
                    free[st].arrive()       # its own block's stage: S and its P V retired
                yield
                yield from wait(pbar[1], i & 1)
                assert p_val[1] == i, f"p[1] holds step {p_val[1]}'s P at step {i}: rewritten too early or late"
                p_reading[1].add(i)         # P V with p[1], in flight
                yield
                if ob < nblocks:
                    holds(ost, ob)
                p_reading[1].discard(i)
            else:
                yield from wait(xbar[0], i & 1)
                assert x_val[0] == i, f"warpgroup 1 read x_smem[0] of step {x_val[0]} at step {i}"
                x_val[1] = i
                xbar[1].arrive()
                yield
                write_p(1, i)
                pbar[1].arrive()
                yield
                yield from wait(pbar[0], i & 1)
                assert p_val[0] == i, f"p[0] holds step {p_val[0]}'s P at step {i}: rewritten too early or late"
                p_reading[0].add(i)
                yield
                if b < nblocks:
                    holds(st, b)
                holds(ost, 2 * i)           # the other P V reads block 2 i's stage (also for a missing own block)
                p_reading[0].discard(i)
            yield
            if b < nblocks and h == 1:
                free[st].arrive()
            if ob < nblocks:
                free[ost].arrive()
        x_val[2 + h] = npairs               # the row sums
        xbar[h].arrive()
        yield from wait(xbar[1 - h], npairs & 1)
        assert x_val[3 - h] == npairs

    procs = [producer(), wg(0), wg(1)]
    blocked = 0
    while procs:
        p = rnd.choice(procs)
        try:
            blocked = blocked + 1 if next(p) is BLOCKED else 0
        except StopIteration:
            procs.remove(p)
            blocked = 0
        assert blocked < 1000, f"deadlock: pair, {nblocks} blocks, {ns} stages, seed {seed}"


@pytest.mark.parametrize("stages", [2, 4])
def test_pair_protocol(stages):
    for nblocks in range(0, 10):
        for seed in range(40):
            _run_pair(nblocks, stages, seed)


def test_pair_model_catches_an_early_p():
    caught = 0
    for seed in range(200):
        try:
            _run_pair(6, 4, seed, broken="early_p")
        except AssertionError as e:
            assert "rewritten" in str(e)
            caught += 1
    assert caught > 0
