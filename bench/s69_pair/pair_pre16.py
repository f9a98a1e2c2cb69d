# Session 69: config pair over rows converted beforehand (kernels.f16_rows, pre16's rows) against the shipped
# sparse_mla_prefill with row_scratch, the plain default and FlashMLA (padded to 64 heads below 64), issue 3's prefill
# case (overlap indices, s_kv 16384). The pair: with PAIR=copy (bench/s69_pair/run.sh) the measuring copy
# bench/s69_pair/gluon_prefill.py (9d66719's gluon_prefill.py + bench/results/s68/pair_s68.patch +
# bench/s69_pair/pair_s69.patch), imported as dsattn.ops.sparse_mla.gp_pair69, PROFILE 8640 = 8192 (rows converted
# beforehand: the producer copies with one cp.async arrive a thread, no conversion pass) + 256 (fp16 stages, q and P:
# our numerics) + 128 (cl) + 64 (R(0) released first); else (the default) the tree's gluon_pair through
# sparse_mla_prefill with row_scratch and DSATTN_PF_CONFIG=pair=1. (The measuring copy is not in the tree; to recreate:
#   git show 9d66719:src/dsattn/ops/sparse_mla/gluon_prefill.py > bench/s69_pair/gluon_prefill.py
#   patch bench/s69_pair/gluon_prefill.py bench/results/s68/pair_s68.patch
#   patch bench/s69_pair/gluon_prefill.py bench/s69_pair/pair_s69.patch )
# Per case: the pair against the fp32 reference (tokens 0..63, q x 1 and x 6: within 2e-3 + 3/128, lse 1e-5), its
# outputs against the shipped path's, no NaN left in poisoned outputs; then CUDA-event medians of alternating rounds.
#   PYTHONPATH=src:.peer python bench/s69_pair/pair_pre16.py CASES      (CASES: 'h:s_q,h:s_q', default below)
# PREDICTION (session 68's timing build 'neither' 400.9 us against the default's 495.6, both kernel alone, H100):
# 32 heads s_q 1024: pair16 over +rows 1.10-1.18x, over FlashMLA's best 1.12-1.20x; s_q 8192 1.12-1.20x over +rows,
# 1.2-1.3x over FlashMLA. 64 heads: pair16 slower than +rows (0.85-0.95x; the bf16 pair lost to plo 0 there).
# 16 heads s_q 1024: 1.0-1.1x over +rows.
# (Calls 1 and 3 ran before 12f404a. Since then the '+rows' arm, the shipped default, runs gluon_pair itself at 1-32
# heads, so pair16 over +rows reads ~1x there; the split consumer over converted rows is DSATTN_PF_CONFIG=pair=0.)
import os, statistics, sys, torch
from dsattn.bench.kernels_mla import _peers, flashmla, ours, prefill_case
from dsattn.ops.sparse_mla import prefill_row_spec, sparse_mla_prefill
from dsattn.ops.sparse_mla.grouping import group_shape
from dsattn.ops.sparse_mla.kernels import f16_rows
from dsattn.ops.sparse_mla.reference import sparse_mla_reference

COPY = os.environ.get("PAIR", "") == "copy"
if COPY:
    import dsattn.ops.sparse_mla.gp_pair69 as gp69
    PROF = 8640
    gp69._profile = lambda: PROF
    CFG = gp69.parse_prefill_config("f16=0,cvt_pipe=0,producer_regs=56,plo=0,pair=1")
cases = [tuple(int(v) for v in c.split(":")) for c in
         (sys.argv[1] if len(sys.argv) > 1 else "32:1024,64:1024,16:1024,32:8192").split(",")]
dev = torch.device("cuda")
peers = _peers()
print(f"{torch.cuda.get_device_name()} " + (f"measuring copy, profile {PROF} config {gp69.prefill_config_spec(CFG)}"
                                            if COPY else "the tree's gluon_pair (DSATTN_PF_CONFIG=pair=1)"), flush=True)
