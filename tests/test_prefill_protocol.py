"""A model of gluon_prefill's split-consumer mbarrier protocol (producer, warpgroup 0 `_wg_s`, warpgroup 1 `_wg_v`),
run under random interleavings: no schedule deadlocks, and no stage is rewritten by the producer while a consumer
may still read the block it holds (an async wgmma counts as reading from its issue to its retirement).

mbarriers are modelled with their parity semantics (a wait on parity p returns once the barrier's completed-phase
count has the other parity: fresh barriers count as phase 1 complete), so a consumer or producer running a whole
phase ahead would be caught as it is on the GPU. Schedules: the default (overlap 0) and overlap 1 (S(b + 1) before
the softmax of b, three stages at least; removed from the kernel in session 30, its model kept); config pair
(`_wg_pair` with half stages, FlashMLA's staggered pair with bf16 P: session 65, measured slower and removed, code at
9d66719; its model kept).
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


def _wait(bar, parity):
    """A partition's mbarrier wait: yields BLOCKED until the phase of that parity completed."""
    while not bar.passed(parity):
        yield BLOCKED


def _interleave(procs, rnd, what):
    """Steps the partitions in random order until all finished; a long run of failed waits is a deadlock."""
    procs = list(procs)
    blocked = 0                             # steps since the last one that was not a failed wait
    while procs:
        p = rnd.choice(procs)
        try:
            blocked = blocked + 1 if next(p) is BLOCKED else 0
        except StopIteration:
            procs.remove(p)
            blocked = 0
        assert blocked < 1000, f"deadlock: {what}"


