# session 58 (call 9, run as old37/probe.py from an untracked copy): the kernels one prefill call (issue 3's case, s_q 1024,
# H heads: argv[1], default 64) launches and their GPU times under torch.profiler; run with PYTHONPATH at any tree's src.
import collections, sys, torch
from dsattn.bench.kernels_mla import prefill_case, ours
from torch.profiler import profile, ProfilerActivity
h = int(sys.argv[1]) if len(sys.argv) > 1 else 64
case = prefill_case(1024, h, torch.device("cuda"))
fn = ours(case)[0]
for _ in range(3):
    fn()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
tot = collections.defaultdict(lambda: [0, 0.0])
for e in prof.events():
    if e.device_type == torch.autograd.DeviceType.CUDA:
        tot[e.name][0] += 1
        tot[e.name][1] += e.device_time if hasattr(e, "device_time") else e.cuda_time
for name, (n, us) in sorted(tot.items(), key=lambda kv: -kv[1][1]):
    print(f"  {n / 10:5.1f} a call  {us / n:9.1f} us each  {name[:90]}")
