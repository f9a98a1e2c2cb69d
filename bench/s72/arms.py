# Session 72: gluon_pair's options (PrefillConfig.sfold, .prel) against the pair as shipped, over converted rows
# (sparse_mla_prefill with row_scratch, DSATTN_PF_CONFIG naming each arm's config), beside FlashMLA padded to 64
# heads, issue 3's prefill case (overlap indices, s_kv 16384). Per case and arm: against the fp32 reference (tokens
# 0..63, q x 1 and x 6: within 2e-3 + 3/128, lse 1e-5), poisoned outputs fully written; then CUDA-event medians of
# 30 rounds (5 calls a round at s_q <= 1024, 2 above), the arms in a shuffled order each round, and each arm's median
# of per-round ratios to the first arm (> 1: faster).
# (Its run in bench/results/s72/s72_arms_h100.log, at dc7f84e, had a first arm FUSE=0 (DSATTN_FUSE_ROWS, f16_rows
# before the union launch; the conversion inside that launch was removed after, notes/sparse_mla.md session 72) and
# the arms in a fixed order: the first arm, timed right after FlashMLA's, read 2-3% slow against `dsattn bench ab`'s
# randomized order on the same pair (1.004x, no difference), so rounds are shuffled since.)
#   PYTHONPATH=src:.peer python bench/s72/arms.py [CASES] [ARMS]   CASES 'h:s_q,...'; ARMS specs separated by '/'
import os, random, statistics, sys, torch
from dsattn.bench.common import group_ms
from dsattn.bench.kernels_mla import _peers, flashmla, prefill_case
from dsattn.ops.sparse_mla import prefill_row_spec, sparse_mla_prefill
from dsattn.ops.sparse_mla.grouping import group_shape, prefill_scratch_spec
from dsattn.ops.sparse_mla.reference import sparse_mla_reference

cases = [tuple(int(v) for v in c.split(":")) for c in
         (sys.argv[1] if len(sys.argv) > 1 else "32:1024,32:8192,16:1024,8:8192").split(",")]
specs = (sys.argv[2] if len(sys.argv) > 2 else
         "pair=1/pair=1,sfold=1/pair=1,sfold=1,prel=1").split("/")
dev = torch.device("cuda")
peers = _peers()
print(torch.cuda.get_device_name(), "arms:", " / ".join(specs), flush=True)
for h, s_q in cases:
    case = prefill_case(s_q, h, dev)
    spec = prefill_scratch_spec(s_q, h, case.indices.shape[1]) if group_shape(h)[1] > 1 else []
    scratch = [torch.empty(s, dtype=dt, device=dev) for s, dt in spec] or None
    po = torch.empty(s_q, h, 512, dtype=torch.bfloat16, device=dev)
    pl = torch.empty(s_q, h, dtype=torch.float32, device=dev)
    rs = [torch.empty(s, dtype=dt, device=dev) for s, dt in prefill_row_spec(case.kv.shape[0])]
    variant = "native" if h <= 32 else None

    def arm(cfg):
        def f(q=case.q):
            os.environ["DSATTN_PF_CONFIG"] = cfg
            sparse_mla_prefill(q, case.kv, case.indices, case.sm_scale, out=po, lse=pl, variant=variant,
                               scratch=scratch, row_scratch=rs)
            os.environ["DSATTN_PF_CONFIG"] = ""
        return f

    arms = {c: arm(c) for c in specs}
    sl = slice(0, 64)
    for scale in (1.0, 6.0):
        q = (case.q.float() * scale).to(torch.bfloat16)
        ref_o, ref_l = sparse_mla_reference(q[sl].float(), case.kv, case.indices[sl], case.sm_scale)
        for c, f in arms.items():
            po.fill_(float("nan")); pl.fill_(float("nan"))
            f(q)
            torch.cuda.synchronize()
            ex = ((po[sl].float() - ref_o).abs() - (2e-3 + 3 / 128 * ref_o.abs())).max().item()
            lr = ((pl[sl] - ref_l).abs() / ref_l.abs().clamp_min(1)).max().item()
            nan = po.isnan().any().item() or pl.isnan().any().item()
            print(f"{h} heads s_q {s_q} q x {scale:g} [{c}]: nan left {nan}; max excess {ex:.3e} "
                  f"({'within' if ex <= 0 else 'OUTSIDE'}), lse rel {lr:.2e} ({'within' if lr <= 1e-5 else 'OUTSIDE'})",
                  flush=True)
    fm = flashmla(case, peers, max(64, h))
    if fm is not None:
        arms["flashmla"] = fm[0]
    times = {k: [] for k in arms}
    for f in arms.values():
        f()
    reps = 5 if s_q <= 1024 else 2
    rng = random.Random(72)
    for _ in range(30):
        order = list(arms.items())
        rng.shuffle(order)
        for k, f in order:
            times[k].append(group_ms(f, reps, True))
    base = specs[0]
    out = []
    for k, v in times.items():
        r = statistics.median(b / x for b, x in zip(times[base], v))
        out.append(f"[{k}] {statistics.median(v):.4f} ms ({r:.3f}x)")
    if "flashmla" in times:
        fmm = statistics.median(times["flashmla"])
        out.append("over FlashMLA: " + ", ".join(f"[{k}] {fmm / statistics.median(times[k]):.3f}x" for k in specs))
    print(f"  {h} heads s_q {s_q}: " + "; ".join(out), flush=True)
