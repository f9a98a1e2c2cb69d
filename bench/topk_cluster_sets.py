"""The Gluon select with one row over a thread-block cluster (gluon_select's CTAS), row by row against torch.topk on
the GPU: how many of each row's k columns are missing or extra, how many each CTA's stretch of the row gave against
the reference, the smallest selected logit against the k-th largest, whether the row is sorted, whether anything was
written past the output's rows, and one row alone against the same row in a batch. Session 49 found the launcher's
rounding bug with it (each CTA's last columns belonged to none: 16 / 32 / ~32 of 2048 wrong at 2 / 4 / 8 CTAs).

    PYTHONPATH=src python bench/topk_cluster_sets.py
"""
import torch

from dsattn.ops.topk import gluon_select

torch.manual_seed(0)
dev = "cuda"
for (w, k, ctas, warps) in [(4160, 2048, 2, None), (4096, 2048, 4, None), (8192, 2048, 8, None), (4160, 2048, 1, None)]:
    rows = 3
    x = torch.randn(rows, w, device=dev)
    lengths = torch.full((rows,), w, device=dev, dtype=torch.int32)
    out = torch.full((rows + 1, k), -7, dtype=torch.int32, device=dev)
    cap = 1 << (w - 1).bit_length()
    gluon_select.launch_select_rows(x, lengths, k, out[:rows], cap, num_warps=warps, ctas=ctas)
    torch.cuda.synchronize()
    span, cols = gluon_select.cluster_columns(w, cap, ctas)
    for r in range(rows):
        got = out[r]
        ref = x[r].topk(k).indices.sort().values
        kth = x[r].topk(k).values[-1]
        gs = set(got.tolist()); rs = set(ref.tolist())
        per = [int(((got >= c * span) & (got < (c + 1) * span)).sum()) for c in range(ctas)]
        rper = [int(((ref >= c * span) & (ref < (c + 1) * span)).sum()) for c in range(ctas)]
        sel = x[r][got.clamp(min=0).long()]
        print(f"w {w} c {ctas} row {r}: distinct {len(gs)} missing {len(rs - gs)} extra {len(gs - rs)} per-CTA {per} "
              f"ref {rper} min sel {sel.min().item():.4f} kth {kth.item():.4f} "
              f"sorted {bool((got[1:] > got[:-1]).all())} "
              f"extra-min {min(x[r][list(gs - rs)].tolist()) if gs - rs else None}")
        print("   missing cols:", sorted(rs - gs)[:40])
    print("row past the end (should be -7):", int((out[rows] != -7).sum()))
    # one row alone
    out1 = torch.full((2, k), -7, dtype=torch.int32, device=dev)
    gluon_select.launch_select_rows(x[:1], lengths[:1], k, out1[:1], cap, num_warps=warps, ctas=ctas)
    print("alone equal to first:", torch.equal(out1[0], out[0]), "past:", int((out1[1] != -7).sum()))
