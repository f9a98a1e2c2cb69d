"""How many thread-block clusters of the top-k select run at once on this GPU (cuOccupancyMaxActiveClusters), for the
cluster sizes gluon_select.default_ctas picks, as the select is built for each.

Why: session 53 measured 12 rows over 8-CTA clusters faster than over 4 and 16 rows slower (16 x 33728: 29.3 against
27.2 us), and read it as "an 8-CTA cluster sits within one GPC: not every 16 of them run at once" without asking the
driver (notes/indexer.md, session 53). Session 56 asked it on an H100 (cluster_occupancy_h100_s56.json): past 16384
columns every cluster size comes to 120 CTAs at once, and session 57 moved default_ctas's bounds there
(gluon_select.cluster_slots). On a GPU with another SM count, this says whether its fraction holds.

Each case compiles select_rows_kernel through the launcher (gluon_select.launch_select_rows with a stand-in that
warms the kernel up instead of launching it), loads it, and asks the driver (libcuda through ctypes, the block size
and dynamic shared memory of the build, the cluster dimension as the launch sets it) for the most clusters active at
once, and for blocks per SM without a cluster. Triton's own wrapper of the call assumes 128 threads a block, which is
not this kernel's 512.

    PYTHONPATH=src python bench/cluster_occupancy.py [--widths 4160,12288,24576,32768,65536] [--ctas 2,4,8]
        [--json FILE]

It ends with wave_check: past 16384 columns, whether the most rows default_ctas sends over each cluster size fit the
driver's count of such clusters at once (one wave), as the rule means them to.

On a machine without a GPU, --check only checks the ctypes structures' sizes against the CUDA headers' (56 and 72 B).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys


CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class _AttrValue(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("clusterDim", _Dim3)]


class CUlaunchAttribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _AttrValue)]


class CUlaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(CUlaunchAttribute)), ("numAttrs", ctypes.c_uint)]


def check_structs() -> None:
    """The sizes of cuda.h's CUlaunchConfig and CUlaunchAttribute on a 64-bit host."""
    if ctypes.sizeof(CUlaunchConfig) != 56 or ctypes.sizeof(CUlaunchAttribute) != 72:
        raise SystemExit(f"ctypes layout off: CUlaunchConfig {ctypes.sizeof(CUlaunchConfig)} B (56), "
                         f"CUlaunchAttribute {ctypes.sizeof(CUlaunchAttribute)} B (72)")


