# Session 69: DSAAttention.bf16_row_scratch (the keyed bf16 prefill call with sparse_mla_prefill's row_scratch) and
# gathered_row_scratch (the fp8_gathered path's gathered calls with it; --layout fp8_ds_mla) on against off, one full
# layer's forward on a prepared step (`dsattn bench serve`'s layer_ms), `dsattn bench serve`'s scenarios (and 'long').
# Per case: whether the two backends' outputs are bit-equal (the split consumer over converted rows is; gluon_pair,
# the default over them at 1-32 heads, sums in another order), the workspace bytes each, and medians of 20
# alternating rounds of 3 layer calls each.
#   PYTHONPATH=src python bench/s69_serve_rows.py [PRESET:TP,...] [SCENARIOS] [--layout L]   (--tiny: a CPU smoke run)
# PREDICTION (session 68's `bench ab` of row_scratch on an H100, and the rule prefill_converts_rows): the layer
# 1.00-1.03x at 8 heads (glm-5 TP8; the prefill's share of the layer and the rule's ratio 2 at the edge), 1.02-1.06x
# at 32 heads (deepseek-v3.2 TP4 / glm-5 TP2); 'long' level (65536 keys against 4096 tokens: not converted).
import statistics, sys, torch
from dsattn.backend.attention import DSAAttention
from dsattn.backend.synthetic import make_step
from dsattn.bench.serve import scenarios
from dsattn.config import preset

tiny = "--tiny" in sys.argv
argv = [a for a in sys.argv[1:] if a != "--tiny"]
layout = "bf16"
if "--layout" in argv:
    i = argv.index("--layout")
    layout = argv[i + 1]
    del argv[i:i + 2]
configs = [(c.split(":")[0], int(c.split(":")[1])) for c in
           (argv[0] if argv else "glm-5:8,glm-5:4,deepseek-v3.2:4,glm-5:2").split(",")]
names = (argv[1] if len(argv) > 1 else "prefill,mixed,long").split(",")
dev = torch.device("cpu" if tiny else "cuda")


class Off(DSAAttention):
    bf16_row_scratch = False
    gathered_row_scratch = False


class Rows(DSAAttention):
    bf16_row_scratch = True
    gathered_row_scratch = True


for name, tp in configs:
    geo = preset(name)
    bs = 64
    if tiny:
        geo, bs = geo.scaled(index_topk=16, index_n_heads=4), 16
    heads = geo.heads_per_rank(tp)
    for scen in names:
        spans = scenarios(tiny)[scen]
        s = make_step(geo, heads, layout, spans, block_size=bs, device=dev, seed=len(spans), spare_blocks=3)
        t = s.q.shape[0]
        arms, outs = {}, {}
        for arm, cls in (("off", Off), ("rows", Rows)):
            attn = cls(geo, tp=tp, kv_layout=layout, block_size=bs, device=dev, max_num_tokens=t,
                       max_num_reqs=len(spans), max_model_len=max(c + n for c, n in spans))
            out = torch.full((t, heads, 512), float("nan"), dtype=torch.bfloat16, device=dev)
            attn.forward(attn.prepare(s.requests), s.q, s.latent, s.kv_cache, s.indexer, out=out)
            attn.lock()
            prepared = attn.prepare(s.requests)
            arms[arm] = (attn, prepared, out)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        eq = torch.equal(arms["off"][2], arms["rows"][2])
        keys = arms["rows"][0].keyed_prefill_keys(arms["rows"][1])
        ws = {k: a[0].workspace_bytes / 2**20 for k, a in arms.items()}
        times = {k: [] for k in arms}
        for _ in range(2 if tiny else 20):
            for k, (attn, prepared, out) in arms.items():
                if dev.type == "cuda":
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                for _ in range(3):
                    attn.forward(prepared, s.q, s.latent, s.kv_cache, s.indexer, out=out)
                if dev.type == "cuda":
                    e1.record()
                    torch.cuda.synchronize()
                    times[k].append(e0.elapsed_time(e1) / 3)
                else:
                    times[k].append(0.0)
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = med["off"] / med["rows"] if med["rows"] else float("nan")
        print(f"{name} TP{tp} ({heads} heads) {layout} ({arms['rows'][0].path.value}) {scen}: {t} tokens, keyed "
              f"calls' keys {keys}; layer ms off "
              f"{med['off']:.4f}, rows {med['rows']:.4f} ({ratio:.3f}x); outputs bit-equal {eq}; workspace MiB off "
              f"{ws['off']:.1f}, rows {ws['rows']:.1f}", flush=True)
        del arms, s
        if dev.type == "cuda":
            torch.cuda.empty_cache()
