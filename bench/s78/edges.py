# Session 78: what a gluon_pair program spends outside its steps. One sparse_mla_prefill call over converted rows at
# issue 3's case with DSATTN_PF_PROFILE=32: besides the steps' points (bench/s74/stamps.py), each consumer warpgroup
# stamps its entry, q stored, and its epilogue's stores issued, by %clock64 and (entry, stores) by %globaltimer
# (gluon_pair.stamp_buffer's last slot). Printed: per program the prologue (entry -> first step), q's load, the
# steps, the epilogue (last step's end -> stores issued), the SM's clock; per SM the gap from one program's stores to
# the next program's entry, the idle time before its first program and after its last, and how many programs it ran;
# the kernel's span by the stamps against its time by the profiler (plain and stamped, 20 calls each).
#   PYTHONPATH=src python bench/s78/edges.py [h:s_q,...] [config]     (config: DSATTN_PF_CONFIG's text, default
#   'pair=1,lazy=1')
#   python bench/s78/edges.py --fake     (CPU: the report over made-up stamps)
import os
import sys

import torch

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
E = 47  # gluon_pair.STAMP_STEPS - 1: the program slot


def q(x, ps=(0.1, 0.5, 0.9)):
    x = x.double()
    return "mean %.0f (p10 %.0f, median %.0f, p90 %.0f)" % ((x.mean(),) + tuple(torch.quantile(x, p) for p in ps))


def report(st, kernel_us=None):
    """st: [P, 2, 48, 10] int64 (stamp_buffer). Prints the program and SM figures."""
    st = st.long()
    run = st[:, 0, E, 0] != 0
    st = st[run]
    steps = st[:, :, :E]
    has = steps[..., 0] != 0  # [P, 2, S]
    first = steps[:, :, 0, 0]  # [P, 2]
    last_end = torch.where(has, steps[..., 6], torch.zeros_like(steps[..., 6])).amax(2)
    entry, qdone, stores = st[:, :, E, 0], st[:, :, E, 1], st[:, :, E, 2]
    g_in, g_out = st[:, :, E, 8], st[:, :, E, 9]
    sm = st[:, 0, 0, 7]
    nsteps = has[:, 0].sum(1)
    ghz = (stores - entry).double() / (g_out - g_in).double()
    print(f"  {st.shape[0]} programs on {len(set(sm.tolist()))} SMs; steps a program {q(nsteps.float())}")
    print(f"  SM clock (cycles / ns, entry -> stores): {q(ghz.flatten() * 1000)} MHz")
    for w in (0, 1):
        print(f"  warpgroup {w}: entry -> q stored {q(qdone[:, w] - entry[:, w])} cycles; entry -> first step "
              f"{q(first[:, w] - entry[:, w])}; steps {q(last_end[:, w] - first[:, w])}; last step's end -> stores "
              f"issued {q(stores[:, w] - last_end[:, w])}")
    # a program's time on its SM: the earlier entry to the later stores (ns)
    p_in, p_out = g_in.amin(1), g_out.amax(1)
    t0, t1 = int(p_in.min()), int(p_out.max())
    span = (t1 - t0) / 1e3
    prog_ns = (p_out - p_in).double()
    print(f"  a program, entry -> stores (ns): {q(prog_ns)}; kernel span by the stamps {span:.1f} us"
          + (f" (profiler: {kernel_us:.1f} us)" if kernel_us else ""))
    gaps, head, tail, count, busy = [], [], [], [], []
    for s in sorted(set(sm.tolist())):
        sel = (sm == s).nonzero().flatten()
        order = sel[torch.argsort(p_in[sel])]
        ins, outs = p_in[order], p_out[order]
        if len(order) > 1:
            gaps.append(ins[1:] - outs[:-1])
        head.append(int(ins[0]) - t0)
        tail.append(t1 - int(outs[-1]))
        count.append(len(order))
        busy.append(float((outs - ins).sum()))
    gaps = torch.cat(gaps).double() if gaps else torch.zeros(1, dtype=torch.float64)
    print(f"  per SM: programs {q(torch.tensor(count, dtype=torch.float64))}; one program's stores -> the next's "
          f"entry (ns) {q(gaps)}; idle before its first program (ns) {q(torch.tensor(head, dtype=torch.float64))}; "
          f"idle after its last (ns) {q(torch.tensor(tail, dtype=torch.float64))}")
    b = torch.tensor(busy, dtype=torch.float64)
    in_steps = (last_end - first).double().amax(1).sum() / ghz.mean() / len(count) / 1e3
    print(f"  per SM: inside programs {b.mean() / 1e3:.1f} us of the {span:.1f} us span "
          f"({b.mean() / 1e3 / span:.1%}); inside steps {in_steps:.1f} us", flush=True)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--fake":
    P = 12
    st = torch.zeros(P, 2, 48, 10, dtype=torch.int64)
    for p in range(P):
        s, r = p % 4, p // 4
        base_ns = 1000 + r * 60000 + s * 100
        base = 2 * base_ns  # 2 GHz
        for w in (0, 1):
            st[p, w, E, 0] = base
            st[p, w, E, 8] = base_ns
            st[p, w, E, 1] = base + 3000
            for i in range(20):
                st[p, w, i, 0] = base + 6000 + i * 5000
                st[p, w, i, 6] = base + 6000 + i * 5000 + 4900
            st[p, w, E, 2] = base + 6000 + 20 * 5000 + 4000
            st[p, w, E, 9] = base_ns + (6000 + 20 * 5000 + 4000) // 2
        st[p, 0, 0, 7] = s
    report(st)
    sys.exit(0)

from dsattn.bench.common import call_spans, kernel_events  # noqa: E402
from dsattn.bench.kernels_mla import ours, prefill_case  # noqa: E402
from dsattn.ops.sparse_mla import gluon_pair  # noqa: E402

cfg = sys.argv[2] if len(sys.argv) > 2 else "pair=1,lazy=1"
os.environ["DSATTN_PF_CONFIG"] = cfg
for c in (sys.argv[1] if len(sys.argv) > 1 else "32:1024").split(","):
    h, s_q = (int(v) for v in c.split(":"))
    case = prefill_case(s_q, h, dev)
    call = ours(case, "native", rows=True)[0]
    times = {}
    for prof in ("0", "32", "0", "32"):
        os.environ["DSATTN_PF_PROFILE"] = prof
        _, own = call_spans(kernel_events(call, 20), 20)
        times.setdefault(prof, []).append(own.get("pair_prefill_kernel", float("nan")))
    os.environ["DSATTN_PF_PROFILE"] = "32"
    gluon_pair.LAST_STAMPS = None
    call()
    torch.cuda.synchronize()
    os.environ["DSATTN_PF_PROFILE"] = "0"
    if gluon_pair.LAST_STAMPS is None:
        print(f"{h} heads s_q {s_q} ({cfg}): no pair_prefill_kernel launch", flush=True)
        continue
    print(f"{h} heads s_q {s_q} ({cfg}): pair_prefill_kernel plain {times['0']} us, stamped {times['32']} us",
          flush=True)
    report(gluon_pair.LAST_STAMPS.cpu(), min(times["32"]))
