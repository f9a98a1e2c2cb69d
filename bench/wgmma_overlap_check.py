"""When does ptxas serialize wgmma in a Gluon kernel? Small one-warpgroup kernels, each one overlap pattern of the
prefill consumer (gluon_prefill._wg_s) in isolation, compiled for sm_90a on a machine without a GPU (Triton's
bundled ptxas / nvdisasm, as bench/mla_gluon_check.py does). Nothing runs: the kernels are only compiled.

Every kernel loops over blocks like the prefill: S [64, 64] = q (smem) x K^T (smem), online softmax (row max, exp2),
P (bf16) to shared memory or kept in registers, O [64, 256] fp32 += P V (m64n256k16, V from shared memory).

    PYTHONPATH=src python bench/wgmma_overlap_check.py [--only P1,P1.fresh] [--dump DIR] [--ptx-window N]

For each pattern x variant it prints whether ptxas warns (the C75xx code and the reason it gives), and the SASS
counts of HGMMA, WARPGROUP.ARRIVE and WARPGROUP.DEPBAR (a serialized kernel waits after every HGMMA).
Patterns (the KERNELS table below says what each variant changes):
  control  every wgmma waited (0) before anything else runs
  P1       S(b) and P V(b - 1) both in flight; warpgroup_mma_wait(1, deps=(s,)) retires S; S is read (softmax) while
           P V runs; wait(0) for O; O *= alpha
  P2       P V in flight across an mbarrier wait
  P3       P V in flight across the loop's back-edge (waited at the top of the next iteration)
  P4       software-pipelined, never drained inside the loop: P V(i - 1) crosses the back-edge and is retired by a
           PARTIAL wait (wait(1), S(i + 1) still in flight) in the next iteration, then read (O *= alpha)
  P5       S(i + 1) and P V(i - 1) issued, the softmax of the already retired S(i) runs while both are in flight,
           then wait(0) for both (no partial wait)
(.ws: the loop as gl.warp_specialize's default partition beside a 4-warp worker that arrives on the mbarrier.)

Compile-only results (this script, Triton 3.6.0 bundled ptxas, CPU box, session 14 helper W): P1 / P2 / P3 and every
variant compile without the serialization note; only P4 (and P4.peel, P4.ws) is serialized, with ptxas's
"(C7514) ... non wgmma instructions reading accumulator registers of a wgmma between start and end of the pipeline
stage"; P4 without the read (P4.noalpha) or with wait(0) (P4.drain) is not. I.e. what ptxas rejects is a wgmma issued
before the back-edge, retired by a partial wait_group after it, whose accumulator is then read.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier,  # noqa: E402
                                                               warpgroup_mma, warpgroup_mma_init,
                                                               warpgroup_mma_wait)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sm90 import BIN, PTXAS, Intercept  # noqa: E402

NEG_INF = gl.constexpr(float("-inf"))
WORKER_REGS = gl.constexpr(80)

# variant bits (VAR)
V_PREG = 1        # P V's A operand from registers (DotOperandLayout) instead of shared memory
V_FRESH = 2       # P1: P V into a fresh zero accumulator acc_b, added into acc after wait(0) (S is always fresh)
V_NOALPHA = 4     # no O *= alpha (the in-flight / loop-carried accumulator is only touched by wgmma and waits)
V_WAIT_ALL = 16   # P1: wait(0, deps=(s, acc)) instead of wait(1, deps=(s,)) (the control of P1's issue order)
V_NOMAX = 64      # P1: S is not read between wait(1) and wait(0) (only after wait(0))
V_WS = 256        # the loop as gl.warp_specialize's default partition beside a worker that arrives on bar
V_DRAIN = 512    # P4: wait(0) instead of the partial wait (the pipeline drains every iteration)
V_PEEL = 1024    # P4: a P V issued before the loop, so every path into the loop header has one group in flight
V_SAFE = 128      # P1: only a non-accumulator value (m_i / ix) is touched between wait(1) and wait(0)


@gluon.jit
def _fill(x_ptr, R: gl.constexpr, C: gl.constexpr, dst):
    BL: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    r = gl.arange(0, R, gl.SliceLayout(1, BL))
    c = gl.arange(0, C, gl.SliceLayout(0, BL))
    dst.store(gl.load(x_ptr + r[:, None] * C + c[None, :]).to(gl.bfloat16))


@gluon.jit
def _softmax(s, m_i, l_i):
    m_new = gl.maximum(m_i, gl.max(s, 1))
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_i


@gluon.jit
def _stage_p(p, p_s, VAR: gl.constexpr):
    """P into shared memory for a shared-memory-A P V (VAR bit 1: P V takes P from registers, nothing stored)."""
    if not (VAR & 1):
        p_s.store(p.to(gl.bfloat16))
        fence_async_shared()
        gl.thread_barrier()


@gluon.jit
def _pv(p, p_s, v, acc, P_L: gl.constexpr, VAR: gl.constexpr):
    if VAR & 1:
        acc = warpgroup_mma(gl.convert_layout(p.to(gl.bfloat16), P_L), v, acc, is_async=True)
    else:
        acc = warpgroup_mma(p_s, v, acc, is_async=True)
    return acc


@gluon.jit
def _consumer(out_ptr, n, q_s, k_s, v_s, p_s, bar, PAT: gl.constexpr, VAR: gl.constexpr):
    MMA_S: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
    MMA_O: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 256, 16])
    ROW_S: gl.constexpr = gl.SliceLayout(1, MMA_S)
    ROW_O: gl.constexpr = gl.SliceLayout(1, MMA_O)
    P_L: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA_O, k_width=2)
    if PAT == 4 or PAT == 5:  # prologue of P4 / P5: S(0) retired
        s_cur = warpgroup_mma(q_s, k_s.index(0).permute((1, 0)), gl.zeros([64, 64], gl.float32, MMA_S),
                              is_async=True, use_acc=False)
        s_cur = warpgroup_mma_wait(0, deps=(s_cur,))
    if PAT == 3 or PAT == 4:  # the accumulator is loop-carried while in flight: carried as a warpgroup_mma_accumulator
        acc = warpgroup_mma_init(gl.zeros([64, 256], gl.float32, MMA_O))
        if PAT == 4 and VAR & 1024:  # peeled: the loop is entered with a P V in flight too (P = 0: adds nothing)
            p_s.store(gl.zeros([64, 64], gl.bfloat16, MMA_S))
            fence_async_shared()
            gl.thread_barrier()
            acc = warpgroup_mma(p_s, v_s.index(1), acc, is_async=True)
    else:
        acc = gl.zeros([64, 256], gl.float32, MMA_O)
    s0 = gl.zeros([64, 64], gl.float32, MMA_S)
    m_i = gl.full([64], NEG_INF, gl.float32, ROW_S)
    l_i = gl.zeros([64], gl.float32, ROW_S)
    p = gl.zeros([64, 64], gl.float32, MMA_S)
    alpha = gl.full([64], 1.0, gl.float32, ROW_S)
    for i in range(n):
        st = i % 2
        kt = k_s.index(st).permute((1, 0))
        if PAT == 0:  # control
            s = warpgroup_mma(q_s, kt, s0, is_async=True, use_acc=False)
            s = warpgroup_mma_wait(0, deps=(s,))
            p, alpha, m_i, l_i = _softmax(s, m_i, l_i)
            if not (VAR & 4):
                acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
            _stage_p(p, p_s, VAR)
            acc = _pv(p, p_s, v_s.index(st), acc, P_L, VAR)
            acc = warpgroup_mma_wait(0, deps=(acc,))
        elif PAT == 1:  # P1: S(i) and P V(i - 1) in flight, S retired first
            s = warpgroup_mma(q_s, kt, s0, is_async=True, use_acc=False)
            if VAR & 2:
                acc_b = _pv(p, p_s, v_s.index(1 - st), gl.zeros([64, 256], gl.float32, MMA_O), P_L, VAR)
            else:
                acc = _pv(p, p_s, v_s.index(1 - st), acc, P_L, VAR)
            if VAR & 16:
                if VAR & 2:
                    s, acc_b = warpgroup_mma_wait(0, deps=(s, acc_b))
                else:
                    s, acc = warpgroup_mma_wait(0, deps=(s, acc))
            else:
                s = warpgroup_mma_wait(1, deps=(s,))
            if VAR & 64:
                pass
            elif VAR & 128:
                m_i = m_i * 1.0 + 0.0
            else:
                p, alpha, m_i, l_i = _softmax(s, m_i, l_i)
            if VAR & 2:
                acc_b = warpgroup_mma_wait(0, deps=(acc_b,))
                acc = acc + acc_b
            else:
                acc = warpgroup_mma_wait(0, deps=(acc,))
            if VAR & 64 or VAR & 128:
                p, alpha, m_i, l_i = _softmax(s, m_i, l_i)
            if not (VAR & 4):
                acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
            _stage_p(p, p_s, VAR)
        elif PAT == 2:  # P2: P V in flight across an mbarrier wait
            s = warpgroup_mma(q_s, kt, s0, is_async=True, use_acc=False)
            s = warpgroup_mma_wait(0, deps=(s,))
            p, alpha, m_i, l_i = _softmax(s, m_i, l_i)
            if not (VAR & 4):
                acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
            _stage_p(p, p_s, VAR)
            acc = _pv(p, p_s, v_s.index(st), acc, P_L, VAR)
            if not (VAR & 256):
                mbarrier.arrive(bar, count=1)
            mbarrier.wait(bar, i & 1)
            acc = warpgroup_mma_wait(0, deps=(acc,))
        elif PAT == 4:  # P4: software-pipelined, never drained in the loop (the prefill's serialized variant C)
            # entry: s_cur = S(i) retired, P V(i - 1) in flight; S(i + 1) issued; wait(1, deps=(acc,)) retires
            # P V(i - 1) with S(i + 1) still in flight; softmax(S(i)); O *= alpha; P V(i) issued; wait(1) retires S(i + 1)
            s_nxt = warpgroup_mma(q_s, kt, s0, is_async=True, use_acc=False)
            if VAR & 512:  # drain instead: wait(0) (S(i + 1) too)
                acc, s_nxt = warpgroup_mma_wait(0, deps=(acc, s_nxt))
            else:
                acc = warpgroup_mma_wait(1, deps=(acc,))
            p, alpha, m_i, l_i = _softmax(s_cur, m_i, l_i)
            if not (VAR & 4):
                acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
            _stage_p(p, p_s, VAR)
            acc = _pv(p, p_s, v_s.index(st), acc, P_L, VAR)
            s_cur = warpgroup_mma_wait(1, deps=(s_nxt,))
        elif PAT == 5:  # P5 (the prefill's probe G): S(i + 1) and P V(i - 1) issued, softmax of the RETIRED S(i)
            # while both run, wait(0) for both, O *= alpha: every iteration drains, no partial wait
            s_nxt = warpgroup_mma(q_s, kt, s0, is_async=True, use_acc=False)
            acc = _pv(p, p_s, v_s.index(1 - st), acc, P_L, VAR)
            p, alpha, m_i, l_i = _softmax(s_cur, m_i, l_i)
            s_cur, acc = warpgroup_mma_wait(0, deps=(s_nxt, acc))
            if not (VAR & 4):
                acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
            _stage_p(p, p_s, VAR)
        else:  # P3: P V in flight across the back-edge
            acc = warpgroup_mma_wait(0, deps=(acc,))
            if not (VAR & 4):
                acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
            s = warpgroup_mma(q_s, kt, s0, is_async=True, use_acc=False)
            s = warpgroup_mma_wait(0, deps=(s,))
            p, alpha, m_i, l_i = _softmax(s, m_i, l_i)
            _stage_p(p, p_s, VAR)
            acc = _pv(p, p_s, v_s.index(st), acc, P_L, VAR)
    acc = warpgroup_mma_wait(0, deps=(acc,))
    acc = acc / gl.convert_layout(l_i, ROW_O)[:, None]
    r = gl.arange(0, 64, ROW_O)
    c = gl.arange(0, 256, gl.SliceLayout(0, MMA_O))
    gl.store(out_ptr + r[:, None] * 256 + c[None, :], acc)


@gluon.jit
def overlap_kernel(x_ptr, out_ptr, n, PAT: gl.constexpr, VAR: gl.constexpr, num_warps: gl.constexpr):
    gl.static_assert(num_warps == 4, "one warpgroup")
    SM64: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
    SM256: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 256], gl.bfloat16)
    q_s = gl.allocate_shared_memory(gl.bfloat16, [64, 64], SM64)
    k_s = gl.allocate_shared_memory(gl.bfloat16, [2, 64, 64], SM64)
    v_s = gl.allocate_shared_memory(gl.bfloat16, [2, 64, 256], SM256)
    p_s = gl.allocate_shared_memory(gl.bfloat16, [64, 64], SM64)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    _fill(x_ptr, 64, 64, q_s)
    _fill(x_ptr + 4096, 64, 64, k_s.index(0))
    _fill(x_ptr + 8192, 64, 64, k_s.index(1))
    _fill(x_ptr + 12288, 64, 64, p_s)
    _fill(x_ptr + 16384, 64, 256, v_s.index(0))
    _fill(x_ptr + 32768, 64, 256, v_s.index(1))
    fence_async_shared()
    gl.thread_barrier()

    if VAR & 256:  # inside gl.warp_specialize: this loop the default partition, a 4-warp worker arriving on bar
        gl.warp_specialize([
            (_consumer, (out_ptr, n, q_s, k_s, v_s, p_s, bar, PAT, VAR)),
            (_worker, (n, bar)),
        ], [4], [WORKER_REGS])
    else:
        _consumer(out_ptr, n, q_s, k_s, v_s, p_s, bar, PAT, VAR)


@gluon.jit
def _worker(n, bar):
    for i in range(n):
        mbarrier.arrive(bar, count=1)


# name: (PAT, VAR, what the variant changes)
KERNELS = {
    "control": (0, 0, "S issued + waited(0), softmax, O *= alpha, P V issued + waited(0); A = P from smem"),
    "control.preg": (0, V_PREG, "control with P V's A from registers"),
    "P1": (1, 0, "S(b) + P V(b-1) issued; wait(1, deps=(s,)); softmax(s); wait(0, deps=(acc,)); O *= alpha"),
    "P1.preg": (1, V_PREG, "P1 with P V's A from registers"),
    "P1.waitall": (1, V_WAIT_ALL, "P1's issue order but wait(0, deps=(s, acc)) (no partial wait)"),
    "P1.nomax": (1, V_NOMAX, "P1 but S not read until after wait(0)"),
    "P1.safe": (1, V_SAFE, "P1 but only m_i (no accumulator) touched between wait(1) and wait(0)"),
    "P1.fresh": (1, V_FRESH, "P1 with P V into a fresh zero accumulator, acc += it after wait(0)"),
    "P1.noalpha": (1, V_NOALPHA, "P1 without O *= alpha"),
    "P2": (2, 0, "P V in flight across mbarrier.arrive + mbarrier.wait (try_wait loop)"),
    "P2.preg": (2, V_PREG, "P2 with P V's A from registers"),
    "P3": (3, 0, "P V in flight across the back-edge, wait(0) at the top of the next iteration"),
    "P3.noalpha": (3, V_NOALPHA, "P3 without O *= alpha"),
    "P3.preg": (3, V_PREG, "P3 with P V's A from registers"),
    "P4": (4, 0, "pipelined like the prefill's probe C: P V(i-1) in flight at the top, S(i+1) issued, wait(1, deps="
                 "(acc,)) retires P V(i-1), softmax(S(i)), O *= alpha, P V(i) issued, wait(1, deps=(s_next,))"),
    "P4.drain": (4, V_DRAIN, "P4 with wait(0, deps=(acc, s_next)) instead of wait(1, deps=(acc,))"),
    "P4.noalpha": (4, V_NOALPHA, "P4 without O *= alpha (acc not read by non-wgmma code after the partial wait)"),
    "P4.peel": (4, V_PEEL, "P4 entered with a P V (P = 0) already in flight: the loop header sees one group in "
                           "flight on both the entry and the back-edge path"),
    "P4.peel.ws": (4, V_PEEL | V_WS, "P4.peel inside warp_specialize"),
    "P5": (5, 0, "S(i+1) + P V(i-1) issued, softmax of the retired S(i) while both run, wait(0, deps=(s_next, acc)),"
                 " O *= alpha (no partial wait; drains every iteration)"),
    "P5.preg": (5, V_PREG, "P5 with P V's A from registers"),
    "P5.ws": (5, V_WS, "P5 inside warp_specialize"),
    "P4.ws": (4, V_WS, "P4 inside warp_specialize"),
    "control.ws": (0, V_WS, "control inside warp_specialize (default partition, 4-warp worker arriving on bar)"),
    "P1.ws": (1, V_WS, "P1 inside warp_specialize"),
    "P2.ws": (2, V_WS, "P2 inside warp_specialize (the worker arrives, the consumer waits)"),
    "P3.ws": (3, V_WS, "P3 inside warp_specialize"),
}


def compile_ptx(pat: int, var: int):
    sink = []
    k = Intercept(overlap_kernel, lambda f, compiled, options: sink.append(compiled), source=GluonASTSource)
    x = torch.empty(65536, dtype=torch.float32)
    out = torch.empty(64 * 256, dtype=torch.float32)
    k[(1,)](x, out, 8, PAT=pat, VAR=var, num_warps=4)
    return sink[0]


def ptxas(ptx: str):
    """(warning lines, SASS text) from ptxas -v + nvdisasm."""
    with tempfile.TemporaryDirectory() as d:
        path, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        open(path, "w").write(ptx)
        res = subprocess.run([PTXAS, "-v", "--gpu-name", "sm_90a", path, "-o", cubin], capture_output=True,
                             text=True)
        text = res.stdout + res.stderr
        if res.returncode:
            return ["ptxas FAILED " + text[-400:]], ""
        sass = subprocess.run([os.path.join(BIN, "nvdisasm"), "-c", cubin], capture_output=True, text=True).stdout
    # the serialization note is an 'info' line: (C751x) Potential Performance Loss: wgmma.mma_async ... serialized
    warn = [ln.strip() for ln in text.splitlines() if "arning" in ln or "Performance Loss" in ln]
    return warn, sass


def sass_counts(sass: str) -> str:
    return (f"HGMMA={len(re.findall(r'HGMMA', sass))} "
            f"WARPGROUP.ARRIVE={len(re.findall(r'WARPGROUP[.]ARRIVE', sass))} "
            f"WARPGROUP.DEPBAR={len(re.findall(r'WARPGROUP[.]DEPBAR', sass))} "
            f"(partial: {len(re.findall(r'WARPGROUP[.]DEPBAR[.]LE gsb0, 0x[1-9]', sass))}) "
            f"WARPSYNC={len(re.findall(r'WARPSYNC', sass))}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="comma separated names of KERNELS (default: all)")
    ap.add_argument("--dump", default=None, help="folder for each kernel's PTX, SASS, TTGIR and LLIR")
    ap.add_argument("--ptx-window", type=int, default=0, help="print N PTX lines around each wgmma fence/wait")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(KERNELS)
    for name in names:
        pat, var, what = KERNELS[name]
        try:
            ck = compile_ptx(pat, var)
        except Exception as e:  # noqa: BLE001
            cause = e
            while cause.__cause__ is not None:
                cause = cause.__cause__
            print(f"{name:14s} COMPILE FAILED {type(cause).__name__}: {str(cause)[-800:]}", flush=True)
            continue
        ptx = ck.asm["ptx"]
        warn, sass = ptxas(ptx)
        ser = any("serialized" in w for w in warn)
        why = "; ".join(re.sub(r"^ptxas (info|warning)\s*:\s*", "", w) for w in warn) or "-"
        print(f"{name:14s} {'SERIALIZED' if ser else 'ok        '} {sass_counts(sass)} "
              f"ptx: wgmma={ptx.count('wgmma.mma_async')} fence={ptx.count('wgmma.fence')} "
              f"commit={ptx.count('wgmma.commit_group')} wait={ptx.count('wgmma.wait_group')}\n"
              f"    {what}\n    ptxas: {why}", flush=True)
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)
            base = os.path.join(args.dump, name)
            open(base + ".ptx", "w").write(ptx)
            open(base + ".sass", "w").write(sass)
            open(base + ".ttgir", "w").write(ck.asm["ttgir"])
            open(base + ".llir", "w").write(ck.asm["llir"])
        if args.ptx_window:
            lines = ptx.splitlines()
            keep = set()
            for j, ln in enumerate(lines):
                if "wgmma.fence" in ln or "wgmma.wait_group" in ln or "wgmma.commit" in ln or "mbarrier" in ln:
                    keep.update(range(max(0, j - args.ptx_window), min(len(lines), j + args.ptx_window + 1)))
            prev = -2
            for j in sorted(keep):
                if j != prev + 1:
                    print("    ...")
                print("    " + lines[j])
                prev = j


if __name__ == "__main__":
    sys.exit(main())
