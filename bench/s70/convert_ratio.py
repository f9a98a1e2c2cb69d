# Session 70: dispatch.PREFILL_CONVERT_RATIO now that gluon_pair runs over converted rows at 1-32 heads. The ratio
# (session 68) was set against the split consumer over converted rows: 16 heads at ratio 1 (s_q 1024, 16384 rows)
# 0.999x, so 2. The pair is 1.13x over the split consumer (session 69, s_q 8192), so ratio 1 may now pay.
# Per case (issue 3's prefill case: overlap indices, s_kv 16384, topk 2048): sparse_mla_prefill with a row_scratch,
# the ratio monkeypatched per arm: 'keep' (ratio inf: never converts, the plain kernel) against 'conv' (ratio 0:
# always converts, gluon_pair), CUDA-event medians of alternating rounds; FlashMLA padded to 64 heads in the same
# rounds; 'split' (since call 2): converted rows under the split consumer (DSATTN_PF_CONFIG=pair=0), the pair's own
# share. Outputs of each arm against the fp32 reference (tokens 0..63, q x 1).
#   PYTHONPATH=src:.peer [GRAPH=1] python bench/s70/convert_ratio.py [h:s_q,...]
# PREDICTION (H100): conv/keep at ratio 1 (16:1024, 32:512, 8:2048) 1.05-1.12x (kernel 13% faster, conversion 20 us
# of ~340 us); at ratio 0.5 (8:1024, 16:512) 0.98-1.06x.
# Session 70's call 2 (eager arms, H100, bench/results/s70/s70_call2_h100.log): 16:1024 conv over keep 1.129x
# (0.3328 / 0.3758 ms), 8:1024 0.847x (0.3849 / 0.3259). But issue 3's table (do_bench, 08257a2, the same card kind)
# read the 8- and 16-head calls at 0.219 / 0.343 ms: back to back, these eager arms may be bound by the host's
# launch work (checks, the union lists' launches, f16_rows'), so GRAPH=1 times CUDA-graph replays of each arm
# (host work left out, as a serving engine replaying a step); FlashMLA stays eager.
import os, sys, torch
from dsattn.bench.common import alternating_medians, graph_replay
from dsattn.bench.kernels_mla import _peers, flashmla, prefill_case
from dsattn.ops.sparse_mla import dispatch, prefill_row_spec, sparse_mla_prefill
from dsattn.ops.sparse_mla.grouping import group_shape, prefill_scratch_spec
from dsattn.ops.sparse_mla.reference import sparse_mla_reference

cases = [tuple(int(v) for v in c.split(":")) for c in
         (sys.argv[1] if len(sys.argv) > 1 else "16:1024,8:1024,32:512,16:512,8:2048").split(",")]
dev = torch.device("cuda")
peers = _peers()
print(torch.cuda.get_device_name(), "PREFILL_CONVERT_RATIO", dispatch.PREFILL_CONVERT_RATIO,
      "graph replays" if os.environ.get("GRAPH", "0") == "1" else "eager", flush=True)
for h, s_q in cases:
    case = prefill_case(s_q, h, dev)
    n = case.kv.shape[0]
    spec = prefill_scratch_spec(s_q, h, case.indices.shape[1]) if group_shape(h)[1] > 1 else []
    scratch = [torch.empty(s, dtype=dt, device=dev) for s, dt in spec] or None
    rs = [torch.empty(s, dtype=dt, device=dev) for s, dt in prefill_row_spec(n)]
    outs = {k: (torch.empty(s_q, h, 512, dtype=torch.bfloat16, device=dev),
                torch.empty(s_q, h, dtype=torch.float32, device=dev)) for k in ("keep", "conv", "split")}

    def arm(name, ratio, env=""):
        def f():
            dispatch.PREFILL_CONVERT_RATIO = ratio
            os.environ["DSATTN_PF_CONFIG"] = env
            o, l = outs[name]
            sparse_mla_prefill(case.q, case.kv, case.indices, case.sm_scale, out=o, lse=l, variant="native",
                               scratch=scratch, row_scratch=rs)
            os.environ["DSATTN_PF_CONFIG"] = ""
        return f

    # split: converted rows under the split consumer (pair=0), so that conv / split is the pair's own share
    arms = {"keep": arm("keep", float("inf")), "conv": arm("conv", 0.0), "split": arm("split", 0.0, "pair=0")}
    for o, l in outs.values():
        o.fill_(float("nan")); l.fill_(float("nan"))
    for f in arms.values():
        f()
    torch.cuda.synchronize()
    sl = slice(0, 64)
    ref_o, ref_l = sparse_mla_reference(case.q[sl].float(), case.kv, case.indices[sl], case.sm_scale)
    for k, (o, l) in outs.items():
        ex = ((o[sl].float() - ref_o).abs() - (2e-3 + 3 / 128 * ref_o.abs())).max().item()
        lr = ((l[sl] - ref_l).abs() / ref_l.abs().clamp_min(1)).max().item()
        print(f"{h} heads s_q {s_q} {k}: nan {o.isnan().any().item() or l.isnan().any().item()}, max excess "
              f"{ex:.2e} ({'within' if ex <= 0 else 'OUTSIDE'}), lse rel {lr:.1e}", flush=True)
    if os.environ.get("GRAPH", "0") == "1":  # each arm's ratio is set inside it, so the capture takes its path
        arms = {k: graph_replay(f) for k, f in arms.items()}
    fm = flashmla(case, peers, max(64, h))
    if fm is not None:
        arms["flashmla"] = fm[0]
    med = alternating_medians(arms, rounds=30, reps=5)
    line = ", ".join(f"{k} {v:.4f}" for k, v in med.items())
    r = s_q * h / n
    extra = (f"; conv over keep {med['keep'] / med['conv']:.3f}x (ratio {r:g}), conv over split "
             f"{med['split'] / med['conv']:.3f}x")
    if "flashmla" in med:
        extra += f"; over FlashMLA keep {med['flashmla'] / med['keep']:.3f}x, conv {med['flashmla'] / med['conv']:.3f}x"
    print(f"  {h} heads s_q {s_q} ms: {line}{extra}", flush=True)
dispatch.PREFILL_CONVERT_RATIO = 2.0
