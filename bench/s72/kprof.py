# Session 72: per-kernel GPU times of one sparse_mla_prefill call over converted rows (row_scratch), by
# torch.profiler (CUDA activities): each kernel's mean duration over 20 calls (each followed by a synchronize) and the
# call's span (first kernel's start to last kernel's end, mean; it includes the host's launch work between kernels),
# issue 3's case.
# (Its run in bench/results/s72/s72_kprof_h100.log, at dc7f84e / 79e4d79, timed each case with the conversion before
# the union launch (FUSE=0) and inside it (FUSE=1, CONV_ROWS rows a conversion program); that conversion was
# removed after, notes/sparse_mla.md session 72.)
#   PYTHONPATH=src python bench/s72/kprof.py [h:s_q,...]
import collections, sys, torch
from torch.profiler import ProfilerActivity, profile
from dsattn.bench.kernels_mla import prefill_case
from dsattn.ops.sparse_mla import prefill_row_spec, sparse_mla_prefill
from dsattn.ops.sparse_mla.grouping import prefill_scratch_spec

dev = torch.device("cuda")
for c in (sys.argv[1] if len(sys.argv) > 1 else "32:1024,16:1024,32:8192").split(","):
    h, s_q = (int(v) for v in c.split(":"))
    case = prefill_case(s_q, h, dev)
    scratch = [torch.empty(s, dtype=dt, device=dev) for s, dt in prefill_scratch_spec(s_q, h, case.indices.shape[1])]
    rs = [torch.empty(s, dtype=dt, device=dev) for s, dt in prefill_row_spec(case.kv.shape[0])]
    po = torch.empty(s_q, h, 512, dtype=torch.bfloat16, device=dev)
    pl = torch.empty(s_q, h, dtype=torch.float32, device=dev)

    def call():
        sparse_mla_prefill(case.q, case.kv, case.indices, case.sm_scale, out=po, lse=pl, variant="native",
                           scratch=scratch, row_scratch=rs)
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    n = 20
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            call()
            torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    ev.sort(key=lambda e: e.time_range.start)
    per = collections.defaultdict(list)
    for e in ev:
        per[e.name[:40]].append(e.time_range.end - e.time_range.start)
    k = len(ev) // n
    spans = [ev[i * k + k - 1].time_range.end - ev[i * k].time_range.start for i in range(n)] if k else []
    kern = ", ".join(f"{name} {sum(v) / len(v):.1f}" for name, v in per.items())
    print(f"{h} heads s_q {s_q}: {k} kernels a call, span {sum(spans) / max(1, len(spans)):.1f} us; {kern}", flush=True)
