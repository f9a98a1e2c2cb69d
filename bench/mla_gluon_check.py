"""Compile the Gluon few-head sparse MLA kernels for sm_90a on a machine without a GPU, and report what
ptxas says (registers, spills), shared memory, and the async copies / wgmma / barriers in the PTX:
gluon_small.py (--kernel small, the default), the warp-specialized gluon_ws.py (--kernel ws: fp8 cases
only; also counts mbarrier waits / arrives and setmaxnreg) or its register-operand sibling gluon_rx.py (--kernel rx:
fp8 cases; also ld.shared / st.shared / e4m3 cvt counts in the PTX, the ptxas wgmma serialization warning, if any, and
the spill bytes between the SASS's setmaxnreg markers, i.e. per partition) or the 64-head warp-specialized gluon64.py
(--kernel g64: fp8 cases, 64-head programs; also the setmaxnreg values and global loads) or the grouped bf16
prefill kernel gluon_prefill.py (--kernel prefill: prefill-bf16[n]-H cases, 8 / 16 / 32 / 64 heads = G 8 / 4 / 2 / 1
tokens a program).

    PYTHONPATH=src python bench/mla_gluon_check.py [--cases decode-fp8-8,prefill-bf16-16] [--configs 64/3,64/2]
        [--dump DIR]
    PYTHONPATH=src python bench/mla_gluon_check.py --kernel ws [--cases decode-fp8-16] [--configs 3/128/4,3/96/8]
    PYTHONPATH=src python bench/mla_gluon_check.py --kernel rx [--cases decode-fp8-16]
        [--configs 'stages=4;consumers=2,stages=5']
    PYTHONPATH=src python bench/mla_gluon_check.py --kernel g64 [--cases decode-fp8-64] [--configs 4/96,8/64]
    PYTHONPATH=src python bench/mla_gluon_check.py --kernel prefill [--cases prefill-bf16-8]
        [--configs 'block_n=32;stages=4;producer_regs=96,f16=0;cvt_pipe=0;producer_regs=56'] [--splits 4]

(--configs: block_n/stages[/warps] for small, stages/producer_regs[/producer_warps] for ws,
RxConfig's fields by name for rx, ';' between them (gluon_rx.parse_rx_config with ';' for ','; fields left out take
RxConfig's defaults),
producer_warps/producer_regs for g64, PrefillConfig's fields by name for prefill, ';' between them
(gluon_prefill.parse_prefill_config with ';' for ','; fields left out take PrefillConfig's defaults).)

The launch goes through launch.run_attention_gluon with CPU tensors; the kernel launch is intercepted and
compiled for the target instead (Triton's own binder computes the GPU's specialization).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402

from dsattn.formats import KVLayout, pack_latent_rows  # noqa: E402
from dsattn.ops.sparse_mla import gluon64, gluon_pair, gluon_prefill, gluon_rx, gluon_rxb, gluon_small, gluon_ws, launch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sm90 import BIN, PTXAS, Intercept, ptxas_report  # noqa: E402


def _intercept(fn, sink):
    return Intercept(fn, lambda f, compiled, options: sink.append(compiled), source=GluonASTSource)


def partition_spills(ptx: str) -> str:
    """Spill stores / loads per stretch of the SASS between setmaxnreg markers (USETMAXREG; the partitions' code
    as ptxas lays it out, labelled by the register count set there): 'regs:STL bytes/LDL bytes' for each stretch
    with any, 'none' when there are none (nvdisasm of ptxas's cubin)."""
    with tempfile.TemporaryDirectory() as d:
        path, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        open(path, "w").write(ptx)
        if subprocess.run([PTXAS, "--gpu-name", "sm_90a", path, "-o", cubin], capture_output=True).returncode:
            return "?"
        sass = subprocess.run([os.path.join(BIN, "nvdisasm"), "-c", cubin], capture_output=True, text=True).stdout
    width = {"": 4, ".64": 8, ".128": 16, ".U8": 1, ".S8": 1, ".U16": 2, ".S16": 2}
    segs, label, st, ld = [], "entry", 0, 0
    for line in sass.splitlines():
        m = re.search(r"USETMAXREG\.\S+\s+(?:UP\d,\s*)?(0x[0-9a-f]+)", line)
        if m:
            segs.append((label, st, ld))
            label, st, ld = str(int(m.group(1), 16)), 0, 0
            continue
        m = re.search(r"\b(STL|LDL)(\.\w+)?\s", line)
        if m:
            n = width.get(m.group(2) or "", 4)
            if m.group(1) == "STL":
                st += n
            else:
                ld += n
    segs.append((label, st, ld))
    out = [f"{lab}:{a}/{b}" for lab, a, b in segs if a or b]
    return " ".join(out) if out else "none"


def _case(name: str):
    kind, layout, heads = name.split("-")
    heads = int(heads)
    layout = KVLayout({"fp8": "fp8_ds_mla", "fp8n": "fp8_ds_mla", "nope": "fp8_ds_mla_nope", "bf16": "bf16",
                       "bf16n": "bf16"}[layout])
    d = 512 if layout is KVLayout.FP8_DS_MLA_NOPE or name.split("-")[1] in ("bf16n", "fp8n") else 576
    n = 4096
    lat = torch.randn(n, d)
    rows = pack_latent_rows(lat, layout) if layout.is_fp8 else lat.bfloat16()
    q = torch.randn(4, heads, d).bfloat16()
    idx = torch.randint(0, n, (4, 2048), dtype=torch.int32)
    return layout, q, rows, idx


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kernel", choices=("small", "ws", "rx", "g64", "prefill", "rxb"), default="small")
    p.add_argument("--splits", type=int, default=1,
                   help="prefill: the split build (fp32 partials; dispatch.prefill_splits), this many splits")
    p.add_argument("--cases", default=None, help="comma separated (default: every case the kernel takes)")
    p.add_argument("--configs", default="", help="block_n/stages, comma separated (default: GLUON_CONFIGS)")
    p.add_argument("--dump", default=None, help="folder for the TTGIR and PTX of each compile")
    p.add_argument("--profile", type=int, default=0,
                   help="ws / rx / rxb: compile a timing build (run_attention_ws's / _rx's / _rxb's profile argument)")
    args = p.parse_args()
    rx = args.kernel == "rx"
    ws = args.kernel in ("ws", "rx")
    g64 = args.kernel == "g64"
    pf = args.kernel == "prefill"
    rxb = args.kernel == "rxb"  # gluon_rxb (session 61): bf16 rows, 32-head programs, no configs
    if args.cases is None and rxb:
        args.cases = "prefill-bf16-32,prefill-bf16n-32,prefill-bf16-24"
    if args.cases is None and pf:
        args.cases = "prefill-bf16-8,prefill-bf16-16,prefill-bf16-32,prefill-bf16-64,prefill-bf16n-8"
    if args.cases is None:
        args.cases = ("decode-fp8-8,decode-fp8-16,decode-fp8-32,decode-nope-8,decode-nope-32" if ws else
                      "decode-fp8-64,decode-nope-64,decode-fp8n-64" if g64 else
                      "decode-fp8-8,decode-fp8-16,decode-fp8-32,decode-nope-8,prefill-bf16-8,prefill-bf16-16,"
                      "prefill-bf16n-16")
    mod, attr = ((gluon_rxb, "sparse_mla_rxb_kernel") if rxb else (gluon_rx, "sparse_mla_rx_kernel") if rx else (gluon_ws, "sparse_mla_ws_kernel") if ws else (gluon_prefill, "sparse_mla_prefill_kernel") if pf else (gluon64, "sparse_mla_g64_kernel") if g64 else
                 (gluon_small, "sparse_mla_small_kernel"))
    for name in args.cases.split(","):
        layout, q, rows, idx = _case(name)
        configs = args.configs.split(",") if args.configs else [None]
        for c in configs:
            if c is None:
                cfg = None
            else:
                cls = (gluon_rx.RxConfig if rx else gluon_ws.WsConfig if ws else gluon64.G64Config if g64 else gluon_prefill.PrefillConfig if pf
                       else launch.GluonConfig)
                cfg = (gluon_prefill.parse_prefill_config(c.replace(";", ","), allow_pre16=True) if pf else
                       gluon_rx.parse_rx_config(c.replace(";", ",")) if rx else cls(*[int(x) for x in c.split("/")]))
            label = c or "default"
            sink = []
            saved = getattr(mod, attr)
            setattr(mod, attr, _intercept(saved, sink))
            if rx:  # two consumer warpgroups: another kernel of the module
                saved2 = gluon_rx.sparse_mla_rx2_kernel
                gluon_rx.sparse_mla_rx2_kernel = _intercept(saved2, sink)
            if pf:  # config pair (with pre16): gluon_pair's kernel
                saved_pair = gluon_pair.pair_prefill_kernel
                gluon_pair.pair_prefill_kernel = _intercept(saved_pair, sink)
            t0 = time.time()
            try:
                out = torch.empty(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16)
                lse = torch.empty(q.shape[0], q.shape[1])
                run = (gluon_rx.run_attention_rx if rx else gluon_ws.run_attention_ws if ws else gluon64.run_attention_g64 if g64 else
                       launch.run_attention_gluon)
                if pf and args.splits > 1:  # the split build (combine_splits, a Triton launch, not compiled here)
                    sp = args.splits
                    po = torch.empty(q.shape[0], sp, q.shape[1], 512)
                    pl = torch.empty(q.shape[0], sp, q.shape[1])
                    saved_combine, gluon_prefill.combine_splits = gluon_prefill.combine_splits, lambda *a: None
                    try:
                        gluon_prefill.run_prefill_gluon(q, rows, idx, 0.1, None, out, lse, config=cfg, splits=sp,
                                                        part_o=po, part_lse=pl)
                    finally:
                        gluon_prefill.combine_splits = saved_combine
                elif pf:
                    gluon_prefill.run_prefill_gluon(q, rows, idx, 0.1, None, out, lse, config=cfg)
                elif rxb:
                    gluon_rxb.run_attention_rxb(q, rows, idx, 0.1, None, out, lse, profile=args.profile)
                else:
                    run(q, rows, layout, idx, 0.1, None, out, lse, config=cfg,
                        **({"profile": args.profile} if args.profile else {}))
                for ck in sink:
                    ptx = ck.asm["ptx"]
                    extra = ""
                    if ws or g64 or pf or rxb:
                        extra = (f"mbar.wait={ptx.count('mbarrier.try_wait')} "
                                 f"mbar.arrive={ptx.count('mbarrier.arrive')} "
                                 f"setmaxnreg={ptx.count('setmaxnreg')} ")
                    if rx:
                        extra += (f"ld.shared={len(re.findall(r'ld[.]shared', ptx))} "
                                  f"st.shared={len(re.findall(r'st[.]shared', ptx))} ")
                    if g64 or pf or rx or rxb:
                        nreg = sorted(set(re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)))
                        nreg = ",".join(a + b for a, b in nreg)
                        n_ld = len(re.findall(r"ld\.global", ptx))
                        extra += f"maxnreg={nreg} ld.global={n_ld} cvt.e4m3={ptx.count('e4m3x2')} "
                    if rx:
                        extra += f"spills_by_setmaxnreg=[{partition_spills(ptx)}] "
                    print(f"{name:18s} {label:8s} smem={ck.metadata.shared:6d} {ptxas_report(ptx)} "
                          f"cp.async={ptx.count('cp.async.cg') + ptx.count('cp.async.ca')} "
                          f"wgmma={ptx.count('wgmma.mma_async')} bar.sync={ptx.count('bar.sync')} {extra}"
                          f"compile_s={time.time() - t0:.1f}", flush=True)
                    if args.dump:
                        os.makedirs(args.dump, exist_ok=True)
                        base = os.path.join(args.dump, f"{name}_{re.sub(r'[/;=,]', '_', label)}")
                        open(base + ".ttgir", "w").write(ck.asm["ttgir"])
                        open(base + ".ptx", "w").write(ptx)
            except Exception as e:  # noqa: BLE001
                cause = e
                while cause.__cause__ is not None:  # the innermost error (a CompilationError wraps the reason)
                    cause = cause.__cause__
                why = "" if cause is e else f" <- {type(cause).__name__}: {str(cause)[-600:]}"
                print(f"{name:18s} {label:8s} FAILED {type(e).__name__}: {str(e)[:1500]}{why}", flush=True)
            finally:
                setattr(mod, attr, saved)
                if rx:
                    gluon_rx.sparse_mla_rx2_kernel = saved2
                if pf:
                    gluon_pair.pair_prefill_kernel = saved_pair


if __name__ == "__main__":
    sys.exit(main())