class Driver:
    """The three driver calls asked, from libcuda.so.1."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def _ok(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} returned CUresult {rc}")

    def set_dynamic_smem(self, func: int, nbytes: int) -> None:
        # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 (Triton sets it when a launch needs > 48 KB)
        self._ok(self.lib.cuFuncSetAttribute(ctypes.c_void_p(func), 8, ctypes.c_int(nbytes)), "cuFuncSetAttribute")

    def blocks_per_sm(self, func: int, threads: int, smem: int) -> int:
        n = ctypes.c_int(-1)
        self._ok(self.lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), ctypes.c_void_p(func),
                                                                      ctypes.c_int(threads), ctypes.c_size_t(smem)),
                 "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return n.value

    def max_active_clusters(self, func: int, threads: int, smem: int, ctas: int) -> int:
        attr = CUlaunchAttribute()
        attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim = _Dim3(ctas, 1, 1)
        cfg = CUlaunchConfig(gridDimX=ctas, gridDimY=1, gridDimZ=1, blockDimX=threads, blockDimY=1, blockDimZ=1,
                             sharedMemBytes=smem, hStream=None, attrs=ctypes.pointer(attr), numAttrs=1)
        n = ctypes.c_int(-1)
        self._ok(self.lib.cuOccupancyMaxActiveClusters(ctypes.byref(n), ctypes.c_void_p(func), ctypes.byref(cfg)),
                 "cuOccupancyMaxActiveClusters")
        return n.value


class _Warm:
    """Stands in for kernel[grid]: warms the kernel up (compiles it for this GPU) and keeps the compiled kernel."""

    def __init__(self, fn, sink):
        self.fn, self.sink = fn, sink

    def __getitem__(self, grid):
        def call(*args, **kw):
            self.sink.append(self.fn.warmup(*args, grid=grid, **kw))
        return call


def wave_check(rows: list[dict], sms: int, default_ctas) -> list[dict]:
    """default_ctas against the driver's counts, past 16384 columns (where the rule means its clusters to fit one
    wave): for each measured width and cluster size, the most rows the rule sends over that size and the most such
    clusters the driver runs at once. `rows` are this script's JSON rows (width, ctas, max_active_clusters); ok is
    False where the rule's rows need a second wave on this GPU."""
    out = []
    for row in rows:
        width, ctas, most = row["width"], row["ctas"], row["max_active_clusters"]
        if width <= 16384 or ctas == 1 or most is None:
            continue
        sent = [r for r in range(1, 2 * sms + 1) if default_ctas(r, width, sms) == ctas]
        if sent:
            out.append(dict(width=width, ctas=ctas, rows=max(sent), clusters=most, ok=max(sent) <= most))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--widths", default="4160,8192,12288,16384,24576,32768,65536")
    p.add_argument("--ctas", default="1,2,4,8")
    p.add_argument("--k", type=int, default=2048)
    p.add_argument("--json", default=None)
    p.add_argument("--check", action="store_true", help="only check the ctypes structures (no GPU needed)")
    args = p.parse_args(argv)
    check_structs()
    if args.check:
        print("ctypes structures: CUlaunchConfig 56 B, CUlaunchAttribute 72 B, as cuda.h")
        return 0

    os.environ.pop("TRITON_INTERPRET", None)  # here, not at import: the CPU tests import this module
    import torch
    from dsattn.ops.topk import gluon_select

    drv = Driver()
    dev = torch.cuda.current_device()
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    print(f"{torch.cuda.get_device_name(dev)}: {sms} SMs")
    rows = []
    for width in (int(w) for w in args.widths.split(",")):
        for ctas in (int(c) for c in args.ctas.split(",")):
            cap = 1 << (max(2 * args.k, width) - 1).bit_length()
            if cap > gluon_select.max_capacity(ctas) or cap // ctas < 256:
                continue
            logits = torch.randn(1, width, device="cuda")
            lengths = torch.full((1,), width, dtype=torch.int32, device="cuda")
            out = torch.empty(1, args.k, dtype=torch.int32, device="cuda")
            sink = []
            try:
                gluon_select.launch_select_rows(logits, lengths, args.k, out, cap, ctas=ctas,
                                                launch=lambda f: _Warm(f, sink))
            except ValueError as e:
                print(f"width {width} ctas {ctas}: not built ({e})")
                continue
            ck = sink[0].result() if hasattr(sink[0], "result") else sink[0]
            ck._init_handles()
            threads = 32 * ck.metadata.num_warps
            smem = ck.metadata.shared
            drv.set_dynamic_smem(ck.function, smem)
            per_sm = drv.blocks_per_sm(ck.function, threads, smem)
            clusters = drv.max_active_clusters(ck.function, threads, smem, ctas) if ctas > 1 else None
            row = dict(width=width, cap=cap, ctas=ctas, threads=threads, regs=ck.n_regs, spills=ck.n_spills,
                       shared=smem, blocks_per_sm=per_sm, max_active_clusters=clusters,
                       default_ctas_at={r: gluon_select.default_ctas(r, width, sms) for r in (1, 8, 12, 16, 33, 64)})
            rows.append(row)
            print(f"width {width:6d} cap {cap:6d} ctas {ctas}: {threads} threads, {ck.n_regs} regs, {smem} B shared, "
                  f"{per_sm} blocks/SM alone, max active clusters {clusters} "
                  f"(rows in one wave: {clusters if ctas > 1 else per_sm * sms})")
    waves = wave_check(rows, sms, gluon_select.default_ctas)
    for w in waves:
        print(f"default_ctas at width {w['width']}: up to {w['rows']} rows over {w['ctas']} CTAs; the driver runs "
              f"{w['clusters']} such clusters at once: {'one wave' if w['ok'] else 'PAST ONE WAVE'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(dev), sms=sms, k=args.k, rows=rows, waves=waves), f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
