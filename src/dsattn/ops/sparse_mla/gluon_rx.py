"""Warp-specialized Gluon kernels of sparse MLA over fp8 rows for few heads per program (1..32), Hopper (sm_90),
that keep no fp16 tiles: the consumers build both products' A operands in REGISTERS from the raw fp8 stages.

STATUS: 'auto' runs it for fp8 rows at every program of <= 32 heads (launch.rx_preferred; 17..32 heads since session
59, gluon_ws's before). Two kernels: sparse_mla_rx_kernel (one consumer warpgroup) and sparse_mla_rx2_kernel (two
ping-pong consumers).
Defaults (rx_config): 8-head and 32-head programs run rx2 with ping-pong consumers; 16-head programs run, since
session 19, the one-consumer kernel with 2 stages and the launch capped at 128 registers, two CTAs an SM (2.8-6.0%
faster than rx2's ping-pong there, bench/results/ab_s19_2cta_*.json), and DSATTN_RX_CONSUMERS=2 takes rx2's ping-pong
with spillfix 1 (the 16-head default of sessions 13-18: 0.2526 ms against the halves' 0.2821 then,
bench/results/s13_rx16.json). At 32-head programs (session 59) the ping-pong consumers hold 128 accumulator
registers each; what makes them fit: consumer 1 hands its O^T over in the raw latent stages once consumer 0 is done
with them (a 64 KB merge buffer of its own would leave 2 stages), the row sums are reduced every block, one S^T product
is in flight at a time, and wgmma reads the RoPE operand from the stage (sm_90a: 4 B of spill, none in the loop).
Measured on the H200 (decode, topk 2048, FlashMLA padded to 64 heads in the same process; session 60 at e64e2ee,
bench/results/sparse_mla_s60_h200_decode_512.json, _2048.json): fp8_ds_mla 8 heads 0.195 / 0.762 ms at 512 / 2048
tokens (2.26x / 2.24x), 16 heads 0.205 / 0.783 (2.15x / 2.18x), 32 heads 0.287 / 1.144 (1.535x / 1.492x; gluon_ws
1.34x / 1.32x in sessions 24 / 34); fp8_ds_mla_nope at 8 heads 1.161x / 1.192x faster than fp8_ds_mla with vpair (7
alternating rounds at 3484ebd's kernels, sparse_mla_s60_h200_nopevpair_r7_*.json; 1.140x / 1.167x without it in the
table). Defaults measured in: vst (16-byte epilogue stores of out from the accumulator relabelled into physical order;
1.05-1.13x, session 21); vpair at 16- and 32-head programs and nope's 8-head ones (V's fp8 bytes paired by key before
the conversion: half the byte permutes, bit-equal; 1.016-1.026x on an H100, nope 8 heads 1.019x on the H200; session
60); and at 8-head programs over fp8_ds_mla_nope sraw (S^T from the unscaled fp8 values), idxpf 2 (L1 prefetch of
later blocks' index lines) and a 48-register producer (1.026x, then 1.018-1.029x; session 20). Timing builds
(session 25, bench/results/rx_timing_builds_s25.json): over nope the consumers alone take 83-85% of the full time and
their work is 0.90-0.91x fp8_ds_mla's, so nope's gain stops where the consumers' shared cost does.

Options measured and removed (on the H200 unless said; numbers and reasons in notes/sparse_mla.md, whose section
"gluon_rx.py's docstring, sessions 10-28" holds what this docstring said of them): three ping-pong consumers (slower
three times, sessions 12, 13, 25; code at 96927db, 881755d), spillfix bit 2 (session 13), f8s (fp8 S products with q in
two e4m3 terms: no faster and outside the tolerances; session 18, 12a56fa), persist (one program an SM walking items:
0-3% slower; session 18, 49fb844), pair (two blocks a softmax step: 0.85-1.00x; session 25, 9c3be7b), prefetch, alu and
pipe (L2 prefetch, integer e4m3 conversions, the halves' pipelined loop: slower wherever run; removed in session 28,
42b02a1), the halves (two consumers in step, each over half of the latent columns, exchanging partial S^T: slower than
ping-pong at 8-head programs, 0.244 vs 0.224 ms, and at 16, 0.282 vs 0.253, and than gluon_ws at 32 heads, 0.483 vs
0.369; the 16-head default of sessions 10-12 only; removed in session 34, code at d37e495), vraw (session 60: O^T's A
operand from the unscaled fp8 values, the group scales folded into four P^T buffers with one accumulator a latent group;
bit-equal, but it needs spillfix 1 to compile without spills, which alone costs 2.6% at 8-head nope programs, and
measured 0.983x / 0.991x over nope, 1.001x / 1.010x over fp8_ds_mla, 0.94-0.95x at 16 heads; H100,
bench/results/ab_s60_vraw*.json; code at 3d4dcc3).

Why (notes/sparse_mla.md, gluon_ws timing builds, 8 heads): gluon_ws's two fp16 tiles (144 KB) leave room for only
~42 KB of gathered rows in flight per SM, and its shared-memory traffic per 64-key block is ~290 KB (raw in, fp8
read, fp16 write, the fp16 tile read twice by wgmma). Here shared memory holds only the raw ring (NSTAGES stages
of 64 keys: latent fp8, group scales, RoPE bf16) plus q, P (and the S exchange), and the traffic per block is
~125 KB (raw in 41 KB, the latent read twice by ld.shared 64 KB, q / P by wgmma).

Products (wgmma, M = 64 rows per instruction, fp32 accumulation; values in V_SCALE = 2^-8 units as gluon_ws):

  S^T [64 keys, HP] = K_rope q_rope'^T (bf16, q_rope' = q_rope x V_SCALE exact) + sum over the 4 latent groups g of
                      K16_g q_g^T (fp16)
  O^T [512, HP]    += V16^T P^T      (fp16, 4 chunks of 16 keys, B = P^T in shared memory)

V16 is fp8 value x fp16(group scale x V_SCALE) (cvt.rn.f16x2.e4m3x2, then mul.rn.f16x2), gluon_ws's tile values. K16
likewise, or with config sraw one S^T accumulator per group over the unscaled fp8 values, the scale x V_SCALE applied
in fp32 (exact powers of two: the same products, another rounding order). The RoPE operand comes from registers too
(at 32 heads a program wgmma reads it from the stage, behind a proxy fence: registers). The reduction index of
each product is free to permute if the other operand is permuted the same way, and the rows of O^T are free to
permute if the epilogue un-permutes them, so every thread reads whole 16-byte (8-byte) chunks:
  - S: in group g (128 latent columns) thread t of a quad holds physical bytes [32t, 32t + 32) of rows r, r + 8;
    logical column c = 16 ks + 8 jj + 2 t + i (the wgmma A fragment) is physical 32 t + 16 (ks // 4) + 4 (ks % 4)
    + 2 jj + i (s_phys); q is stored in shared memory in that logical order (RoPE: r_phys).
  - O: warp w handles group w; the thread with lane group g reads bytes [128 w + 16 g, + 16) of its 16 keys; logical
    row d = 64 R + 16 w + 8 r0 + g is physical 128 w + 16 g + 2 R + r0 (v_phys). Keys not permuted.
The register layouts are DistributedLinearLayouts; the reshape / permute to the wgmma operand layout is checked
to move no data between threads (gl.convert_layout(..., assert_trivial=True)); tests/test_sparse_mla_rx.py checks
the permutations against the reshape / permute chains. The raw latent stage uses a 16-byte XOR swizzle by row
(SwizzledSharedLayout 16/1/8) so that the reads (and the cp.async writes) are free of bank conflicts.

Partitions (gl.warp_specialize):
  producer (worker, PRODUCER_WARPS warps, few registers): per block, waits `free[stage]`, cp.async gathers the 64
      entries' rows (latent, scales, RoPE; invalid entries masked: zero-filled, nothing read) into the stage and
      arrives on `full[stage]` through cp.async.mbarrier.arrive.noinc (the barrier completes when every producer
      thread's copies landed); it runs NSTAGES blocks ahead of the consumers.
  one consumer (default partition): waits `full[stage]`, S^T (register operands, async wgmma), online softmax in
      base 2 over the keys, P^T (fp16) to shared memory, O^T += V16^T P^T chunk by chunk (pv_depth chunks left in
      flight over the next chunk's conversion), arrives on `free[stage]` after its last read of the stage.
  two ping-pong consumers (consumers 2 with pingpong 1; the default at 8- and 32-head programs):
      each takes every other block whole (all 512 columns), one merge at the end. They keep the softmax row sums
      per element of S^T (rescaled by alpha each block) and reduce them over the keys once at the end: one
      cross-warp reduction per block (the row max) instead of two. At 16-head programs with spillfix 1 (wgmma's
      shared-memory descriptors rebuilt in each block from an opaque 0: LLVM had hoisted ~40 64-bit values out of
      the loop and ptxas spilled 120-152 B; none with it, compile check).
No wgmma stays in flight across a loop back-edge or an mbarrier wait: ptxas then serializes every wgmma of the
kernel (C7513, register operands defined while one is in flight), as the compile check showed.

Numerics: the fp16 operand values equal gluon_ws's tile values; the accumulation order differs, so outputs match
gluon_ws within fp32 rounding, not bit for bit (out within 0.004, lse 2e-7: session 10, bench/logs/s10_rx1.log).
Outputs as gluon_ws: out / lse, or normalized split partials for kernels.combine_splits_kernel.
"""
from __future__ import annotations

import dataclasses
import os

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (async_copy, fence_async_shared, mbarrier,
                                                                   warpgroup_mma, warpgroup_mma_wait)
    HAVE_GLUON = True
except Exception:  # pragma: no cover - older triton without Gluon
    HAVE_GLUON = False

from ...formats import LATENT_DIM, KVLayout
from .._fastlaunch import launch as _fast_launch
from .named_config import named_spec, parse_named

