"""Session 76: does sparse_mla_prefill wait on the host mid-call? Back-to-back calls timed by CUDA events, against
the same calls under torch.cuda.set_sync_debug_mode('warn') (which names each synchronizing op).
    PYTHONPATH=src python bench/s76/gaps.py"""
import warnings

import torch

from dsattn.bench.kernels_mla import overlap_indices
from dsattn.ops.sparse_mla import prefill_row_spec, sparse_mla_prefill

dev = torch.device("cuda")
for h, t in ((32, 1024), (32, 8192)):
    g = torch.Generator(device=dev).manual_seed(0)
    kv = torch.randn((16384, 576), generator=g, device=dev).to(torch.bfloat16)
    q = (torch.randn((t, h, 576), generator=g, device=dev) * 0.5).to(torch.bfloat16)
    idx = overlap_indices(t, 16384, 2048, dev)
    out = torch.empty((t, h, 512), dtype=torch.bfloat16, device=dev)
    lse = torch.empty((t, h), dtype=torch.float32, device=dev)
    rs = [torch.empty(s, dtype=d, device=dev) for s, d in prefill_row_spec(16384, 576)]
    run = lambda: sparse_mla_prefill(q, kv, idx, 576 ** -0.5, out=out, lse=lse, row_scratch=rs)  # noqa: E731
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        run()
    torch.cuda.set_sync_debug_mode(0)
    syncs = sorted({str(x.message)[:120] for x in w})
    print(f"{h} heads s_q {t}: {len(w)} synchronizing calls in one call: {syncs}")
    import traceback  # where: the first warning's stack is not kept by warnings; rerun with an error mode
    torch.cuda.set_sync_debug_mode("error")
    try:
        run()
    except RuntimeError:
        print("  " + "  ".join(traceback.format_exc().splitlines(True)[-8:]))
    torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    for n in (1, 10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n):
            run()
        e1.record()
        torch.cuda.synchronize()
        print(f"  {n} back-to-back calls: {e0.elapsed_time(e1) / n * 1000:.1f} us a call")
