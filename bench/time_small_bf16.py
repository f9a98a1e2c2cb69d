# Session 61 (run in session 62 on an H100, bench/results/small_cvt_asm_time_s62_h100.json): gluon_small's bf16-row
# decode (DSATTN_SPARSE_MLA_IMPL=gluon), 512 tokens, topk 2048,
# `uniform` indices over 131072 slots, block size 64, GluonConfig.cvt_asm 0 against 1 (launch.gluon_config patched):
# ms a call by triton.testing.do_bench (median, L2 flushed) at 8 / 16 / 32 heads, ROUNDS alternating rounds, and the
# ratio of the medians. Usage: PYTHONPATH=src python bench/time_small_bf16.py [rounds] [json out]
import dataclasses, json, os, statistics, sys, torch, triton
os.environ["DSATTN_SPARSE_MLA_IMPL"] = "gluon"
from dsattn.ops.sparse_mla import launch, sparse_mla_decode
from dsattn.bench.kernels_mla import uniform_indices
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
slots, t = 131072, 512
kv = torch.randn(slots, 576, generator=g, device=dev).to(torch.bfloat16).view(slots // 64, 64, 576)
idx = uniform_indices(t, slots, 2048, dev, seed=0)
default = launch.gluon_config
res = {}
for h in (8, 16, 32):
    q = (torch.randn(t, h, 576, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    out = torch.empty(t, h, 512, dtype=torch.bfloat16, device=dev)
    lse = torch.empty(t, h, dtype=torch.float32, device=dev)
    fn = lambda: sparse_mla_decode(q, kv, idx, 576 ** -0.5, out=out, lse=lse, variant="native")
    ms = {0: [], 1: []}
    for _ in range(rounds):
        for c in (0, 1):
            launch.gluon_config = lambda *a, c=c, **k: dataclasses.replace(default(*a, **k), cvt_asm=c)
            fn()
            ms[c].append(triton.testing.do_bench(fn, warmup=50, rep=300))
    med = {c: statistics.median(v) for c, v in ms.items()}
    res[h] = dict(ms_cvt_asm0=ms[0], ms_cvt_asm1=ms[1], speedup=med[0] / med[1])
    print(f"h{h}: cvt_asm 0 {med[0]:.4f} ms, 1 {med[1]:.4f} ms, 1 is {med[0] / med[1]:.3f}x "
          f"(rounds {[round(x, 4) for x in ms[0]]} / {[round(x, 4) for x in ms[1]]})", flush=True)
launch.gluon_config = default
if len(sys.argv) > 2:
    json.dump(dict(device=torch.cuda.get_device_name(), tokens=t, topk=2048, slots=slots, results=res),
              open(sys.argv[2], "w"), indent=1)