if HAVE_GLUON:
    from .gluon_small import (_copy_layout, _idx, _scale_layout, _softmax_keys,  # noqa: F401 (used inside
                              _store_ot)                                          # the kernels)

BN = 64   # keys per block and per raw stage (wgmma M of S^T)
SMEM_LIMIT = 232448  # bytes of shared memory one CTA may use on sm_90
SMEM_MARGIN = 1024   # mbarriers and the compiler's reduction scratch


@dataclasses.dataclass(frozen=True)
class RxConfig:
    """Launch configuration of sparse_mla_rx_kernel / sparse_mla_rx2_kernel: raw 64-key stages of the ring, the
    producer partition's register budget (setmaxnreg) and warps, and how many P @ V chunks may stay in flight while
    the next chunk converts (pv_depth 0, 1 or 2). DSATTN_RX_CONFIG names fields (parse_rx_config)."""
    stages: int = 4
    producer_regs: int = 64
    producer_warps: int = 4
    pv_depth: int = 1
    consumers: int = 1  # 2: two ping-pong consumer warpgroups (sparse_mla_rx2_kernel; with pingpong 1)
    hp8: int = 0        # 1: programs of 8 heads (wgmma N = 8) for at most 8 heads
    pingpong: int = 0   # 1 with two consumers, and only there: alternate blocks whole, merged
    #                     at the end. (Two consumers once also ran in step over halves of the latent columns, with
    #                     pingpong 0: removed in session 34, the module docstring says why.)
    spillfix: int = 0   # 1 (ping-pong): wgmma's shared-memory descriptors rebuilt in every block (_opaque_zero)
    maxnreg: int = 0    # one consumer: the launch's register cap (0: Triton's); 128 lets two CTAs share an SM where
    #                     shared memory also fits two (session 18; the 16-head-program default since session 19)
    idxpf: int = 0      # > 0: the producer asks L1 for the index lines of the block idxpf past the next (session 19;
    #                     2 in the fp8_ds_mla_nope 8-head default since session 20, rx_config, where it measured
    #                     no different from 0)
    sraw: int = 0       # 1: S^T by _s_raw, one accumulator a latent group over the unscaled fp8 values, the scales
    #                     in fp32 after (session 19; 1 in the fp8_ds_mla_nope 8-head default since session 20,
    #                     rx_config). It also keeps a group of scale <= 2^-17 in q . k, which the fp16 factor reads
    #                     as zeros (lse exact there; session 36, bench/results/fp8_tiny_groups_s36.json)
    vst: int = 1        # 1: the epilogue stores whole 16-byte pieces of out (_store_ot_phys; session 21, the default
    #                     everywhere: bit-equal, 1.05-1.13x, bench/results/ab_s21_vst_*.json)
    vpair: int = 0      # 1: V's fp8 bytes paired by key before cvt.rn.f16x2.e4m3x2 (_v_operand VPAIR; session 60, the
    #                     default at 16- and 32-head programs and over fp8_ds_mla_nope at 8-head ones: bit-equal,
    #                     1.016-1.026x there; rx_config)


def parse_rx_config(spec: str) -> RxConfig:
    """DSATTN_RX_CONFIG's text -> RxConfig: 'field=value' pairs separated by commas, RxConfig's field names, integer
    values, each field at most once; fields left out take RxConfig's defaults (not rx_config's), e.g.
    'stages=5,producer_regs=48,consumers=2,hp8=1,pingpong=1,idxpf=2,sraw=1' (the 8-head fp8_ds_mla_nope default).
    ValueError naming DSATTN_RX_CONFIG for anything else. (Before session 28 the fields were positional, with three
    more: prefetch, alu, pipe; module docstring.)"""
    return parse_named(RxConfig, spec, "DSATTN_RX_CONFIG", "stages=5,consumers=2,hp8=1,pingpong=1")


def rx_config_spec(cfg: RxConfig) -> str:
    """DSATTN_RX_CONFIG's text for cfg, every field named (parse_rx_config(rx_config_spec(cfg)) == cfg)."""
    return named_spec(cfg)


def rx_hp(num_heads: int) -> int:
    """Heads per program (the wgmma N): 16, or 32 for 17..32 heads (as gluon_ws)."""
    return 16 if num_heads <= 16 else 32


def rx_smem_bytes(layout: KVLayout, d_qk: int, hp: int, stages: int, consumers: int = 1) -> int:
    """Shared memory the kernel allocates (without mbarriers and the compiler's scratch); two (ping-pong) consumers
    add a P buffer and the merge buffers (consumer 1's O^T, m and l in fp32)."""
    rope = d_qk > LATENT_DIM and layout is KVLayout.FP8_DS_MLA
    stage = BN * (LATENT_DIM + 16 + (2 * 64 if rope else 0))
    fixed = hp * LATENT_DIM * 2 + (hp * 64 * 2 if rope else 0) + consumers * BN * hp * 2
    if consumers == 2:
        # consumer 1's O^T, m and l (at 32-head programs O^T lives in the raw latent stages: 2 x 32 KB of them)
        fixed += (LATENT_DIM * hp * 4 if hp <= 16 else 0) + 2 * hp * 4
    return stages * stage + fixed


def rx_fit(cfg: RxConfig, layout: KVLayout, num_heads: int, d_qk: int = 576) -> RxConfig:
    """cfg with its stages cut (down to 2) until its shared memory fits (A/B runs that change the layout of a
    default config, e.g. pingpong)."""
    hp = 8 if cfg.hp8 and num_heads <= 8 else rx_hp(num_heads)
    stages = cfg.stages
    while stages > 2 and rx_smem_bytes(layout, d_qk, hp, stages, cfg.consumers) + SMEM_MARGIN > SMEM_LIMIT:
        stages -= 1
    return dataclasses.replace(cfg, stages=stages)


