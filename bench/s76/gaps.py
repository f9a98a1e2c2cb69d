"""Session 76: does sparse_mla_prefill wait on the host mid-call? Back-to-back calls timed by CUDA events, against
the same calls under torch.cuda.set_sync_debug_mode('warn') (which names each synchronizing op).
    PYTHONPATH=src python bench/s76/gaps.py"""
import os
import sys
import traceback
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prof import make_call  # noqa: E402

from dsattn.bench.common import group_ms  # noqa: E402

dev = torch.device("cuda")
for h, t in ((32, 1024), (32, 8192)):
    run = make_call(h, t, dev)
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
    torch.cuda.set_sync_debug_mode("error")  # where (a warning keeps no stack)
    try:
        run()
    except RuntimeError:
        print("  " + "  ".join(traceback.format_exc().splitlines(True)[-8:]))
    torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    for n in (1, 10):
        print(f"  {n} back-to-back calls: {group_ms(run, n, True) * 1000:.1f} us a call")
