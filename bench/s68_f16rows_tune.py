# Session 68: kernels.f16_rows (sparse_mla_prefill's row conversion) over issue 3's 16384 bf16 rows and 131072: CUDA-event
# times of block_rows x num_warps, beside a plain copy of the same rows (torch .copy_, the bytes' floor here).
#   PYTHONPATH=src python bench/s68_f16rows_tune.py
import statistics, torch
from dsattn.ops.sparse_mla.kernels import f16_rows
for n in (16384, 131072):
    src = torch.randn(n, 576, device="cuda").to(torch.bfloat16)
    dst = torch.empty_like(src)
    keys = torch.randperm(n, device="cuda").to(torch.int32)
    kmap = torch.empty(n, dtype=torch.int32, device="cuda")

    def t(fn, reps=20, rounds=15):
        fn()
        torch.cuda.synchronize()
        out = []
        for _ in range(rounds):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(reps):
                fn()
            e1.record()
            torch.cuda.synchronize()
            out.append(e0.elapsed_time(e1) / reps * 1000)
        return statistics.median(out)
    res = [f"copy_ {t(lambda: dst.copy_(src)):.1f}"]
    for br in (8, 16, 32, 64):
        for w in (4, 8):
            res.append(f"br{br}/w{w} {t(lambda: f16_rows(src, dst, block_rows=br, num_warps=w)):.1f}")
    res.append(f"keyed br16/w4 {t(lambda: f16_rows(src, dst, keys, kmap)):.1f}")
    res.append(f"keyed br32/w8 {t(lambda: f16_rows(src, dst, keys, kmap, block_rows=32, num_warps=8)):.1f}")
    print(f"{n} rows, us: " + ", ".join(res), flush=True)
