# Session 70 (not yet run): the host work of one eager sparse_mla_prefill call, issue 3's prefill case (overlap
# indices, s_kv 16384, topk 2048). Call 2's eager arms back to back read 0.326 ms at 8 heads s_q 1024 against
# do_bench's 0.219 (notes/sparse_mla.md, session 70): if the gap is the host's, a call costs ~0.3 ms of host work.
# Per case and arm (plain; with row_scratch, converting where dispatch.prefill_converts_rows agrees): the host time of
# a call issued onto an idle, synchronized GPU (perf_counter from the call to its return, no sync inside the window),
# the median of 50; then the GPU time of the same call as a CUDA-graph replay (host work left out). Host > GPU means
# an eager engine that queues nothing else waits on the host.
#   PYTHONPATH=src python bench/s70/host_profile.py [h:s_q,...]
# PREDICTION (H100): host 0.15-0.35 ms at every head count (argument checks, 2-4 Triton launches, one Gluon launch),
# GPU 0.22 / 0.34 / 0.45 ms at 8 / 16 / 32 heads (issue 3's table, session 70).
import sys, torch
from dsattn.bench.common import alternating_medians, graph_replay, host_ms
from dsattn.bench.kernels_mla import ours, prefill_case

cases = [tuple(int(v) for v in c.split(":")) for c in
         (sys.argv[1] if len(sys.argv) > 1 else "8:1024,16:1024,32:1024,32:8192").split(",")]
dev = torch.device("cuda")
print(torch.cuda.get_device_name(), flush=True)
for h, s_q in cases:
    case = prefill_case(s_q, h, dev)
    for name, rows in (("plain", False), ("+rows", True)):
        fn = ours(case, rows=rows)[0]
        fn()
        host = host_ms(fn)  # (session 71: bench.common.host_ms, the loop this script had; min no longer printed)
        try:
            gpu = alternating_medians({"graph": graph_replay(fn)}, rounds=20, reps=5)["graph"]
        except RuntimeError as e:  # a capture that fails: the eager numbers still print
            print(f"  (graph capture failed: {e!r})", flush=True)
            gpu = float("nan")
        eager = alternating_medians({"eager": fn}, rounds=20, reps=5)["eager"]
        print(f"{h} heads s_q {s_q} {name}: host {host:.4f} ms a call, "
              f"GPU (graph replays) {gpu:.4f}, eager back to back {eager:.4f}", flush=True)
