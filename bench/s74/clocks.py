# Session 74: does FlashMLA's padded prefill (issue 3's 32-head comparator: q zero-padded to 64 heads) run faster
# per block than its 64-head prefill over non-zero rows because the zero rows draw less power (higher SM clock under
# the card's power limit), and at what clock does the pair run? Per arm, ~1 s of calls queued back to back; the SM
# clock and the board power sampled (nvidia-smi) while the queue runs; time a call from CUDA events over the queue.
# Arms, issue 3's case (s_q 1024, overlap indices, s_kv 16384), alternated over ROUNDS rounds:
#   ours32   sparse_mla_prefill at 32 heads with row_scratch (the default there: the pair)
#   fm_pad   FlashMLA at 64 heads, q = the 32 heads + 32 zero heads (the table's flashmla:pad64)
#   fm_full  FlashMLA at 64 heads, q = the 32 heads + the 32 heads of the previous token (no zero rows)
#   PYTHONPATH=src:.peer python bench/s74/clocks.py [s_q] [rounds]
# (Its run in bench/results/s74/s74_a.log was at 85221ec, where ours32 set up the same call by hand: the scratch and
# row_scratch of prefill_scratch_spec / prefill_row_spec, variant native; kernels_mla.ours(rows=True) since.)
import datetime
import subprocess
import sys
import time

import torch

import peers
from dsattn.bench.kernels_mla import ours, prefill_case

dev = torch.device("cuda")
s_q = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
case = prefill_case(s_q, 32, dev)
kv, idx = case.kv[:, None], case.indices[:, None]
q_pad = torch.cat([case.q, torch.zeros_like(case.q)], 1).contiguous()
q_full = torch.cat([case.q, case.q.roll(1, 0)], 1).contiguous()
arms = {"ours32": ours(case, "native", rows=True)[0],  # with scratch and row_scratch, allocated once
        "fm_pad": lambda: peers.flashmla_sparse_prefill(q_pad, kv, idx, case.sm_scale, 512),
        "fm_full": lambda: peers.flashmla_sparse_prefill(q_full, kv, idx, case.sm_scale, 512)}


LOG = "/tmp/s74_clocks.csv"
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
                        "-lms", "50", "-f", LOG])


def window(t0, t1):
    """The samples taken between wall times t0 and t1: (clocks MHz, power W)."""
    out = []
    for line in open(LOG):
        f = [x.strip() for x in line.split(",")]
        try:
            t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            if t0 <= t <= t1:
                out.append((float(f[1]), float(f[2])))
        except (ValueError, IndexError):
            continue
    return out


for fn in arms.values():
    fn()
torch.cuda.synchronize()
time.sleep(1.0)
print(f"{torch.cuda.get_device_name()}; idle before: {window(time.time() - 0.8, time.time())[:3]}", flush=True)
rows = []
for rnd in range(rounds):
    for name, fn in arms.items():
        t = time.perf_counter()
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        per = (time.perf_counter() - t) / 20
        n = max(50, int(1.0 / per))  # ~1 s of calls
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.time()
        a.record()
        for _ in range(n):
            fn()
        b.record()
        b.synchronize()
        t1 = time.time()
        rows.append((rnd, name, a.elapsed_time(b) / n, n, t0 + 0.3, t1))
        time.sleep(1.0)  # cool-down between arms
time.sleep(0.2)
smi.terminate()
smi.wait()
for rnd, name, ms, n, t0, t1 in rows:
    clk = window(t0, t1)
    c = [x for x, _ in clk] or [float("nan")]
    w = [y for _, y in clk] or [float("nan")]
    print(f"round {rnd} {name}: {ms * 1e3:.1f} us a call ({n} calls, {t1 - t0 + 0.3:.2f} s); SM clock "
          f"{min(c):.0f}-{max(c):.0f} MHz (mean {sum(c) / len(c):.0f}, {len(c)} samples); power mean "
          f"{sum(w) / len(w):.0f} W, max {max(w):.0f}", flush=True)
