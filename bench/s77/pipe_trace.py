"""Session 77: why gluon_prefill.PIPE (a grouped call's chunks on two streams) ran 0.63x at 32 heads s_q 1024 in
`dsattn bench ab` (H100): per PIPE 0 / 1, the mean time of a call as 20 eager calls back to back, as one call alone
(events around it after a sync), and as CUDA-graph replays; then one profiled call's kernels (stream, start from the
call's first kernel, duration). Ran at e2519b3 (bench/results/s77/pipe_trace_h100.log); PIPE was removed after it,
so on a later tree both rows run the one-stream call.
    PYTHONPATH=src python bench/s77/pipe_trace.py [heads:s_q ...]"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s76"))
from prof import make_call  # noqa: E402

from dsattn.bench.common import graph_replay  # noqa: E402


def ms(fn, n):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    for _ in range(n):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / n


def main():
    dev = torch.device("cuda")
    for case in sys.argv[1:] or ["32:1024"]:
        h, t = (int(x) for x in case.split(":"))
        for pipe in ("0", "1"):
            os.environ["DSATTN_PF_PIPE"] = pipe
            run = make_call(h, t, dev)
            for _ in range(5):
                run()
            b2b = ms(run, 20)
            alone = min(ms(run, 1) for _ in range(10))
            g = graph_replay(run)
            rep = ms(g, 20)
            print(f"{h} heads s_q {t} PIPE {pipe}: back to back {b2b * 1e3:.1f} us, alone {alone * 1e3:.1f}, "
                  f"graph replays {rep * 1e3:.1f}")
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                run()
                torch.cuda.synchronize()
            ev = [e for e in p.events() if e.device_type.name == "CUDA" and "Memcpy" not in e.name]
            ev.sort(key=lambda e: e.time_range.start)
            if ev:
                t0 = ev[0].time_range.start
                for e in ev:
                    print(f"    stream {getattr(e, 'device_resource_id', '?'):>3} +{e.time_range.start - t0:8.1f} us "
                          f"{e.time_range.end - e.time_range.start:8.1f} us  {e.name[:40]}")


if __name__ == "__main__":
    main()