def rx_consumer_regs(consumers: int, producer_warps: int, producer_regs: int) -> int:
    """setmaxnreg of each consumer warpgroup: the register file less the producer's warpgroup, split between the
    consumers (multiples of 8, at most 256). Triton 3.6 (AllocateWarpGroups) pads the worker warps to whole
    warpgroups and gives the padding warps of the producer's warpgroup the producer's count, so a 1- or 2-warp
    producer would still cost 4 warps x producer_regs (compile check, 96927db); run_attention_rx takes 4 or 8."""
    pw = -(-producer_warps // 4) * 4
    return min(256, (65536 - 32 * pw * producer_regs) // (128 * consumers) // 8 * 8)


def rx_config(layout: KVLayout, num_heads: int, d_qk: int = 576) -> RxConfig:
    """The default launch by heads a program: 8-head programs at <= 8 heads (hp8: 0.259 vs 0.295 ms at 8 heads,
    bench/logs/s10_call5.log) with two ping-pong consumer warpgroups; 16-head programs (9..16 heads) with ONE
    consumer, 2 stages and the launch capped at 128 registers so that two CTAs share an SM (since session 19); 32-head
    programs (17..32 heads, 'auto' since session 59) with two ping-pong consumers, spillfix 1 and a 40-register
    producer (until session 58 one consumer, which 'auto' did not run; until session 34 two in step over halves of
    the latent columns, removed); over fp8_ds_mla_nope the 8-head programs add idxpf 2, sraw 1 and a 48-register
    producer (since session 20). DSATTN_RX_CONSUMERS=2 takes two ping-pong consumers at 16-head programs too
    (spillfix 1: the 16-head default of sessions 13-18), =1 one consumer everywhere, without the register cap. As
    many raw stages (2..5) as shared memory holds (fp8_ds_mla 576, two consumers: 4 at 8-, 16- and 32-head programs;
    one consumer: 5 / 5 / 4 at 8 / 16 / 32), pv_depth 1 (at 32 heads a program: 0, else ptxas serializes every wgmma;
    bench/mla_gluon_check.py --kernel rx). vpair 1 at 16- and 32-head programs and nope's 8-head ones (session 60).
    DSATTN_RX_CONFIG='field=value,...' overrides it all (parse_rx_config; A/B runs; read at launch)."""
    spec = os.environ.get("DSATTN_RX_CONFIG", "").strip()
    if spec:
        return parse_rx_config(spec)
    consumers = os.environ.get("DSATTN_RX_CONSUMERS", "").strip()
    if consumers not in ("", "1", "2"):
        raise ValueError(f"DSATTN_RX_CONSUMERS must be 1 or 2 (or unset: the default), got {consumers!r}")
    hp = 8 if num_heads <= 8 else rx_hp(num_heads)  # hp8 (the default)
    if not consumers and hp == 16:
        # Two CTAs an SM (session 19, bench/gpu_s19_decode.sh, bench/gpu_s19_2cta.sh; `dsattn bench ab` against the
        # ping-pong config below, bench/results/ab_s19_2cta_*.json): one consumer, 2 stages (fp8_ds_mla 576: 104,740 B
        # of shared memory a CTA, nope 86,308, by the sm_90a compile check), producer 48 registers, launch capped at
        # 128. fp8_ds_mla 512 tokens 0.282 -> 0.274 ms, 2048 tokens 0.983 -> 0.943; nope 0.251 -> 0.241, 0.926 -> 0.874
        # (2.8-6.0% faster). Producer 40 registers: 1.7% faster than ping-pong, 56: no difference; pv_depth 2: 18%
        # slower. At 8-head programs it was 7% slower over fp8_ds_mla (0.230 vs 0.247 ms) and no different over nope:
        # ping-pong stays there. vpair 1 since session 60 (below).
        return RxConfig(stages=2, producer_regs=48, consumers=1, hp8=1, maxnreg=128, vpair=1)
    consumers = int(consumers or "2")
    # 8-head programs with two consumers: ping-pong (session 10's final device call, 512 tokens, 8 heads: fp8_ds_mla
    # 0.224 vs 0.244 ms, nope 0.192 vs 0.233; at 16-head programs it was slower, 0.306 vs 0.282;
    # bench/results/sparse_mla_rx_bench_final.json), producer 56 registers (session 11 call 1, fp8_ds_mla 8 heads,
    # 4 stages: 40 / 48 / 56 registers 0.243 / 0.2245 / 0.208 ms at 512 tokens, 0.925 / 0.852 / 0.810 at 2048;
    # bench/results/s11_rx_512.json, s11_rx_2048.json)
    # 16-head programs, two consumers: ping-pong too since session 13 (producer 48 registers), with spillfix 1 (the
    # wgmma descriptors rebuilt in each block: no spill at sm_90a, 120-152 B without, which is what made it slower in
    # sessions 10-12): 512 tokens fp8_ds_mla 0.2526 vs 0.2821 ms (two consumers in step), nope 0.2389 vs 0.2654
    # (bench/results/s13_rx16.json, bench/logs/s13_call3.log)
    pingpong = int(consumers == 2)
    stages = 5
    while stages > 2 and rx_smem_bytes(layout, d_qk, hp, stages, consumers) + SMEM_MARGIN > SMEM_LIMIT:
        stages -= 1
    # producer 48 registers at 16-head programs (session 13 calls 5 / 6, 512 tokens, against 56: fp8_ds_mla 0.2442 /
    # 0.2460 vs 0.2506 / 0.2520 ms, nope 0.2324 / 0.2364 vs 0.2373 / 0.2395; s13_rx16b.json, s13_rx16c.json)
    # fp8_ds_mla_nope at 8-head ping-pong programs: idxpf 2 and sraw 1 (session 20, `dsattn bench ab`, 512 tokens,
    # against the config without them, bench/results/ab_s20_*_nope_h8.json, bench/logs/s20_rx.log): both 0.204 ->
    # 0.199 ms (1.026x, 95% CI 1.019-1.030), sraw alone 1.018x (1.009-1.037), idxpf 2 alone 1.013x (0.993-1.027).
    # Over fp8_ds_mla neither moved 8-head programs (sraw 1.007x, idxpf 2 0.983x, CIs across 1), and sraw made the
    # 16-head two-CTA program 9% slower (0.913x at 512 tokens, 0.905x at 2048; its consumer spills 32 B there).
    # Then a sweep of one field at a time against that (bench/gpu_s20_nope_sweep.sh, ab_s20_sw_*.json): producer 48
    # registers 1.018x (CI 1.008-1.025), again 1.029x, 2048 tokens 1.018x (1.017-1.021); 40 0.973x, 32 0.875x, 64
    # 0.980x; idxpf 1 / 3, 4 stages, the two-CTA one consumer (3 stages): no difference; spillfix 1 0.959x, alu 1
    # 0.924x, pv_depth 2 0.762x (it spilled 220 B; with spillfix 1 it does not, and measured 0.999x / 0.957x at 512 /
    # 2048 tokens, fp8_ds_mla 0.985x: session 25, ab_s25_pvd2_*.json), L2 prefetch 1 0.599x. At 48 registers idxpf 0
    # measured the same (1.002x, CI 0.991-1.014): idxpf stays because the default was timed with it (issue 3's rows),
    # not because it is shown to help.
    nope8 = int(pingpong and hp == 8 and layout is KVLayout.FP8_DS_MLA_NOPE)
    # 32-head programs (session 59): ping-pong with spillfix 1, pv_depth 0 and a 40-register producer, consumer 1's
    # O^T handed over in the raw stages (fp8_ds_mla 4 stages, nope 5); the compile check's choice: 48 registers spill
    # 24 B a consumer, pv_depth 1 serializes every wgmma, spillfix 0 spills 256-284 B. H100, `dsattn bench ab` against
    # gluon_ws (bench/results/ab_s59_pp32_*.json): fp8_ds_mla 512 tokens 0.377 -> 0.343 ms (1.099x), 2048 tokens
    # 1.345 -> 1.167 (1.153x), nope 512 tokens 1.096x.
    pp32 = pingpong and hp == 32
    # vpair (session 60, `dsattn bench ab` against the defaults of 3d4dcc3; bit-equal). H100 (ab_s60_vpair*.json):
    # 16-head two-CTA programs fp8_ds_mla 512 tokens 1.026x (CI 1.022-1.032), nope 1.016x (0.976-1.037); 32-head
    # ping-pong fp8_ds_mla 0.316 -> 0.308 ms (1.025x), nope 1.026x; 8-head ping-pong 0.996-1.002x at 512 / 2048
    # tokens. H200 (ab_s60_h200_*.json), 8 heads 512 tokens: nope 0.185 -> 0.181 ms (1.019x, CI 1.006-1.026),
    # fp8_ds_mla 0.994x (0.989-1.000). So: at 16- and 32-head programs and the 8-head nope one, not 8-head
    # fp8_ds_mla.
    return RxConfig(stages=stages, producer_regs=40 if pp32 else (48 if hp == 16 or nope8 else 56) if pingpong else 64,
                    pv_depth=0 if hp == 32 else 1, consumers=consumers, hp8=1, pingpong=pingpong,
                    spillfix=int(pingpong and hp >= 16), idxpf=2 * nope8, sraw=nope8, vpair=int(hp >= 16 or nope8))


def s_phys(c):
    """Physical latent column of S's logical column c (0..511; works on ints and integer tensors)."""
    w = c % 128
    return (c - w) + 32 * ((w >> 1) & 3) + 16 * (w >> 6) + 4 * ((w >> 4) & 3) + 2 * ((w >> 3) & 1) + (w & 1)


def v_phys(d):
    """Physical latent column of O^T's logical row d (0..511; ints and integer tensors)."""
    return 128 * ((d >> 4) & 3) + 16 * (d & 7) + 2 * (d >> 6) + ((d >> 3) & 1)


if HAVE_GLUON:
    V_SCALE = gl.constexpr(1.0 / 256)
    LN2 = gl.constexpr(0.6931471805599453)
    NEG_INF = gl.constexpr(float("-inf"))
    KB = gl.constexpr(BN)

    @gluon.jit
    def _s_phys(c):
        w = c % 128
        return (c - w) + 32 * ((w >> 1) & 3) + 16 * (w >> 6) + 4 * ((w >> 4) & 3) + 2 * ((w >> 3) & 1) + (w & 1)

    @gluon.jit
    def _r_phys(c):
        return 16 * ((c >> 1) & 3) + 4 * (c >> 4) + 2 * ((c >> 3) & 1) + (c & 1)

    @gluon.jit
    def _v_phys(d):
        return 128 * ((d >> 4) & 3) + 16 * (d & 7) + 2 * (d >> 6) + ((d >> 3) & 1)

    @gluon.constexpr_function
    def _ot_phys_layout(HP):
        """[512 physical latent columns, HP heads]: the O^T accumulator (NVMMA v3, instr [16, HP, 16], 4 warps) with
        its rows permuted into physical order by _ot_phys, and each thread's registers ordered columns first: a thread
        holds 16 consecutive physical columns of each of its heads, so the epilogue's stores become 16-byte vectors
        (the logical-order stores of _store_ot put every lane's 2 bytes in its own 32-byte sector: 32 sectors an
        instruction). Lanes and warps are the accumulator's: lane bits 0-1 heads 2, 4; lane bits 2-4 the
        accumulator row bits 0-2 (g), warp bits its row bits 4-5 (w)."""
        reg = [[1 << i, 0] for i in range(4)]            # r0 (row bit 3) -> bit 0, R (8 m-tiles) -> bits 1..3
        reg += [[0, 1]] + [[0, 8 << j] for j in range((HP // 8).bit_length() - 1)]
        lane = [[0, 2], [0, 4]] + [[16 << i, 0] for i in range(3)]           # g -> bits 4..6
        warp = [[128 << i, 0] for i in range(2)]                             # w -> bits 7, 8
        return gl.DistributedLinearLayout(reg_bases=reg, lane_bases=lane, warp_bases=warp, block_bases=[],
                                          shape=[512, HP])

    @gluon.jit
    def _ot_phys(o, HP: gl.constexpr):
        """o [512, HP] in the accumulator layout, rows in accumulator order m = 64 R + 16 w + 8 r0 + g, permuted to
        physical order p = v_phys(m) = 128 w + 16 g + 2 R + r0 (module docstring); a relabelling of registers, no
        data moves between threads (assert_trivial)."""
        # (R2 R1 R0 w1 w0 r0 g2 g1 g0) -> (w1 w0 g2 g1 g0 R2 R1 R0 r0)
        o = gl.permute(gl.reshape(o, [2, 2, 2, 2, 2, 2, 2, 2, 2, HP]), (3, 4, 6, 7, 8, 0, 1, 2, 5, 9))
        return gl.convert_layout(gl.reshape(o, [512, HP]), _ot_phys_layout(HP), assert_trivial=True)

    @gluon.jit
    def _store_ot_phys(acc, m_i, l_i, t, split, h0, num_heads, out_ptr, stride_ot, stride_os, stride_oh, lse_ptr,
                       stride_lt, stride_ls, stride_lh, HP: gl.constexpr, COL: gl.constexpr):
        """gluon_small._store_ot's epilogue (the same values) with the rows permuted into physical order first
        (_ot_phys), so that each thread stores whole 16-byte pieces of out (config vst; session 21): out's 512 columns
        and lse of heads h0 + [0, HP) of split `split` of token t."""
        empty = l_i == 0.0
        inv_l = 256.0 / gl.where(empty, 1.0, l_i)
        o = _ot_phys((acc * inv_l[None, :]).to(out_ptr.dtype.element_ty), HP)
        LP: gl.constexpr = _ot_phys_layout(HP)
        p = gl.arange(0, 512, gl.SliceLayout(1, LP))
        oh = h0 + gl.arange(0, HP, gl.SliceLayout(0, LP))
        o_ptrs = out_ptr + t * stride_ot + split * stride_os + oh[None, :] * stride_oh + p[:, None]
        gl.store(o_ptrs, o, mask=(oh < num_heads)[None, :])
        lse = gl.where(empty, NEG_INF, (m_i + gl.log2(gl.where(empty, 1.0, l_i))) * LN2)
        ch = h0 + gl.arange(0, HP, COL)
        gl.store(lse_ptr + t * stride_lt + split * stride_ls + ch * stride_lh, lse, mask=ch < num_heads)

    @gluon.jit
    def _cvt_scale(x, sc):
        """fp8 bytes x (e4m3, 4 consecutive register elements share one scale) times fp16 scale sc (same shape):
        cvt.rn.f16x2.e4m3x2 twice and two mul.rn.f16x2, the fp16 values of gluon_ws's tile."""
        return gl.inline_asm_elementwise(
            "{ .reg .b16 lo, hi; .reg .b32 a, b; mov.b32 {lo, hi}, $2; cvt.rn.f16x2.e4m3x2 a, lo; "
            "cvt.rn.f16x2.e4m3x2 b, hi; mul.rn.f16x2 $0, a, $3; mul.rn.f16x2 $1, b, $4; }",
            "=r,=r,r,r,r", [x, sc], dtype=gl.float16, is_pure=True, pack=4)

    @gluon.constexpr_function
    def _k_layout():
        """Register layout of one group's raw bytes for S's A operand, [64 keys, 128 physical columns]: physical
        column 32 t + 16 h + 4 ks' + 2 jj + i (t: the lane's quad position), rows r (lane group) and r + 8."""
        return gl.DistributedLinearLayout(
            reg_bases=[[0, 1], [0, 2], [0, 4], [0, 8], [0, 16], [8, 0]],
            lane_bases=[[0, 32], [0, 64], [1, 0], [2, 0], [4, 0]],
            warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, 128])

    @gluon.jit
    def _cvt(x):
        """fp8 bytes x (e4m3) -> fp16 (exact), cvt.rn.f16x2.e4m3x2 on 4 consecutive register elements."""
        return gl.inline_asm_elementwise(
            "{ .reg .b16 lo, hi; mov.b32 {lo, hi}, $2; cvt.rn.f16x2.e4m3x2 $0, lo; cvt.rn.f16x2.e4m3x2 $1, hi; }",
            "=r,=r,r", [x], dtype=gl.float16, is_pure=True, pack=4)

    @gluon.jit
    def _row_scales(sc, H: gl.constexpr, R: gl.constexpr):
        """Group scales 2 H, 2 H + 1 of the block x V_SCALE (fp32, exact) as 2 tensors [64] in row layout R (the rows
        of an MMA [64, N] layout: one 16-byte load per row and thread)."""
        L: gl.constexpr = gl.DistributedLinearLayout(
            reg_bases=[[0, 1], [0, 2], [8, 0]], lane_bases=[[0, 0], [0, 0], [1, 0], [2, 0], [4, 0]],
            warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, 4])
        x = sc.load(L) * V_SCALE
        e, o = gl.split(gl.reshape(x, [64, 2, 2]))      # groups (0, 2), (1, 3)
        s0, s2 = gl.split(e)
        s1, s3 = gl.split(o)
        if H == 0:
            return gl.convert_layout(s0, R, assert_trivial=True), gl.convert_layout(s1, R, assert_trivial=True)
        else:
            return gl.convert_layout(s2, R, assert_trivial=True), gl.convert_layout(s3, R, assert_trivial=True)

    @gluon.jit
    def _k_operand_raw(lat, g: gl.constexpr, DOT: gl.constexpr):
        """_k_operand without the group scale: fp8 values in fp16; the scale is applied to this group's own S^T
        accumulator instead, in fp32."""
        x = _cvt(lat.slice(g * 128, 128, dim=1).load(_k_layout()))
        x = gl.reshape(x, [KB, 4, 2, 4, 2, 2])          # (row, t, h, ks', jj, i)
        x = gl.permute(x, (0, 2, 3, 4, 1, 5))           # (row, h, ks', jj, t, i)
        return gl.convert_layout(gl.reshape(x, [KB, 128]), DOT, assert_trivial=True)

    @gluon.jit
    def _k_scales(sc):
        """The block's group scales x V_SCALE in fp16 as 4 tensors [64] in _k_layout's rows (one 16-byte load per row
        and thread)."""
        L: gl.constexpr = gl.DistributedLinearLayout(
            reg_bases=[[0, 1], [0, 2], [8, 0]], lane_bases=[[0, 0], [0, 0], [1, 0], [2, 0], [4, 0]],
            warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, 4])
        R: gl.constexpr = gl.SliceLayout(1, _k_layout())
        x = (sc.load(L) * V_SCALE).to(gl.float16)
        e, o = gl.split(gl.reshape(x, [64, 2, 2]))
        s0, s2 = gl.split(e)
        s1, s3 = gl.split(o)
        return (gl.convert_layout(s0, R, assert_trivial=True), gl.convert_layout(s1, R, assert_trivial=True),
                gl.convert_layout(s2, R, assert_trivial=True), gl.convert_layout(s3, R, assert_trivial=True))

    @gluon.jit
    def _k_operand(lat, s16, g: gl.constexpr, DOT: gl.constexpr):
        """S's A operand for latent group g [64 keys, 128 logical columns] in registers (layout DOT); s16: the
        group's scales from _k_scales."""
        x = lat.slice(g * 128, 128, dim=1).load(_k_layout())
        x = _cvt_scale(x, s16[:, None])                 # (inline asm broadcasts)
        x = gl.reshape(x, [KB, 4, 2, 4, 2, 2])          # (row, t, h, ks', jj, i)
        x = gl.permute(x, (0, 2, 3, 4, 1, 5))           # (row, h, ks', jj, t, i)
        return gl.convert_layout(gl.reshape(x, [KB, 128]), DOT, assert_trivial=True)

    @gluon.jit
    def _rope_operand(rope, DOT: gl.constexpr):
        """S's RoPE A operand [64 keys, 64 logical columns] (bf16, as stored) in registers (layout DOT): thread t of a
        quad holds physical columns [16 t, 16 t + 16) (32 bytes) of rows r, r + 8; logical column 16 ks + 8 jj + 2 t + i
        is physical 16 t + 4 ks + 2 jj + i (_r_phys)."""
        L: gl.constexpr = gl.DistributedLinearLayout(
            reg_bases=[[0, 1], [0, 2], [0, 4], [0, 8], [8, 0]],
            lane_bases=[[0, 16], [0, 32], [1, 0], [2, 0], [4, 0]],
            warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, 64])
        x = rope.load(L)
        x = gl.reshape(x, [KB, 4, 4, 2, 2])             # (row, t, ks, jj, i)
        x = gl.permute(x, (0, 2, 3, 1, 4))              # (row, ks, jj, t, i)
        return gl.convert_layout(gl.reshape(x, [KB, 64]), DOT, assert_trivial=True)

    @gluon.jit
    def _v_operand(lat, sc, kc: gl.constexpr, DOT: gl.constexpr, NOMUL: gl.constexpr = 0, VPAIR: gl.constexpr = 0):
        """O^T's A operand for keys [16 kc, 16 kc + 16): V16^T [512 logical rows, 16 keys] in registers. NOMUL
        (timing builds only, WRONG outputs): the fp8 values without their scale (cvt only). VPAIR (config vpair):
        the conversion's register order puts keys 2 t, 2 t + 1 of one column next to each other, so that each
        cvt.rn.f16x2.e4m3x2 yields one of the operand's (key, key + 1) registers (one byte permute for two of them)
        instead of a (column, column + 1) pair that two 16-bit permutes then regroup (SASS of the 8-head nope
        consumer loop: 876 -> 812 instructions, PRMT 128 -> 64, nothing added)."""
        # [16 keys, 4 groups (warp), 128 bytes]: 16 contiguous bytes (registers) at 16 g (lane group), keys from
        # the lane's quad position and two register bits
        LV: gl.constexpr = gl.DistributedLinearLayout(
            reg_bases=[[0, 1], [0, 2], [0, 4], [0, 8], [1, 0], [8, 0]],
            lane_bases=[[2, 0], [4, 0], [0, 16], [0, 32], [0, 64]],
            warp_bases=[[0, 128], [0, 256]], block_bases=[], shape=[16, 512])
        if VPAIR:
            LV3: gl.constexpr = gl.DistributedLinearLayout(
                reg_bases=[[1, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 4], [0, 0, 8], [8, 0, 0]],
                lane_bases=[[2, 0, 0], [4, 0, 0], [0, 0, 16], [0, 0, 32], [0, 0, 64]],
                warp_bases=[[0, 1, 0], [0, 2, 0]], block_bases=[], shape=[16, 4, 128])
        else:
            LV3: gl.constexpr = gl.DistributedLinearLayout(
                reg_bases=[[0, 0, 1], [0, 0, 2], [0, 0, 4], [0, 0, 8], [1, 0, 0], [8, 0, 0]],
                lane_bases=[[2, 0, 0], [4, 0, 0], [0, 0, 16], [0, 0, 32], [0, 0, 64]],
                warp_bases=[[0, 1, 0], [0, 2, 0]], block_bases=[], shape=[16, 4, 128])
        x = lat.slice(kc * 16, 16, dim=0).load(LV)
        x = gl.convert_layout(gl.reshape(x, [16, 4, 128]), LV3, assert_trivial=True)  # (VPAIR: registers reordered)
        if NOMUL:
            x = _cvt(x)
        else:
            s = sc.slice(kc * 16, 16, dim=0).load(gl.SliceLayout(2, LV3))
            x = _cvt_scale(x, (s * V_SCALE).to(gl.float16)[:, :, None])
        x = gl.reshape(x, [16, 4, 8, 8, 2])             # (key, w, g, R, r0)
        x = gl.permute(x, (3, 1, 4, 2, 0))              # (R, w, r0, g, key)
        return gl.convert_layout(gl.reshape(x, [512, 16]), DOT, assert_trivial=True)

    @gluon.jit
    def _stage_q(q_ptr, stride_qt, stride_qh, t, h0, num_heads, q_smem, qr_smem, HP: gl.constexpr,
                 ROPE: gl.constexpr, R_PHYS: gl.constexpr, Q_L: gl.constexpr):
        """q of heads h0 + [0, HP) into shared memory as the consumers read it: the 512 latent columns in S's
        permuted order (_s_phys) as fp16, and with ROPE the RoPE part x V_SCALE as bf16 (columns permuted by _r_phys
        with R_PHYS, as _rope_operand reads them). Heads past num_heads are zeros."""
        qh = h0 + gl.arange(0, HP, gl.SliceLayout(1, Q_L))
        qd = gl.arange(0, 512, gl.SliceLayout(0, Q_L))
        q_row = q_ptr + t * stride_qt + qh[:, None] * stride_qh
        hmask = (qh < num_heads)[:, None]
        q = gl.load(q_row + _s_phys(qd)[None, :], mask=hmask, other=0.0).to(gl.float16)
        q_smem.store(q)
        if ROPE:
            qr = gl.arange(0, 64, gl.SliceLayout(0, Q_L))
            if R_PHYS:
                qr = _r_phys(qr)
            qr_smem.store((gl.load(q_row + 512 + qr[None, :], mask=hmask, other=0.0).to(gl.float32)
                           * V_SCALE).to(gl.bfloat16))

    @gluon.jit
    def _prefetch_idx_l1(idx_row, start, hi, PW: gl.constexpr):
        """prefetch.global.L1 of the lines holding top-k entries [start, start + KB) below hi (KB int32 = 256 B: four
        64-byte pieces, each within one line, one lane of warp 0 each); the other lanes issue nothing."""
        L: gl.constexpr = gl.BlockedLayout([1], [32], [PW], [0])
        e = gl.arange(0, 32 * PW, L)
        j = start + 16 * e
        go = ((e < KB // 16) & (j < hi)).to(gl.int32)
        ptr = idx_row + gl.where(go != 0, j, 0)
        gl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p prefetch.global.L1 [$1]; mov.b32 $0, 0; }",
            "=r,l,r", [ptr, go], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _producer(idx_row, lo, hi, num_slots, lat_ptr, scale_ptr, rope_ptr, raw_lat, raw_sc, raw_rope, full, free,
                  stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
                  HAS_ROPE: gl.constexpr, NSTAGES: gl.constexpr, PW: gl.constexpr,
                  IDXPF: gl.constexpr = 0, PROFILE: gl.constexpr = 0):
        """Per block: wait for its stage to be free, cp.async its rows, arrive on full when they land (noinc).
        PROFILE 2 (timing builds only, wrong outputs): no copies, each stage handed over as it is.
        IDXPF > 0 (config idxpf): the index lines of the block IDXPF past the next are asked into L1 (_prefetch_idx_l1),
        so that the next-block index loads, which the producer waits on, hit L1."""
        LAT_L: gl.constexpr = _copy_layout(512, 1, PW)
        SC_L: gl.constexpr = _scale_layout(KB, PW)
        ROPE_L: gl.constexpr = _copy_layout(64, 2, PW)
        LS: gl.constexpr = gl.SliceLayout(1, LAT_L)
        SS: gl.constexpr = gl.SliceLayout(1, SC_L)
        RS: gl.constexpr = gl.SliceLayout(1, ROPE_L)
        cols = gl.arange(0, 512, gl.SliceLayout(0, LAT_L))
        gcols = gl.arange(0, 4, gl.SliceLayout(0, SC_L))
        rcols = gl.arange(0, 64, gl.SliceLayout(0, ROPE_L))
        nblocks = gl.cdiv(hi - lo, KB)
        nx_lat = _idx(idx_row, lo, hi, KB, LS)
        nx_sc = _idx(idx_row, lo, hi, KB, SS)
        nx_rope = _idx(idx_row, lo, hi, KB, RS)
        if IDXPF > 0:
            for i in gl.static_range(IDXPF):
                _prefetch_idx_l1(idx_row, lo + (i + 1) * KB, hi, PW)
        for b in range(nblocks):
            st = b % NSTAGES
            # the consumer is done with block b - NSTAGES (mbarriers start with phase 1 complete)
            mbarrier.wait(free.index(st), ((b // NSTAGES) & 1) ^ 1)
            if PROFILE != 2:
                valid = (nx_lat >= 0) & (nx_lat < num_slots)
                slot = gl.where(valid, nx_lat, 0).to(gl.int64)
                async_copy.async_copy_global_to_shared(raw_lat.index(st),
                                                       lat_ptr + slot[:, None] * stride_lat + cols[None, :],
                                                       mask=valid[:, None])
                valid = (nx_sc >= 0) & (nx_sc < num_slots)
                slot = gl.where(valid, nx_sc, 0).to(gl.int64)
                async_copy.async_copy_global_to_shared(raw_sc.index(st),
                                                       scale_ptr + slot[:, None] * stride_scale + gcols[None, :],
                                                       mask=valid[:, None])
                if HAS_ROPE:
                    valid = (nx_rope >= 0) & (nx_rope < num_slots)
                    slot = gl.where(valid, nx_rope, 0).to(gl.int64)
                    async_copy.async_copy_global_to_shared(raw_rope.index(st),
                                                           rope_ptr + slot[:, None] * stride_rope + rcols[None, :],
                                                           mask=valid[:, None])
            async_copy.mbarrier_arrive(full.index(st), increment_count=False)
            nx_lat = _idx(idx_row, lo + (b + 1) * KB, hi, KB, LS)
            nx_sc = _idx(idx_row, lo + (b + 1) * KB, hi, KB, SS)
            nx_rope = _idx(idx_row, lo + (b + 1) * KB, hi, KB, RS)
            if IDXPF > 0:
                _prefetch_idx_l1(idx_row, lo + (b + 1 + IDXPF) * KB, hi, PW)
        async_copy.wait_group(0)

    @gluon.jit
    def _group_mma(lat, q_smem, zero, g: gl.constexpr, DOT: gl.constexpr):
        """Latent group g's S^T product over its unscaled fp8 values (_k_operand_raw), into a zero accumulator,
        async."""
        return warpgroup_mma(_k_operand_raw(lat, g, DOT), q_smem.slice(g * 128, 128, dim=1).permute((1, 0)), zero,
                             is_async=True)

    @gluon.jit
    def _s_raw(lat, sc, rope_a, q_smem, qr_smem, HAS_ROPE: gl.constexpr, HP: gl.constexpr, MMA: gl.constexpr,
               DOT: gl.constexpr):
        """S^T [64 keys, HP] of one block (config sraw): one accumulator per latent group over the fp8 values without
        their scale (_k_operand_raw: one cvt per pair, no fp16 multiply), the group scales x V_SCALE applied in fp32
        afterwards (exact powers of two), plus the RoPE product (rope_a: its A operand, registers or the stage). The
        same products as _k_operand's, summed in another order."""
        ROW: gl.constexpr = gl.SliceLayout(1, MMA)
        zero = gl.zeros([64, HP], gl.float32, MMA)
        # at most two products in flight (their register A operands live), one at 32 heads: more make ptxas
        # serialize every wgmma or spill; each group's accumulator is scaled into s as soon as it retired
        c0, c1 = _row_scales(sc, 0, ROW)
        c2, c3 = _row_scales(sc, 1, ROW)
        ONE: gl.constexpr = HP == 32
        if HAS_ROPE:
            sr = warpgroup_mma(rope_a, qr_smem.permute((1, 0)), zero, is_async=True)
            if ONE:
                sr = warpgroup_mma_wait(0, deps=(sr,))
        s0 = _group_mma(lat, q_smem, zero, 0, DOT)
        if ONE:
            s0 = warpgroup_mma_wait(0, deps=(s0,))
        elif HAS_ROPE:
            sr = warpgroup_mma_wait(1, deps=(sr,))
        s1 = _group_mma(lat, q_smem, zero, 1, DOT)
        s0 = warpgroup_mma_wait(1 - ONE, deps=(s0,))  # (one at 32 heads: s1 too)
        s = s0 * c0[:, None]
        if HAS_ROPE:
            s = sr + s
        s2 = _group_mma(lat, q_smem, zero, 2, DOT)
        s1 = warpgroup_mma_wait(1 - ONE, deps=(s1,))
        s = s + s1 * c1[:, None]
        s3 = _group_mma(lat, q_smem, zero, 3, DOT)
        s2, s3 = warpgroup_mma_wait(0, deps=(s2, s3))
        return s + s2 * c2[:, None] + s3 * c3[:, None]

    @gluon.jit
    def _consumer(q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads, qk_scale,
                  out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls, stride_lh,
                  q_smem, qr_smem, raw_lat, raw_sc, raw_rope, p_smem, full, free,
                  HAS_ROPE: gl.constexpr, HP: gl.constexpr, NSTAGES: gl.constexpr, PV_DEPTH: gl.constexpr,
                  num_warps: gl.constexpr, SRAW: gl.constexpr = 0, VST: gl.constexpr = 0, VPAIR: gl.constexpr = 0):
        """q (permuted) to shared memory, then per block: S^T, online softmax, P^T, O^T += V16^T P^T; the epilogue.
        SRAW (config sraw): S^T by _s_raw. VST (config vst): the epilogue by _store_ot_phys."""
        Q_L: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [num_warps, 1], [1, 0])
        MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                      instr_shape=[16, HP, 16])
        DOT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
        ROW: gl.constexpr = gl.SliceLayout(1, MMA)   # [KB] keys, or [512] logical rows of O^T
        COL: gl.constexpr = gl.SliceLayout(0, MMA)   # [HP] heads

        # (16 heads: the RoPE operand is read into registers in _rope_operand's column order)
        _stage_q(q_ptr, stride_qt, stride_qh, t, h0, num_heads, q_smem, qr_smem, HP, HAS_ROPE, HP == 16, Q_L)
        qk_scale = qk_scale * 256.0  # S^T is in V_SCALE units
        fence_async_shared()
        gl.thread_barrier()

        m_i = gl.full([HP], NEG_INF, gl.float32, COL)
        l_i = gl.zeros([HP], gl.float32, COL)
        acc = gl.zeros([512, HP], gl.float32, MMA)
        nblocks = gl.cdiv(hi - lo, KB)
        cur = _idx(idx_row, lo, hi, KB, ROW)
        for b in range(nblocks):
            st = b % NSTAGES
            ix = cur
            lat = raw_lat.index(st)
            sc = raw_sc.index(st)
            mbarrier.wait(full.index(st), (b // NSTAGES) & 1)
            ra = raw_rope.index(st)  # the RoPE A operand (unused without RoPE)
            if HAS_ROPE:
                if HP == 16:
                    ra = _rope_operand(raw_rope.index(st), DOT)
                else:
                    # 32 heads: the 16 more registers of a register RoPE operand make ptxas serialize every wgmma
                    # (C7512) or spill; wgmma reads the stage itself, behind a proxy fence
                    fence_async_shared()
            if SRAW:
                s = _s_raw(lat, sc, ra, q_smem, qr_smem, HAS_ROPE, HP, MMA, DOT)
            else:
                s = gl.zeros([KB, HP], gl.float32, MMA)
                if HAS_ROPE:
                    s = warpgroup_mma(ra, qr_smem.permute((1, 0)), s, is_async=True)
                scs = _k_scales(sc)
                for g in gl.static_range(4):
                    a = _k_operand(lat, scs[g], g, DOT)
                    s = warpgroup_mma(a, q_smem.slice(g * 128, 128, dim=1).permute((1, 0)), s, is_async=True)
                    # 16 heads: at most two groups' operands live (else ptxas hoists all four and spills 32 B);
                    # 32 heads (128 accumulator registers): one group at a time, else ptxas serializes every wgmma
                    # (C7512, register resources) or spills (compile check)
                    if HP == 16 and g < 3:
                        s = warpgroup_mma_wait(1, deps=(s,))
                    if HP == 32:
                        s = warpgroup_mma_wait(0, deps=(s,))
                s = warpgroup_mma_wait(0, deps=(s,))

            p, alpha, m_new = _softmax_keys(s, ix, num_slots, qk_scale, m_i)
            l_i = l_i * alpha + gl.sum(p, 0)
            acc = acc * alpha[None, :]
            m_i = m_new
            p_smem.store(p.to(gl.float16))
            fence_async_shared()
            gl.thread_barrier()
            # the next block's entries, loaded here: a load in flight at a proxy fence (MEMBAR) stalls it
            cur = _idx(idx_row, lo + (b + 1) * KB, hi, KB, ROW)
            for kc in gl.static_range(4):
                a = _v_operand(lat, sc, kc, DOT, 0, VPAIR)
                acc = warpgroup_mma(a, p_smem.slice(kc * 16, 16, dim=0), acc, is_async=True)
                if kc < 3:
                    acc = warpgroup_mma_wait(PV_DEPTH, deps=(acc,))
            # every consumer thread has read the stage (the arrive follows a partition barrier)
            mbarrier.arrive(free.index(st), count=1)
            # P @ V retires within the block: a wgmma left in flight across the next block's mbarrier wait (a
            # branch) makes ptxas serialize every wgmma of the kernel (C7513), as the compile check showed
            acc = warpgroup_mma_wait(0, deps=(acc,))

        # ---- epilogue: as gluon_ws, rows un-permuted -------------------------------------------------
        if VST:
            _store_ot_phys(acc, m_i, l_i, t, split, h0, num_heads, out_ptr, stride_ot, stride_os, stride_oh,
                           lse_ptr, stride_lt, stride_ls, stride_lh, HP, COL)
        else:
            _store_ot(acc, m_i, l_i, _v_phys(gl.arange(0, 512, ROW)), t, split, h0, num_heads, out_ptr, stride_ot,
                      stride_os, stride_oh, lse_ptr, stride_lt, stride_ls, stride_lh, HP, COL, True)

    @gluon.jit(do_not_specialize=["num_slots", "num_heads", "topk", "keys_per_split"])
    def sparse_mla_rx_kernel(
            q_ptr, stride_qt, stride_qh,
            lat_ptr, scale_ptr, rope_ptr,
            idx_ptr, stride_it, len_ptr,
            out_ptr, stride_ot, stride_os, stride_oh,
            lse_ptr, stride_lt, stride_ls, stride_lh,
            num_slots, num_heads, topk, keys_per_split, qk_scale,
            stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
            HAS_ROPE: gl.constexpr, HAS_LEN: gl.constexpr,
            HP: gl.constexpr, NSTAGES: gl.constexpr, PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
            num_warps: gl.constexpr, PV_DEPTH: gl.constexpr = 1, IDXPF: gl.constexpr = 0, SRAW: gl.constexpr = 0,
            VST: gl.constexpr = 0, VPAIR: gl.constexpr = 0):
        """Grid (T, cdiv(num_heads, HP), splits); arguments as gluon_ws.sparse_mla_ws_kernel (fp8 rows)."""
        gl.static_assert(num_warps == 4, "the consumer is one warpgroup")
        gl.static_assert(NSTAGES >= 2, "at least one block in flight while one computes")
        t = gl.program_id(0).to(gl.int64)
        h0 = gl.program_id(1) * HP
        split = gl.program_id(2)

        RAW_S: gl.constexpr = gl.SwizzledSharedLayout(16, 1, 8, [1, 0])
        SC_S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        if HP == 16:
            ROPE_S: gl.constexpr = gl.SwizzledSharedLayout(8, 1, 8, [1, 0])  # 16-byte chunks XOR row: no conflicts
        else:
            ROPE_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, 64], gl.bfloat16)
        Q_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HP, 512], gl.float16)
        QR_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HP, 64], gl.bfloat16)
        P_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, HP], gl.float16)

        raw_lat = gl.allocate_shared_memory(gl.float8e4nv, [NSTAGES, KB, 512], RAW_S)
        raw_sc = gl.allocate_shared_memory(gl.float32, [NSTAGES, KB, 4], SC_S)
        q_smem = gl.allocate_shared_memory(gl.float16, [HP, 512], Q_S)
        p_smem = gl.allocate_shared_memory(gl.float16, [KB, HP], P_S)
        if HAS_ROPE:
            raw_rope = gl.allocate_shared_memory(gl.bfloat16, [NSTAGES, KB, 64], ROPE_S)
            qr_smem = gl.allocate_shared_memory(gl.bfloat16, [HP, 64], QR_S)
        else:
            raw_rope = raw_sc
            qr_smem = q_smem
        full = gl.allocate_shared_memory(gl.int64, [NSTAGES, 1], mbarrier.MBarrierLayout())
        free = gl.allocate_shared_memory(gl.int64, [NSTAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NSTAGES):
            mbarrier.init(full.index(i), count=PRODUCER_WARPS * 32)  # one noinc cp.async arrive per thread
            mbarrier.init(free.index(i), count=1)

        lo, hi, idx_row = _list_bounds(idx_ptr, stride_it, len_ptr, t, split, topk, keys_per_split, HAS_LEN)

        gl.warp_specialize([
            (_consumer, (q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads,
                         qk_scale, out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls,
                         stride_lh, q_smem, qr_smem, raw_lat, raw_sc, raw_rope, p_smem, full, free, HAS_ROPE, HP,
                         NSTAGES, PV_DEPTH, num_warps, SRAW, VST, VPAIR)),
            (_producer, (idx_row, lo, hi, num_slots, lat_ptr, scale_ptr, rope_ptr, raw_lat, raw_sc, raw_rope,
                         full, free, stride_lat, stride_scale, stride_rope, HAS_ROPE, NSTAGES, PRODUCER_WARPS,
                         IDXPF)),
        ], [PRODUCER_WARPS], [PRODUCER_REGS])

    @gluon.jit
    def _opaque_zero(x):
        """0 from inline PTX with side effects (x: any int32 scalar, unused), so LLVM cannot hoist what depends on it
        out of the loop it is in. (ptxas sees the constant, but did not hoist the descriptors again: compile check.)"""
        return gl.inline_asm_elementwise("mov.u32 $0, 0;", "=r,r", [x], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _consumer_pp(q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads, qk_scale,
                     out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls, stride_lh,
                     q3, qr3, raw_lat, raw_sc, raw_rope, p_smem, macc, mm_s, ml_s, mbar, full, free,
                     HAS_ROPE: gl.constexpr, HP: gl.constexpr, NSTAGES: gl.constexpr, PV_DEPTH: gl.constexpr,
                     H: gl.constexpr, SPILLFIX: gl.constexpr = 0, SRAW: gl.constexpr = 0,
                     VST: gl.constexpr = 0, PROFILE: gl.constexpr = 0, VPAIR: gl.constexpr = 0):
        """Ping-pong consumers (config pingpong=1, two consumers): consumer H takes the blocks
        b = H, H + 2, ... whole (all 512 latent columns, _consumer's products and online softmax, its own P buffer), so
        the two never wait for each other inside the loop: one's tensor-core work overlaps the other's conversions and
        softmax. At the end consumer 1 hands its (m, l, O^T) to consumer 0 through shared memory (macc, mm_s, ml_s,
        mbar[0]), which merges the two partial softmaxes and stores out / lse. Both store q (the same values). At
        32-head programs (HP > 16, 128 accumulator registers a consumer) macc is the raw latent stages' memory, written
        once consumer 0 has arrived on mbar[1] after its last block; the row sums are reduced every block (not kept
        per element), one S^T product is in flight at a time and wgmma reads the RoPE operand from the stage. SPILLFIX
        (config spillfix 1): the shared-memory descriptors of q, q_rope and P (~40 64-bit values, loop-invariant: LLVM
        hoisted them out of the loop and ptxas spilled them at 16-head programs) are rebuilt in each block from an
        opaque 0 (q3 / qr3 [1, HP, ...]). (Three such consumers, blocks round robin, were measured slower three times:
        module docstring.)
        PROFILE 1 (timing builds only, wrong outputs): each stage freed as soon as it is full, no products, no
        output; 3: V16 without its scale (_v_operand NOMUL: what V's fp16 multiplies cost, session 60)."""
        NW: gl.constexpr = 4
        Q_L: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [NW, 1], [1, 0])
        MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NW, 1],
                                                      instr_shape=[16, HP, 16])
        DOT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
        ROW: gl.constexpr = gl.SliceLayout(1, MMA)
        COL: gl.constexpr = gl.SliceLayout(0, MMA)

        OPQ: gl.constexpr = (SPILLFIX & 1) != 0
        if OPQ:  # q3 / qr3: [1, HP, 512] / [1, HP, 64] (else the 2D buffers themselves)
            _stage_q(q_ptr, stride_qt, stride_qh, t, h0, num_heads, q3.index(0), qr3.index(0), HP, HAS_ROPE,
                     HP <= 16, Q_L)
        else:
            _stage_q(q_ptr, stride_qt, stride_qh, t, h0, num_heads, q3, qr3, HP, HAS_ROPE, HP <= 16, Q_L)
        qk_scale = qk_scale * 256.0  # S^T is in V_SCALE units
        fence_async_shared()
        gl.thread_barrier()

        m_i = gl.full([HP], NEG_INF, gl.float32, COL)
        if HP > 16:
            l_i = gl.zeros([HP], gl.float32, COL)
        else:
            l_e = gl.zeros([KB, HP], gl.float32, MMA)  # row sums per element, reduced over the keys at the end
        acc = gl.zeros([512, HP], gl.float32, MMA)
        nblocks = gl.cdiv(hi - lo, KB)
        if PROFILE == 1:
            for b in range(H, nblocks, 2):
                mbarrier.wait(full.index(b % NSTAGES), (b // NSTAGES) & 1)
                mbarrier.arrive(free.index(b % NSTAGES), count=1)
            return
        for b in range(H, nblocks, 2):
            if OPQ:
                # wgmma's shared-memory descriptors from an opaque 0: built here in every block, not hoisted out of
                # the loop by LLVM and held (~40 64-bit values; at 16-head programs they spilled)
                z = _opaque_zero(b)
                q_smem = q3.index(z)
                qr_smem = qr3.index(z)
                p_buf = p_smem.index(H + z)
            else:
                q_smem = q3
                qr_smem = qr3
                p_buf = p_smem.index(H)
            st = b % NSTAGES
            ix = _idx(idx_row, lo + b * KB, hi, KB, ROW)
            lat = raw_lat.index(st)
            sc = raw_sc.index(st)
            mbarrier.wait(full.index(st), (b // NSTAGES) & 1)
            ra = raw_rope.index(st)  # the RoPE A operand (unused without RoPE)
            if HAS_ROPE:
                if HP <= 16:
                    ra = _rope_operand(raw_rope.index(st), DOT)
                else:
                    # 32 heads: wgmma reads the stage itself, behind a proxy fence (as _consumer's)
                    fence_async_shared()
            if SRAW:  # (config sraw: S^T by _s_raw)
                s = _s_raw(lat, sc, ra, q_smem, qr_smem, HAS_ROPE, HP, MMA, DOT)
            else:
                s = gl.zeros([KB, HP], gl.float32, MMA)
                if HAS_ROPE:
                    s = warpgroup_mma(ra, qr_smem.permute((1, 0)), s, is_async=True)
                scs = _k_scales(sc)
                for g in gl.static_range(4):
                    s = warpgroup_mma(_k_operand(lat, scs[g], g, DOT),
                                      q_smem.slice(g * 128, 128, dim=1).permute((1, 0)), s, is_async=True)
                    if g < 3:
                        s = warpgroup_mma_wait(0 if HP > 16 else 1, deps=(s,))
                s = warpgroup_mma_wait(0, deps=(s,))

            p, alpha, m_new = _softmax_keys(s, ix, num_slots, qk_scale, m_i)
            if HP > 16:
                l_i = l_i * alpha + gl.sum(p, 0)
            else:
                l_e = l_e * alpha[None, :] + p
            acc = acc * alpha[None, :]
            m_i = m_new
            p_buf.store(p.to(gl.float16))
            fence_async_shared()
            gl.thread_barrier()
            for kc in gl.static_range(4):
                acc = warpgroup_mma(_v_operand(lat, sc, kc, DOT, PROFILE == 3, VPAIR),
                                    p_buf.slice(kc * 16, 16, dim=0), acc, is_async=True)
                if kc < 3:
                    acc = warpgroup_mma_wait(PV_DEPTH, deps=(acc,))
            mbarrier.arrive(free.index(st), count=1)
            acc = warpgroup_mma_wait(0, deps=(acc,))
        if HP <= 16:
            l_i = gl.sum(l_e, 0)

        acc, m_i, l_i = _pp_merge(acc, m_i, l_i, macc, mm_s, ml_s, mbar, H, HP > 16, MMA, COL)
        if H == 0:
            if VST:
                _store_ot_phys(acc, m_i, l_i, t, split, h0, num_heads, out_ptr, stride_ot, stride_os, stride_oh,
                               lse_ptr, stride_lt, stride_ls, stride_lh, HP, COL)
            else:
                _store_ot(acc, m_i, l_i, _v_phys(gl.arange(0, 512, ROW)), t, split, h0, num_heads, out_ptr,
                          stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls, stride_lh, HP, COL, True)

    @gluon.jit
    def _pp_merge(acc, m_i, l_i, macc, mm_s, ml_s, mbar, H: gl.constexpr, IN_STAGES: gl.constexpr,
                  MMA: gl.constexpr, COL: gl.constexpr):
        """The end of a ping-pong pair (gluon_rx's _consumer_pp, gluon_rxb's _consumer_b): consumer 1 (H == 1) hands
        its (m, l, O^T) to consumer 0 through shared memory (macc, mm_s, ml_s, mbarrier mbar[0]); consumer 0 merges
        the two partial softmaxes and returns the merged (O^T, m, l) (consumer 1 gets its own back, unused). These
        buffers are used once and nothing else touches them. IN_STAGES: macc is the stages' memory, so consumer 1
        writes it only once consumer 0 has arrived on mbar[1] after its last block (every block's copies have landed
        by then, as each was waited on)."""
        if H == 1:
            if IN_STAGES:
                mbarrier.wait(mbar.index(1), 0)
            macc.store(acc)
            mm_s.store(m_i)
            ml_s.store(l_i)
            mbarrier.arrive(mbar.index(0), count=1)
        else:
            if IN_STAGES:
                mbarrier.arrive(mbar.index(1), count=1)
            mbarrier.wait(mbar.index(0), 0)
            m_o = mm_s.load(COL)
            l_o = ml_s.load(COL)
            m = gl.maximum(m_i, m_o)
            m_use = gl.where(m == NEG_INF, 0.0, m)
            a_s = gl.exp2(m_i - m_use)
            a_o = gl.exp2(m_o - m_use)
            l_i = l_i * a_s + l_o * a_o
            acc = acc * a_s[None, :] + macc.load(MMA) * a_o[None, :]
            m_i = m
        return acc, m_i, l_i

    @gluon.jit
    def _pp_barriers(NSTAGES: gl.constexpr, PRODUCER_WARPS: gl.constexpr):
        """The mbarriers of a ping-pong program (sparse_mla_rx2_kernel, gluon_rxb's kernel): full[NSTAGES] (one noinc
        cp.async arrive per producer thread), free[NSTAGES] (the one consumer that took the block), and mbar[2] (the
        merge's hand-over; consumer 0 done with the stages, where the merge buffer lives in them)."""
        full = gl.allocate_shared_memory(gl.int64, [NSTAGES, 1], mbarrier.MBarrierLayout())
        free = gl.allocate_shared_memory(gl.int64, [NSTAGES, 1], mbarrier.MBarrierLayout())
        mbar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NSTAGES):
            mbarrier.init(full.index(i), count=PRODUCER_WARPS * 32)
            mbarrier.init(free.index(i), count=1)
        mbarrier.init(mbar.index(0), count=1)
        mbarrier.init(mbar.index(1), count=1)
        return full, free, mbar

    @gluon.jit
    def _list_bounds(idx_ptr, stride_it, len_ptr, t, split, topk, keys_per_split, HAS_LEN: gl.constexpr):
        """Token t's top-k entries that split `split` walks, [lo, hi) (cut at topk_length with HAS_LEN), and its
        index row."""
        end = topk
        if HAS_LEN:
            end = gl.minimum(gl.load(len_ptr + t), topk)
        lo = split * keys_per_split
        hi = gl.minimum(lo + keys_per_split, end)
        return lo, hi, idx_ptr + t * stride_it

    @gluon.jit(do_not_specialize=["num_slots", "num_heads", "topk", "keys_per_split"])
    def sparse_mla_rx2_kernel(
            q_ptr, stride_qt, stride_qh,
            lat_ptr, scale_ptr, rope_ptr,
            idx_ptr, stride_it, len_ptr,
            out_ptr, stride_ot, stride_os, stride_oh,
            lse_ptr, stride_lt, stride_ls, stride_lh,
            num_slots, num_heads, topk, keys_per_split, qk_scale,
            stride_lat: gl.constexpr, stride_scale: gl.constexpr, stride_rope: gl.constexpr,
            HAS_ROPE: gl.constexpr, HAS_LEN: gl.constexpr,
            HP: gl.constexpr, NSTAGES: gl.constexpr, PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
            CONSUMER_REGS: gl.constexpr, num_warps: gl.constexpr, PV_DEPTH: gl.constexpr = 1,
            SPILLFIX: gl.constexpr = 0, IDXPF: gl.constexpr = 0, SRAW: gl.constexpr = 0,
            VST: gl.constexpr = 0, PROFILE: gl.constexpr = 0, VPAIR: gl.constexpr = 0):
        """sparse_mla_rx_kernel with two ping-pong consumer warpgroups (_consumer_pp); same grid and arguments, plus
        the consumers' register budget. PROFILE (timing builds, wrong outputs): 1 the producer alone (_consumer_pp),
        2 the consumers alone (_producer), 3 V16 without its scale."""
        gl.static_assert(num_warps == 4, "each consumer is one warpgroup")
        gl.static_assert(NSTAGES >= 2, "at least one block in flight while one computes")
        t = gl.program_id(0).to(gl.int64)
        h0 = gl.program_id(1) * HP
        split = gl.program_id(2)

        RAW_S: gl.constexpr = gl.SwizzledSharedLayout(16, 1, 8, [1, 0])
        SC_S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
        if HP <= 16:
            ROPE_S: gl.constexpr = gl.SwizzledSharedLayout(8, 1, 8, [1, 0])
        else:  # 32 heads: wgmma reads the RoPE stage (_consumer_pp)
            ROPE_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, 64], gl.bfloat16)
        Q_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HP, 512], gl.float16)
        QR_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([HP, 64], gl.bfloat16)
        P_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([KB, HP], gl.float16)
        MACC_S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])

        raw_lat = gl.allocate_shared_memory(gl.float8e4nv, [NSTAGES, KB, 512], RAW_S)
        raw_sc = gl.allocate_shared_memory(gl.float32, [NSTAGES, KB, 4], SC_S)
        OPQ: gl.constexpr = (SPILLFIX & 1) != 0
        if OPQ:  # a leading dimension of 1 that _consumer_pp indexes by an opaque 0
            q3 = gl.allocate_shared_memory(gl.float16, [1, HP, 512], Q_S)
        else:
            q3 = gl.allocate_shared_memory(gl.float16, [HP, 512], Q_S)
        p_smem = gl.allocate_shared_memory(gl.float16, [2, KB, HP], P_S)
        if HP > 16:
            # consumer 1's O^T (64 KB at 32 heads) in the raw latent stages, once consumer 0 is done with them
            gl.static_assert(NSTAGES * KB * 512 >= 512 * HP * 4, "the merge buffer needs two raw stages")
            macc = raw_lat._reinterpret(gl.float32, [512, HP], MACC_S)
        else:
            macc = gl.allocate_shared_memory(gl.float32, [512, HP], MACC_S)     # consumer 1's O^T for the merge
        M1_S: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
        mm_s = gl.allocate_shared_memory(gl.float32, [HP], M1_S)            # its m
        ml_s = gl.allocate_shared_memory(gl.float32, [HP], M1_S)            # its l
        if HAS_ROPE:
            raw_rope = gl.allocate_shared_memory(gl.bfloat16, [NSTAGES, KB, 64], ROPE_S)
            if OPQ:
                qr3 = gl.allocate_shared_memory(gl.bfloat16, [1, HP, 64], QR_S)
            else:
                qr3 = gl.allocate_shared_memory(gl.bfloat16, [HP, 64], QR_S)
        else:
            raw_rope = raw_sc
            qr3 = q3
        full, free, mbar = _pp_barriers(NSTAGES, PRODUCER_WARPS)
        lo, hi, idx_row = _list_bounds(idx_ptr, stride_it, len_ptr, t, split, topk, keys_per_split, HAS_LEN)

        gl.warp_specialize([
            (_consumer_pp, (q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads,
                            qk_scale, out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls,
                            stride_lh, q3, qr3, raw_lat, raw_sc, raw_rope, p_smem, macc, mm_s, ml_s, mbar,
                            full, free, HAS_ROPE, HP, NSTAGES, PV_DEPTH, 0, SPILLFIX, SRAW, VST, PROFILE, VPAIR)),
            (_consumer_pp, (q_ptr, stride_qt, stride_qh, idx_row, lo, hi, t, h0, split, num_slots, num_heads,
                            qk_scale, out_ptr, stride_ot, stride_os, stride_oh, lse_ptr, stride_lt, stride_ls,
                            stride_lh, q3, qr3, raw_lat, raw_sc, raw_rope, p_smem, macc, mm_s, ml_s, mbar,
                            full, free, HAS_ROPE, HP, NSTAGES, PV_DEPTH, 1, SPILLFIX, SRAW, VST, PROFILE, VPAIR)),
            (_producer, (idx_row, lo, hi, num_slots, lat_ptr, scale_ptr, rope_ptr, raw_lat, raw_sc, raw_rope,
                         full, free, stride_lat, stride_scale, stride_rope, HAS_ROPE, NSTAGES, PRODUCER_WARPS,
                         IDXPF, PROFILE)),
        ], [4, PRODUCER_WARPS], [CONSUMER_REGS, PRODUCER_REGS])