for h, s_q in cases:
    case = prefill_case(s_q, h, dev)
    kv16 = torch.empty_like(case.kv)
    from dsattn.ops.sparse_mla.grouping import prefill_scratch_spec
    spec = prefill_scratch_spec(s_q, h, case.indices.shape[1]) if group_shape(h)[1] > 1 else []
    scratch = [torch.empty(s, dtype=dt, device=dev) for s, dt in spec] or None
    po = torch.empty(s_q, h, 512, dtype=torch.bfloat16, device=dev)
    pl = torch.empty(s_q, h, dtype=torch.float32, device=dev)
    rs = [torch.empty(s, dtype=dt, device=dev) for s, dt in prefill_row_spec(case.kv.shape[0])]
    variant = "native" if h <= 32 else None

    def pair16(q=case.q):
        if COPY:
            f16_rows(case.kv, kv16)
            gp69.run_prefill_gluon(q, kv16, case.indices, case.sm_scale, None, po, pl, scratch=scratch, config=CFG)
            return
        os.environ["DSATTN_PF_CONFIG"] = "pair=1"
        sparse_mla_prefill(q, case.kv, case.indices, case.sm_scale, out=po, lse=pl, variant=variant, scratch=scratch,
                           row_scratch=rs)
        os.environ["DSATTN_PF_CONFIG"] = ""

    rows_fn, ro_out, ro_lse = ours(case, rows=True)
    plain_fn, _, _ = ours(case)
    sl = slice(0, 64)
    for scale in (1.0, 6.0):
        q = (case.q.float() * scale).to(torch.bfloat16)
        po.fill_(float("nan")); pl.fill_(float("nan"))
        pair16(q)
        torch.cuda.synchronize()
        ref_o, ref_l = sparse_mla_reference(q[sl].float(), case.kv, case.indices[sl], case.sm_scale)
        ex = ((po[sl].float() - ref_o).abs() - (2e-3 + 3 / 128 * ref_o.abs())).max().item()
        lr = ((pl[sl] - ref_l).abs() / ref_l.abs().clamp_min(1)).max().item()
        print(f"{h} heads s_q {s_q} q x {scale:g}: pair16 nan {po.isnan().any().item() or pl.isnan().any().item()}; "
              f"against the reference (tokens 0..63) max excess {ex:.3e} ({'within' if ex <= 0 else 'OUTSIDE'}), "
              f"lse rel {lr:.2e} ({'within' if lr <= 1e-5 else 'OUTSIDE'})", flush=True)
    rows_fn()
    pair16()
    torch.cuda.synchronize()
    d = (po.float() - ro_out.float()).abs().max().item()
    dl = ((pl - ro_lse).abs() / ro_lse.abs().clamp_min(1)).max().item()
    print(f"  pair16 against the shipped +rows path, all tokens: out max |diff| {d:.3e}, lse rel {dl:.2e}", flush=True)
    arms = {"plain": plain_fn, "+rows": rows_fn, "pair16": pair16}
    fm = flashmla(case, peers, max(64, h))
    if fm is not None:
        arms["flashmla"] = fm[0]
    times = {k: [] for k in arms}
    for f in arms.values():
        f()
    reps = 5 if s_q <= 1024 else 2
    for _ in range(30):
        for k, f in arms.items():
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(reps):
                f()
            e1.record()
            torch.cuda.synchronize()
            times[k].append(e0.elapsed_time(e1) / reps)
    med = {k: statistics.median(v) for k, v in times.items()}
    line = ", ".join(f"{k} {v:.4f}" for k, v in med.items())
    extra = f"; pair16 over +rows {med['+rows'] / med['pair16']:.3f}x, over plain {med['plain'] / med['pair16']:.3f}x"
    if "flashmla" in med:
        extra += (f"; over FlashMLA({max(64, h)}) pair16 {med['flashmla'] / med['pair16']:.3f}x, +rows "
                  f"{med['flashmla'] / med['+rows']:.3f}x, plain {med['flashmla'] / med['plain']:.3f}x")
    print(f"  {h} heads s_q {s_q} ms: {line}{extra}", flush=True)
