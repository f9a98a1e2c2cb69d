"""Session 78: does the row conversion run beside the first union lists (DSATTN_PREFILL_PDL)? One sparse_mla_prefill
call of issue 3's case (bench/s76/prof.py's make_call: bf16, topk 2048, overlap, s_kv 16384, row_scratch) with PDL 0
and 1: per call, from torch.profiler (20 calls back to back), each kernel's start and end relative to the call's first
kernel (means), and the call's span on the GPU; then the call as a CUDA-graph replay (CUDA events, median of 200).
    PYTHONPATH=src python bench/s78/pdl_trace.py [h:s_q ...]      (default 32:1024 32:8192)"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "s76"))
from prof import make_call  # noqa: E402

from dsattn.bench.common import kernel_events  # noqa: E402


def replay_us(run, n=200):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        run()
        with torch.cuda.graph(g, stream=s):
            run()
    torch.cuda.current_stream().wait_stream(s)
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return sorted(ts)[n // 2]


def main():
    dev = torch.device("cuda")
    for c in sys.argv[1:] or ["32:1024", "32:8192"]:
        h, t = (int(x) for x in c.split(":"))
        run = make_call(h, t, dev)
        for pdl in ("0", "1", "0", "1"):
            os.environ["DSATTN_PREFILL_PDL"] = pdl
            ev = kernel_events(run, 20)
            k = len(ev) // 20
            rel = {}
            spans = []
            for i in range(20):
                grp = ev[i * k:(i + 1) * k]
                t0 = min(s for s, _, _ in grp)
                spans.append(max(e for _, e, _ in grp) - t0)
                for j, (s, e, name) in enumerate(grp):
                    r = rel.setdefault((j, name[:40]), [0.0, 0.0])
                    r[0] += (s - t0) / 20
                    r[1] += (e - t0) / 20
            print(f"{h} heads s_q {t} PDL {pdl}: span {sum(spans) / 20:.1f} us a call (profiler), replay "
                  f"{replay_us(run):.1f} us (median of 200)", flush=True)
            for (j, name), (s, e) in sorted(rel.items()):
                print(f"    {name:40s} {s:8.1f} -> {e:8.1f} us", flush=True)
    os.environ.pop("DSATTN_PREFILL_PDL", None)


if __name__ == "__main__":
    main()