def _run(schedule, nblocks, ns, seed):
    rnd = random.Random(seed)
    full = [Barrier(1) for _ in range(ns)]
    free = [Barrier(2) for _ in range(ns)]  # both consumer warpgroups release a stage
    p_ready, p_free = Barrier(1), Barrier(1)
    stage = [None] * ns                     # the block a stage holds (or is being overwritten with)

    def holds(st, b):
        assert stage[st] == b, f"stage {st} holds {stage[st]}, block {b} still read ({schedule}, {nblocks}, {ns})"

    def producer():
        for i in range(min(ns - 1, nblocks)):
            stage[i % ns] = i
            yield
        for b in range(nblocks):
            yield                           # block b lands (cp.async wait_group)
            full[b % ns].arrive()
            nb = b + ns - 1
            if nb < nblocks:
                yield from _wait(free[nb % ns], ((nb // ns) & 1) ^ 1)
                stage[nb % ns] = nb         # the gather of block nb starts overwriting the stage
            yield

    def softmax_handoff(b):
        yield from _wait(p_free, (b & 1) ^ 1)
        p_ready.arrive()

    def wg0():
        in_flight = []                      # (stage, block) of async products not yet retired

        def retire_all():
            for st, blk in in_flight:
                if blk is not None:
                    holds(st, blk)
            in_flight.clear()

        if schedule == "overlap" and nblocks > 0:
            yield from _wait(full[0], 0)
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
                yield from _wait(full[st], (b // ns) & 1)
                holds(st, b)                # S(b), issued and retired
                yield
            elif schedule == "overlap":
                retire_all()
                if b > 0:
                    free[(b + ns - 1) % ns].arrive()
                nxt = b + 1 < nblocks
                if nxt:
                    yield from _wait(full[(b + 1) % ns], ((b + 1) // ns) & 1)
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
        yield from _wait(p_free, (nblocks & 1) ^ 1)
        p_ready.arrive()                    # 1 / l for warpgroup 1

    def wg1():
        for b in range(nblocks):
            yield from _wait(p_ready, b & 1)
            holds(b % ns, b)                # its half of P V(b), issued and retired
            yield
            holds(b % ns, b)
            p_free.arrive()
            free[b % ns].arrive()
        yield from _wait(p_ready, nblocks & 1)

    _interleave([producer(), wg0(), wg1()], rnd, f"{schedule}, {nblocks} blocks, {ns} stages, seed {seed}")


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


def _pair_producer_ops(npairs, r0_first, pipe, ring=None):
    """The producer's operations in order: ("issue", half, stage, step) waits for the half's free mbarrier and starts
    its copies; ("arrive", half, stage, step) is its full arrive once it landed (and, over fp16 stages, was converted).
    pipe: the fp16 pair's producer with a half's conversion after the next half's issue (session 68's measuring patch,
    bench/results/s68/pair_s68.patch): 'pairs' (bit 512) per step L(0), R(0) issued, both converted and arrived, then
    R(1), L(1) likewise; 'chain' (bit 1024) each half converted after the next one's issue, the step's last at once;
    'deep' as chain across the step boundary too (L(1) of step j still pending while the producer waits for L(0)'s
    release in step j + 1): a deadlock the model must catch. ring (PrefillConfig.ring of sessions 75-76, measured and
    removed; the kernel at 09992f9): 0 as r0_first, 1 L(0), R(0), L(1), R(1), 2 L(0), R(1), L(1), R(0)."""
    order = ((("L", 0), ("R", 0), ("R", 1), ("L", 1)) if r0_first else (("L", 0), ("R", 1), ("R", 0), ("L", 1)))
    if ring is not None:
        order = ((("L", 0), ("R", 0), ("R", 1), ("L", 1)), (("L", 0), ("R", 0), ("L", 1), ("R", 1)),
                 (("L", 0), ("R", 1), ("L", 1), ("R", 0)))[ring]
    if not pipe:
        return [(op, h, st, j) for j in range(npairs) for h, st in order for op in ("issue", "arrive")]
    if pipe == "pairs":
        return [(op, h, st, j) for j in range(npairs) for two in (order[:2], order[2:])
                for op in ("issue", "arrive") for h, st in two]
    ops, pending = [], None
    for j in range(npairs):
        for h, st in order:
            ops.append(("issue", h, st, j))
            if pending:
                ops.append(("arrive", *pending))
            pending = (h, st, j)
        if pipe == "chain":  # the step's last half converted at once
            ops.append(("arrive", *pending))
            pending = None
    return ops + ([("arrive", *pending)] if pending else [])


def _run_pair(nblocks, seed, broken=None, r0_first=False, pipe=None, ring=None, vst=False, odd=False):
    """Config pair (gluon_prefill._producer_pair / _wg_pair at 9d66719; removed): step i holds block 2 i in stage 0 and
    2 i + 1 in stage 1 (a missing last block is gathered zero-filled and runs as any other), each stage as two halves L
    and R with their own full / free mbarriers and one releasing warpgroup each; the producer refills L(0), R(1), R(0),
    L(1) in that order. Warpgroup 0: S over L(0) then R(0); the running max to warpgroup 1 through x_smem[0] (xbar[0])
    and back through x_smem[1] (xbar[1]); its P into stage 0's RoPE tile (in R(0); pbar[0]); its own P V (reads L(0)),
    then L(0) released; the other P V (p1 and L(1); pbar[1]), then L(1) released. Warpgroup 1: S over R(1) then L(1);
    its P into p1 (pbar[1]); its own P V (R(1)) and the other (the RoPE tile's P and R(0)); R(1) released once its own
    retired, R(0) once the other did. Checked: no half is refilled while a product may read the block it holds, every
    x_smem read sees its own step's value, no P buffer is rewritten while the other warpgroup's P V may read it. broken:
    'early_l0' (warpgroup 0 releases L(0) before its own P V retired) and 'early_r0' (warpgroup 1 releases R(0) before
    its other P V retired) must be caught. (Writing a P before the max hand-off would give wrong values but no race
    here: the half barriers already order every P buffer's reuse behind its last reader.) r0_first: session 67's order
    (bit 64 of the measuring patch bench/results/s67/pair_s67.patch): warpgroup 1 issues the other P V before its own
    and releases R(0) once that one retired, then R(1); the producer refills L(0), R(0), R(1), L(1) (gluon_pair's
    order since). ring (PrefillConfig.ring of sessions 75-76, removed; r0_first follows from it): 0 session 67's
    order; 1 the producer refills L(1) before R(1) and warpgroup 1's S reads L(1) first; 2 the producer refills L(0),
    R(1), L(1), R(0) and warpgroup 1 issues its own P V first (releasing R(1) first), as r0_first False. vst
    (PrefillConfig.vst, gluon_pair's default since session 78): after the row sums' exchange warpgroup h writes its half
    of O into stage h's latent part (both halves): by then the producer must have finished every copy and no product
    may read stage h; broken 'vst_early' (the write right after the warpgroup's last step, before the exchange) must be
    caught. odd (PrefillConfig.odd, the default since session 79; r0_first's order): at an odd count's last step the
    producer copies nothing into stage 1 (its halves then hold no block: a read of them is caught), warpgroup 1 runs
    no S over it and no P V of its own, warpgroup 0 no P V against L(1); every hand-off and release stays, and
    warpgroup 1 still waits for R(1)'s (copy-less) arrive before releasing it; broken 'odd_read' (warpgroup 0's other
    P V run anyway) must be caught, and 'odd_nowait' (that wait left out) deadlocks: R(1) released before the
    producer's wait for its release, whose parity then never comes."""
    if ring is not None:
        r0_first = ring != 2
    rnd = random.Random(seed)
    full_l, full_r = [Barrier(1), Barrier(1)], [Barrier(1), Barrier(1)]  # the producer threads' arrives as one
    free_l, free_r = [Barrier(1), Barrier(1)], [Barrier(1), Barrier(1)]
    xbar, pbar, qbar = [Barrier(1), Barrier(1)], [Barrier(1), Barrier(1)], Barrier(2)
    half = {("L", 0): None, ("R", 0): None, ("L", 1): None, ("R", 1): None}  # the block each half holds
    x_val = [None] * 4                      # the step whose value each x_smem slot holds
    p_val = [None, None]                    # the step whose P each P buffer holds (0: stage 0's RoPE tile, 1: p1)
    p_reading = [set(), set()]              # steps of P V products (by the other warpgroup) reading P buffer k
    npairs = (nblocks + 1) // 2
    ops = _pair_producer_ops(npairs, r0_first, pipe, ring)
    left = [len(ops)]                       # the producer's operations not yet done

    def holds(h, st, b):
        assert half[(h, st)] == b, f"{h}({st}) holds {half[(h, st)]}, block {b} still read (pair, {nblocks})"

    def write_o(h):
        """vst: warpgroup h's half of O through stage h's latent part (L(h) and R(h))."""
        assert left[0] == 0, f"O written into stage {h} with {left[0]} copies of the producer's still to come"
        half[("L", h)] = half[("R", h)] = "O"

    def producer():
        for op, h, st, j in ops:
            free, full = (free_l, full_l) if h == "L" else (free_r, full_r)
            if op == "issue":
                yield from _wait(free[st], (j & 1) ^ 1)
                # the copies start overwriting the half (odd: none for a block past the list)
                half[(h, st)] = f"none {2 * j + st}" if odd and 2 * j + st >= nblocks else 2 * j + st
            else:
                full[st].arrive()           # landed (each thread's no-increment arrive; fp16: converted first)
            left[0] -= 1
            yield

    def write_p(k, i):
        assert not p_reading[k], f"P buffer {k} rewritten at step {i} while step {p_reading[k]}'s P V reads it"
        p_val[k] = i

    def s_over(first, second, st, b, ph):
        """S of block b over stage st: its product over the half `first` issued once that half landed, then over
        `second`; both read until S retires."""
        full = {"L": full_l, "R": full_r}
        for h in (first, second):
            yield from _wait(full[h][st], ph)
            holds(h, st, b)                 # the product over this half issued
            yield
        holds(first, st, b)                 # S retired
        holds(second, st, b)

    def wg(h):
        qbar.arrive()
        yield from _wait(qbar, 0)
        for i in range(npairs):
            ph, b0, b1 = i & 1, 2 * i, 2 * i + 1
            skip = odd and b1 >= nblocks    # odd: block b1 past the list, no product reads stage 1
            if h == 0:
                yield from s_over("L", "R", 0, b0, ph)
                x_val[0] = i
                xbar[0].arrive()
                holds("L", 0, b0)           # its own P V issued (V = L(0))
                if broken == "early_l0":
                    free_l[0].arrive()
                yield
                yield from _wait(xbar[1], ph)
                assert x_val[1] == i, f"warpgroup 0 read x_smem[1] of step {x_val[1]} at step {i}"
                holds("R", 0, b0)           # its P goes into stage 0's RoPE tile
                write_p(0, i)
                pbar[0].arrive()
                yield
                holds("L", 0, b0)           # its own P V retired
                if broken != "early_l0":
                    free_l[0].arrive()
                yield from _wait(pbar[1], ph)
                assert p_val[1] == i, f"p1 holds step {p_val[1]}'s P at step {i}: rewritten too early or late"
                yield from _wait(full_l[1], ph)
                if not skip or broken == "odd_read":
                    holds("L", 1, b1)       # the other P V issued (p1, V = L(1))
                    p_reading[1].add(i)
                    yield
                    holds("L", 1, b1)       # retired
                    p_reading[1].discard(i)
                free_l[1].arrive()
            else:
                if not skip:
                    yield from s_over("L", "R", 1, b1, ph) if ring == 1 else s_over("R", "L", 1, b1, ph)
                elif broken != "odd_nowait":  # R(1)'s arrive (no copies) before its release below
                    yield from _wait(full_r[1], ph)
                yield from _wait(xbar[0], ph)
                assert x_val[0] == i, f"warpgroup 1 read x_smem[0] of step {x_val[0]} at step {i}"
                x_val[1] = i
                xbar[1].arrive()
                yield
                write_p(1, i)
                pbar[1].arrive()
                if r0_first:
                    yield from _wait(pbar[0], ph)
                    assert p_val[0] == i, f"stage 0's RoPE tile holds step {p_val[0]}'s P at step {i}"
                    yield from _wait(full_r[0], ph)
                    holds("R", 0, b0)       # the other P V issued first (the RoPE tile's P, V = R(0))
                    p_reading[0].add(i)
                    if broken == "early_r0":
                        free_r[0].arrive()
                    if not skip:
                        holds("R", 1, b1)   # then its own (V = R(1))
                    yield
                    holds("R", 0, b0)       # the other retired (a wait leaving one group in flight)
                    p_reading[0].discard(i)
                    if broken != "early_r0":
                        free_r[0].arrive()
                    yield
                    if not skip:
                        holds("R", 1, b1)   # its own retired
                    free_r[1].arrive()
                    yield
                    continue
                holds("R", 1, b1)           # its own P V issued (V = R(1))
                yield
                yield from _wait(pbar[0], ph)
                assert p_val[0] == i, f"stage 0's RoPE tile holds step {p_val[0]}'s P at step {i}"
                yield from _wait(full_r[0], ph)
                holds("R", 0, b0)           # the other P V issued (the RoPE tile's P, V = R(0))
                p_reading[0].add(i)
                if broken == "early_r0":
                    free_r[0].arrive()
                yield
                holds("R", 1, b1)           # its own P V retired
                free_r[1].arrive()
                yield
                holds("R", 0, b0)           # the other retired
                p_reading[0].discard(i)
                if broken != "early_r0":
                    free_r[0].arrive()
            yield
        if vst and broken == "vst_early":
            write_o(h)
            yield
        x_val[2 + h] = npairs               # the row sums
        xbar[h].arrive()
        yield from _wait(xbar[1 - h], npairs & 1)
        assert x_val[3 - h] == npairs
        if vst and broken != "vst_early":
            write_o(h)

    _interleave([producer(), wg(0), wg(1)], rnd, f"pair, {nblocks} blocks, seed {seed}")


def test_pair_odd_protocol():
    """gluon_pair's default (r0_first, vst) with odd (session 79): at an odd count's last step nothing is copied into
    stage 1 and nothing reads it, under every interleaving tried; warpgroup 0's P V against L(1) run there anyway is
    caught (the half holds no block), and so is the deadlock of warpgroup 1 releasing R(1) without waiting for its
    arrive (session 79's first cut, which the GPU runs did not hit)."""
    for nblocks in range(0, 12):
        for seed in range(60):
            _run_pair(nblocks, seed, r0_first=True, vst=True, odd=True)
    for nblocks in (1, 5):
        with pytest.raises(AssertionError, match="none"):
            _run_pair(nblocks, 0, r0_first=True, vst=True, odd=True, broken="odd_read")
    caught = 0
    for seed in range(100):
        try:
            _run_pair(1, seed, r0_first=True, vst=True, odd=True, broken="odd_nowait")
        except AssertionError as e:
            assert "deadlock" in str(e), str(e)
            caught += 1
    assert caught > 0


@pytest.mark.parametrize("r0_first, ring", [(False, None), (True, None), (True, 1), (False, 2)])
def test_pair_protocol(r0_first, ring):
    for nblocks in range(0, 12):
        for seed in range(60):
            _run_pair(nblocks, seed, r0_first=r0_first, ring=ring)


def test_pair_vst_protocol():
    """gluon_pair's default order (r0_first) with vst (session 78): O written through each warpgroup's own stage after
    the row sums' exchange finds the producer done and no product reading that stage; written right after the
    warpgroup's last step instead, the model catches it (a product of the other warpgroup, or a copy, still on it)."""
    for nblocks in range(0, 12):
        for seed in range(60):
            _run_pair(nblocks, seed, r0_first=True, vst=True)
    caught = 0
    for seed in range(300):
        try:
            _run_pair(6, seed, r0_first=True, vst=True, broken="vst_early")
        except AssertionError as e:
            assert "still read" in str(e) or "copies of the producer" in str(e), str(e)
            caught += 1
    assert caught > 0


def test_pair_pipelined_conversion_protocol():
    """Session 68's fp16 pair producers (pipe 'pairs': L(0) and R(0) issued before either is converted, then R(1) and
    L(1); 'chain': each conversion one issue behind within a step): no deadlock, no early overwrite; and a conversion
    carried across the step boundary ('deep') deadlocks."""
    for pipe in ("pairs", "chain"):
        for nblocks in range(0, 12):
            for seed in range(60):
                _run_pair(nblocks, seed, r0_first=True, pipe=pipe)
    with pytest.raises(AssertionError, match="deadlock"):
        _run_pair(6, 0, r0_first=True, pipe="deep")


@pytest.mark.parametrize("r0_first, ring", [(False, None), (True, None), (True, 1), (False, 2)])
@pytest.mark.parametrize("broken", ["early_l0", "early_r0"])
def test_pair_model_catches_a_broken_order(broken, r0_first, ring):
    caught = 0
    for seed in range(300):
        try:
            _run_pair(6, seed, broken=broken, r0_first=r0_first, ring=ring)
        except AssertionError as e:
            assert "rewritten" in str(e) or "still read" in str(e) or "holds step" in str(e), str(e)
            caught += 1
    assert caught > 0


def _run_pair_pers(items, seed, broken=None):
    """Config pers (session 79; measured 0.986x on an H200 and removed, the kernel at d33fcee: kept as the model of how
    a persistent pair program's barriers go on across items): one persistent program walks work items of items[n] blocks
    one after another with gluon_pair's default (session 67's order, odd, vst). The halves' and P barriers' phases go on
    by step across items, the exchange barriers' by step plus one an item (the row sums), q's by item. The producer
    refills the next item's first halves as the last item's last step releases them; O goes through q's buffer (each
    warpgroup's half), and a warpgroup stores the next item's q only once both warpgroups' O left it (qfree). Checked as
    in _run_pair, and: no S reads q's buffer unless it holds this item's q, no O is written into it while an S of this
    item may read it, no q over an O not yet stored. broken: 'no_qfree' (q stored without waiting for qfree), 'x_phase'
    (the exchange barriers' phases by step alone) must be caught."""
    rnd = random.Random(seed)
    full_l, full_r = [Barrier(1), Barrier(1)], [Barrier(1), Barrier(1)]
    free_l, free_r = [Barrier(1), Barrier(1)], [Barrier(1), Barrier(1)]
    xbar, pbar, qbar, qfree = [Barrier(1), Barrier(1)], [Barrier(1), Barrier(1)], Barrier(2), Barrier(2)
    half = {("L", 0): None, ("R", 0): None, ("L", 1): None, ("R", 1): None}
    x_val = [None] * 4
    p_val, p_reading = [None, None], [set(), set()]
    qbuf = [None, None]                     # what each warpgroup's rows of q's buffer hold: ("q", n) or ("O", n)
    s_reading = set()                       # (item, warpgroup) of S products that may read q's buffer
    starts = [0]
    for nb in items:
        starts.append(starts[-1] + (nb + 1) // 2)

    def holds(h, st, b):
        assert half[(h, st)] == b, f"{h}({st}) holds {half[(h, st)]}, block {b} still read (pers, {items})"

    def producer():
        for n, nb in enumerate(items):
            for j in range(starts[n + 1] - starts[n]):
                k = starts[n] + j
                for h, st in (("L", 0), ("R", 0), ("R", 1), ("L", 1)):
                    free, full = (free_l, full_l) if h == "L" else (free_r, full_r)
                    yield from _wait(free[st], (k & 1) ^ 1)
                    b = 2 * j + st
                    half[(h, st)] = f"none {n}:{b}" if b >= nb else (n, b)
                    yield
                    full[st].arrive()
                    yield

    def write_p(k, i):
        assert not p_reading[k], f"P buffer {k} rewritten at step {i} while step {p_reading[k]}'s P V reads it"
        p_val[k] = i

    def s_over(first, second, st, b, ph, n, h):
        full = {"L": full_l, "R": full_r}
        s_reading.add((n, h))
        for side in (first, second):
            yield from _wait(full[side][st], ph)
            holds(side, st, b)
            assert qbuf == [("q", n), ("q", n)], f"S of item {n} reads q's buffer holding {qbuf}"
            yield
        holds(first, st, b)
        holds(second, st, b)
        s_reading.discard((n, h))

    def wg(h):
        for n, nb in enumerate(items):
            k0, npairs = starts[n], starts[n + 1] - starts[n]
            if n > 0 and broken != "no_qfree":
                yield from _wait(qfree, (n - 1) & 1)
            assert qbuf[h] is None or qbuf[h] == ("O", n - 1) and (n - 1, "stored", h) in done, \
                f"q of item {n} over {qbuf[h]} not yet stored"
            assert qbuf[1 - h] != ("O", n - 1) or (n - 1, "stored", 1 - h) in done, \
                f"q of item {n} (warpgroup {h}) over the other warpgroup's O not yet stored"
            qbuf[h] = ("q", n)
            qbar.arrive()
            yield from _wait(qbar, n & 1)
            for i in range(npairs):
                k = k0 + i
                ph = k & 1
                xph = (k + (0 if broken == "x_phase" else n)) & 1
                b0, b1 = 2 * i, 2 * i + 1
                skip = b1 >= nb
                B0, B1 = (n, b0), (n, b1)
                if h == 0:
                    yield from s_over("L", "R", 0, B0, ph, n, 0)
                    x_val[0] = (n, i)
                    xbar[0].arrive()
                    holds("L", 0, B0)
                    yield
                    yield from _wait(xbar[1], xph)
                    assert x_val[1] == (n, i), f"warpgroup 0 read x_smem[1] of {x_val[1]} at {(n, i)}"
                    holds("R", 0, B0)
                    write_p(0, (n, i))
                    pbar[0].arrive()
                    yield
                    holds("L", 0, B0)
                    free_l[0].arrive()
                    yield from _wait(pbar[1], ph)
                    assert p_val[1] == (n, i)
                    yield from _wait(full_l[1], ph)
                    if not skip:
                        holds("L", 1, B1)
                        p_reading[1].add((n, i))
                        yield
                        holds("L", 1, B1)
                        p_reading[1].discard((n, i))
                    free_l[1].arrive()
                else:
                    if not skip:
                        yield from s_over("R", "L", 1, B1, ph, n, 1)
                    else:
                        yield from _wait(full_r[1], ph)
                    yield from _wait(xbar[0], xph)
                    assert x_val[0] == (n, i), f"warpgroup 1 read x_smem[0] of {x_val[0]} at {(n, i)}"
                    x_val[1] = (n, i)
                    xbar[1].arrive()
                    yield
                    write_p(1, (n, i))
                    pbar[1].arrive()
                    yield from _wait(pbar[0], ph)
                    assert p_val[0] == (n, i)
                    yield from _wait(full_r[0], ph)
                    holds("R", 0, B0)
                    p_reading[0].add((n, i))
                    if not skip:
                        holds("R", 1, B1)
                    yield
                    holds("R", 0, B0)
                    p_reading[0].discard((n, i))
                    free_r[0].arrive()
                    yield
                    if not skip:
                        holds("R", 1, B1)
                    free_r[1].arrive()
                yield
            x_val[2 + h] = (n, "l")
            xbar[h].arrive()
            yield from _wait(xbar[1 - h], (k0 + n + npairs) & 1)
            assert x_val[3 - h] == (n, "l"), f"warpgroup {h} read the row sums {x_val[3 - h]} at item {n}"
            assert not {x for x in s_reading if x[0] == n}, f"O of item {n} written over q while an S reads it"
            qbuf[h] = ("O", n)              # vst through q's buffer
            yield
            assert qbuf[h] == ("O", n), f"warpgroup {h}'s O of item {n} overwritten before its stores read it"
            done.add((n, "stored", h))
            qfree.arrive()
            yield

    done = set()
    _interleave([producer(), wg(0), wg(1)], rnd, f"pers, {items}, seed {seed}")


def test_pair_pers_protocol():
    """Config pers (session 79; _run_pair_pers): items of 0..7 blocks walked by one program under every interleaving
    tried, odd counts and empty items among them; q stored over the last O before the other warpgroup's stores read it
    (no qfree wait), and the exchange barriers' phases counted by step alone, are caught."""
    rnd = random.Random(5)
    for seed in range(150):
        items = [rnd.randrange(0, 8) for _ in range(rnd.randrange(1, 5))]
        _run_pair_pers(items, seed)
    for broken, items in (("no_qfree", [3, 3, 2]), ("x_phase", [2, 3, 1])):
        caught = 0
        for seed in range(200):
            try:
                _run_pair_pers(items, seed, broken=broken)
            except AssertionError:
                caught += 1
        assert caught > 0, broken
