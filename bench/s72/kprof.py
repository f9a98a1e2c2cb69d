# Session 72: per-kernel GPU times of one sparse_mla_prefill call over converted rows (row_scratch), by
# torch.profiler through bench.common.kernel_events / call_spans: each kernel's mean duration over 20 calls back to
# back and the call's mean span on the GPU (first kernel's start to last kernel's end), issue 3's case.
# (Its runs in bench/results/s72/s72_kprof_h100.log and s72_kprof_rows_h100.log, at dc7f84e / 79e4d79, were of an
# earlier form: a synchronize after each call, so their spans include the host's launch work between kernels; and
# each case timed with the conversion before the union launch (FUSE=0) and inside it (FUSE=1, CONV_ROWS rows a
# conversion program), a conversion removed after, notes/sparse_mla.md session 72.)
#   PYTHONPATH=src python bench/s72/kprof.py [h:s_q,...]
import sys, torch
from dsattn.bench.common import call_spans, kernel_events
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
    n = 20
    span, own = call_spans(kernel_events(call, n), n)
    kern = ", ".join(f"{name[:40]} {us:.1f}" for name, us in own.items())
    print(f"{h} heads s_q {s_q}: span {span:.1f} us; {kern}", flush=True)
