# Session 71: where an eager sparse_mla_prefill call's host work goes, and what do_bench makes of it. Issue 3's
# table (do_bench, L2 flushed between calls) read 16 heads s_q 1024 '+rows' (converted, ratio 1) at 0.441 ms against
# 0.289 as CUDA-graph replays (bench/s70/convert_ratio.py GRAPH=1), and 32 heads' at 0.437 against 0.438. Per case:
# host ms a call (median of 50 calls each issued onto an idle GPU), do_bench (the table's timer), the graph replay;
# then cProfile over 200 calls back to back, the top functions by own time.
#   PYTHONPATH=src python bench/s71/host_cprof.py [h:s_q:rows,...]
# PREDICTION: converting calls spend >= 0.06 ms more host time than plain ones, in f16_rows' launch and the pre16 /
# pair config lookup; do_bench at 16 heads +rows within 10% of host time + the main kernel's GPU time.
import cProfile, io, pstats, sys, torch
from dsattn.bench.common import graph_replay, host_ms, time_ms
from dsattn.bench.kernels_mla import ours, prefill_case

cases = [tuple(int(v) for v in c.split(":")) for c in
         (sys.argv[1] if len(sys.argv) > 1 else "16:1024:1,16:1024:0,32:1024:1").split(",")]
dev = torch.device("cuda")
print(torch.cuda.get_device_name(), flush=True)
for h, s_q, rows in cases:
    case = prefill_case(s_q, h, dev)
    fn = ours(case, rows=bool(rows))[0]
    fn()
    host = host_ms(fn)
    db = time_ms(fn, rep_ms=200)
    g = graph_replay(fn)
    gr = time_ms(g, rep_ms=200)
    print(f"{h} heads s_q {s_q} rows {rows}: host {host:.4f} ms a call, do_bench {db:.4f}, "
          f"graph replay (do_bench) {gr:.4f}", flush=True)
    pr = cProfile.Profile()
    torch.cuda.synchronize()
    pr.enable()
    for _ in range(200):
        fn()
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
    print("\n".join(line[:160] for line in s.getvalue().splitlines()[4:34]), flush=True)
