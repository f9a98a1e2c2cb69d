# Session 68: config pre16 of gluon_prefill (the rows' latent converted to fp16 x 2^-8 once a row by
# kernels.f16_rows, so the producer's conversion pass in shared memory goes away) against the default, issue 3's
# prefill case (s_q 1024 unless argv[2], overlap indices, s_kv 16384), heads from argv[1] (default 8,16,32,64,128).
# Per head count: outputs bit-equal to the default (q as is and x 6), then CUDA-event times of alternating calls
# (default; f16_rows + pre16; pre16 alone; f16_rows alone), medians of 40 rounds of 5 calls each.
#   PYTHONPATH=src python bench/s68_pre16.py [heads] [s_q]
import dataclasses, statistics, sys, torch
from dsattn.bench.kernels_mla import prefill_case
from dsattn.ops.sparse_mla import gluon_prefill as gp
from dsattn.ops.sparse_mla.grouping import group_shape
from dsattn.ops.sparse_mla.kernels import f16_rows
heads = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "8,16,32,64,128").split(",")]
s_q = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
dev = torch.device("cuda")
for h in heads:
    case = prefill_case(s_q, h, dev)
    kv = case.kv
    kv16 = torch.empty_like(kv)
    base = gp.prefill_config(h)
    pre = dataclasses.replace(base, pre16=1)
    spec = gp.prefill_scratch_spec(s_q, h, case.indices.shape[1]) if group_shape(h)[1] > 1 else []
    scratch = [torch.empty(s, dtype=dt, device=dev) for s, dt in spec] or None
    outs = {k: (torch.empty(s_q, h, 512, dtype=torch.bfloat16, device=dev),
                torch.empty(s_q, h, dtype=torch.float32, device=dev)) for k in ("a", "b")}

    def run_a(q=case.q):
        gp.run_prefill_gluon(q, kv, case.indices, case.sm_scale, None, *outs["a"], scratch=scratch, config=base)

    def run_b(q=case.q, convert=True):
        if convert:
            f16_rows(kv, kv16)
        gp.run_prefill_gluon(q, kv16, case.indices, case.sm_scale, None, *outs["b"], scratch=scratch, config=pre)

    for scale in (1.0, 6.0):
        q = (case.q.float() * scale).to(torch.bfloat16)
        for o in outs.values():
            o[0].fill_(float("nan")); o[1].fill_(float("nan"))
        run_a(q); run_b(q)
        torch.cuda.synchronize()
        eq = torch.equal(outs["a"][0], outs["b"][0]) and torch.equal(outs["a"][1], outs["b"][1])
        d = (outs["a"][0].float() - outs["b"][0].float()).abs().max().item()
        print(f"{h} heads s_q {s_q} q x {scale:g}: pre16 bit-equal to the default: {eq} (max |diff| {d:.3e}, "
              f"nan {outs['b'][0].isnan().any().item()})", flush=True)
    ref16 = (kv[:, :512].float() * 2.0 ** -8).half()
    print(f"  f16_rows against torch's fp16(x x 2^-8): bit-equal {torch.equal(kv16[:, :512].view(torch.float16), ref16)}"
          f", RoPE copied {torch.equal(kv16[:, 512:], kv[:, 512:])}", flush=True)
    arms = {"default": run_a, "f16_rows+pre16": run_b, "pre16 alone": lambda: run_b(convert=False),
            "f16_rows alone": lambda: f16_rows(kv, kv16)}
    times = {k: [] for k in arms}
    for f in arms.values():
        f()
    for _ in range(40):
        for k, f in arms.items():
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(5):
                f()
            e1.record()
            torch.cuda.synchronize()
            times[k].append(e0.elapsed_time(e1) / 5)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"  ms: " + ", ".join(f"{k} {v:.4f}" for k, v in med.items())
          + f"; default / (f16_rows+pre16) {med['default'] / med['f16_rows+pre16']:.3f}x", flush=True)
