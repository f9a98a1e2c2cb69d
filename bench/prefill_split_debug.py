"""One arm of the split sweep eagerly, synchronized (device debugging of an illegal address): heads, variant, tokens,
splits ('plan' for the plan). PYTHONPATH=src python bench/prefill_split_debug.py 8 native 32 16"""
import os
import sys
from types import SimpleNamespace

import torch

from dsattn.backend import calibrate
from dsattn.bench.kernels_mla import ours

heads, variant, tokens, splits = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
if splits != "plan":
    os.environ["DSATTN_PREFILL_SPLITS"] = splits
case = calibrate._case("prefill", tokens, heads, SimpleNamespace(device="cuda", s_kv=16384, topk=2048), {})
idx = case.indices
print("indices", tuple(idx.shape), "min", int(idx.min()), "max", int(idx.max()),
      "dups in a row", int(sum(int(r[r >= 0].numel() - r[r >= 0].unique().numel()) for r in idx)))
fn, out, lse = ours(case, variant)
fn()
torch.cuda.synchronize()
ref = calibrate  # noqa
from dsattn.ops.sparse_mla.reference import sparse_mla_reference  # noqa: E402
ro, rl = sparse_mla_reference(case.q, case.kv, idx, case.sm_scale)
print("ok", heads, variant, tokens, splits, "max|out-ref|", float((out.float() - ro).abs().max()),
      "max|lse-ref|", float((lse - rl).abs()[torch.isfinite(rl)].max()))