def run_attention_rx(q, flat, layout: KVLayout, indices, sm_scale, topk_length, out, lse, splits: int = 1,
                     part_o=None, part_lse=None, config: RxConfig | None = None, profile: int = 0) -> None:
    """launch.run_attention's contract over fp8 rows through sparse_mla_rx_kernel (native few-head variant).
    profile != 0 (ping-pong configs only) builds a timing variant with WRONG outputs: 1 the producer alone (the
    consumers free each stage as soon as it is full), 2 the consumers alone (no gathers: they compute on whatever
    the stages hold), 3 the full kernel without V16's fp16 multiplies by the group scales (session 60)."""
    from . import launch
    if not layout.is_fp8:
        raise ValueError(f"the register-operand kernel takes fp8 rows only, got layout {layout.value}")
    t, h, d = q.shape
    if h > 32:
        raise ValueError(f"the register-operand kernel carries at most 32 heads, got q with {h}")
    cfg = config or rx_config(layout, h, d)
    hp = 8 if cfg.hp8 and h <= 8 else rx_hp(h)
    if cfg.pv_depth not in (0, 1, 2):
        raise ValueError(f"config.pv_depth must be 0, 1 or 2, got {cfg.pv_depth}")
    if cfg.producer_warps not in (4, 8):  # (Triton pads fewer to a warpgroup: rx_consumer_regs)
        raise ValueError(f"config.producer_warps must be 4 or 8, got {cfg.producer_warps}")
    if cfg.consumers not in (1, 2):  # (three ping-pong consumers were measured slower twice: module docstring)
        raise ValueError(f"config.consumers must be 1 or 2, got {cfg.consumers}")
    if cfg.pingpong != (cfg.consumers == 2):
        # (two consumers once also ran in step with pingpong 0, the halves: removed in session 34)
        raise ValueError(f"config.pingpong must be 1 with two consumers and 0 with one, "
                         f"got pingpong {cfg.pingpong}, {cfg.consumers} consumers, {hp} heads a program")
    if cfg.spillfix not in (0, 1) or (cfg.spillfix and not cfg.pingpong):
        raise ValueError(f"config.spillfix must be 0 or 1 (1: ping-pong consumers only), got spillfix {cfg.spillfix}, "
                         f"pingpong {cfg.pingpong}")
    if cfg.maxnreg and (cfg.consumers != 1 or cfg.maxnreg % 8 or not 64 <= cfg.maxnreg <= 248):
        raise ValueError(f"config.maxnreg must be 0 or a multiple of 8 in [64, 248], with one consumer; got maxnreg "
                         f"{cfg.maxnreg}, consumers {cfg.consumers}")
    if cfg.sraw not in (0, 1):
        raise ValueError(f"config.sraw must be 0 or 1, got {cfg.sraw}")
    if cfg.vst not in (0, 1):
        raise ValueError(f"config.vst must be 0 or 1, got {cfg.vst}")
    if cfg.vpair not in (0, 1):
        raise ValueError(f"config.vpair must be 0 or 1, got {cfg.vpair}")
    if not 0 <= cfg.idxpf <= 4:
        raise ValueError(f"config.idxpf must be 0..4 (blocks past the next whose index lines go to L1), got "
                         f"{cfg.idxpf}")
    if profile not in (0, 1, 2, 3) or (profile and cfg.consumers != 2):
        raise ValueError(f"profile must be 0..3 (1..3: ping-pong configs only), got {profile} with "
                         f"{cfg.consumers} consumers")
    grid = (t, -(-h // hp), splits)
    args = launch.kernel_args(q, flat, layout, indices, sm_scale, topk_length, out, lse, splits, part_o, part_lse, BN)
    flags = (d > LATENT_DIM and layout is KVLayout.FP8_DS_MLA, topk_length is not None)
    if cfg.consumers == 2:
        consumer_regs = rx_consumer_regs(cfg.consumers, cfg.producer_warps, cfg.producer_regs)
        _fast_launch(sparse_mla_rx2_kernel, grid, *args, *flags, hp, cfg.stages, cfg.producer_warps,
                     cfg.producer_regs, consumer_regs, num_warps=4, PV_DEPTH=cfg.pv_depth, SPILLFIX=cfg.spillfix,
                     IDXPF=cfg.idxpf, SRAW=cfg.sraw, VST=cfg.vst, PROFILE=profile, VPAIR=cfg.vpair)
    else:
        cap = {"maxnreg": cfg.maxnreg} if cfg.maxnreg else {}
        _fast_launch(sparse_mla_rx_kernel, grid, *args, *flags, hp, cfg.stages, cfg.producer_warps,
                     cfg.producer_regs, num_warps=4, PV_DEPTH=cfg.pv_depth, IDXPF=cfg.idxpf, SRAW=cfg.sraw,
                     VST=cfg.vst, VPAIR=cfg.vpair, **cap)
    launch.combine_splits(out, lse, part_o, part_lse, splits)
