"""Warp-specialized Gluon kernel of sparse MLA PREFILL over bf16 rows with query grouping, Hopper (sm_90).

STATUS: 'auto' runs it for every prefill launch on sm_90 at launch.GLUON_PREFILL_AUTO_HEADS (every head count;
'native', 'pad64' at <= 32 heads as one token's heads a 64-row program since session 12, and the 64-head programs
above 32 heads); DSATTN_SPARSE_MLA_IMPL=gluon_prefill forces it. Issue 3's rows beside FlashMLA at session 37
(871996a, bench/results/sparse_mla_s37_prefill_1024.json, _8192.json; the union lists built in one shared-memory
launch since then, grouping_smem.py): s_q 1024, 8 / 16 / 32 / 64 / 128 heads 0.226 / 0.355 / 0.541 / 0.722 / 1.419 ms
(FlashMLA's best 0.493 / 0.493 / 0.497 / 0.536 / 1.065); session 30 (e20dd97) read 0.231 / 0.367 / 0.567 / 0.719 /
1.425. Every schedule measured since
session 10, kept or removed, with its numbers and the commit that holds removed code: notes/sparse_mla.md (its section
"gluon_prefill.py's docstring, sessions 10-30" holds the passages moved out of this docstring in session 30).

Heads on M, M = 64 rows = G query tokens x HPT heads (grouping.group_shape: HPT 8 for 1..8 heads, 16, 32, 64;
G = 64 // HPT; 65..128 heads: two programs of 64 heads a token, G = 1). Row r of a program is token
token0 + g * G + r // HPT, head h0 + r % HPT. Neighbouring query tokens share most of their top-k keys, so
with G > 1 a program walks the group's UNION list built by grouping.build_groups:

    entries[g, i]  int32 slot (always a valid slot for i < counts[g])
    masks[g, i]    int32, bit j set when token g * G + j of the group attends to entry i

and one tile of gathered rows serves all G tokens (row r's score of entry i is -inf unless bit r // HPT of
masks[g, i] is set). With G == 1 the program reads its token's own index row (valid: 0 <= idx < N and
i < topk_length), as gluon64 / gluon_small do.

Per block of BN entries (one CTA per (group, head block)):

    S [64, BN]    = q_rope [64, 64] K_rope^T + q [64, 512] K^T      (bf16 x bf16 -> fp32, wgmma)
    O [64, 512]  += P_hi V + P_lo V                                   (bf16, V = K, P = P_hi + P_lo)

P_hi = bf16(P), P_lo = bf16(P - P_hi): P carries ~16 mantissa bits into P @ V (bf16 P alone misses the issue's
tolerance on peaked softmaxes: notes/sparse_mla.md, "Numerics"); the price is a second P @ V wgmma. The rows
need no conversion: S reads the gathered tile as B = tile^T, P @ V reads the same tile as B = V.
PrefillConfig.f16 = 1 (THE DEFAULT since session 11: one P @ V instead of two, 64 heads 0.731 vs 0.791 ms at s_q 1024,
prefill_config) instead converts each landed latent stage in place into fp16 x 2^-8 (V_SCALE, gluon_small's numerics:
exact but for values below 2^-6, fp16 subnormals) in the producer, and runs q (fp16, exact for bf16 values in fp16's
normal range) . K and one fp16 P @ V; q_rope is scaled by V_SCALE (exact) so the bf16 RoPE product lands in the same
units. Range: |q| up to 65504, and latent values below 2^24 (1 - 2^-12): config cvt_asm (the default since session 62)
converts by _bf16_to_f16_scaled, which scales in bf16 first and rounds once. (Session 60 found that the conversion as
written, fp16(fp32(x) x 2^-8), compiles to fp16(x) x 2^-8, the compiler having narrowed it: the PTX of
`bench/mla_gluon_check.py --kernel prefill --dump` shows cvt.rn.f16x2.f32 before mul.f16x2, so with cvt_asm=0 latent
values of magnitude >= 65520 become inf; tests/gpu/test_sparse_mla_prefill_gpu.py::test_pf_cvt_asm_large_latents.) The
bf16 schedule, DSATTN_PF_CONFIG=f16=0,cvt_pipe=0,producer_regs=56, has no such limit; normalized latents and queries sit
far inside either. Both pass the tolerance in a PyTorch emulation of the kernel's arithmetic
(tests/test_sparse_mla_prefill_impl.py::test_emulated_arithmetic, peaked q x 6 cases included, where bf16 P alone fails:
test_emulated_bf16_p_misses_tolerance) and in the GPU tests (tests/gpu/, peaked included).

PrefillConfig.cvt_pipe = 1 (THE DEFAULT since session 19; written in session 18): with f16, the producer gathers each
block's latent as four 128-column commit groups (_gather_groups; the RoPE columns with the last) and converts each
group as soon as it landed (_to_f16_group after wait_group of the groups still allowed in flight), instead of
converting the whole stage after all of it landed. Why: in session 18's Nsight Compute profile of the earlier default
(s_q 1024, 64 and 16 heads, bench/logs/s18_profile.log) consumer 0 spins on the stage's full barrier ~16% of its
time, and the producer executes 144 M of the kernel's 304 M warp instructions (FlashMLA's producer 18 M): the gather
of block b + 1 and its conversion must both fit under block b's compute with two stages. The same values land in the
stage, so outputs equal the earlier default's bit for bit. Measured on the H200 in session 19
(bench/gpu_s19_cvt_pipe.sh, bench/logs/s19_cvt_pipe.log; `dsattn bench ab`, bench/results/ab_s19_cvt_pipe_*.json),
ms cvt_pipe 0 -> 1: s_q 1024 64 heads 0.788 -> 0.747, 16 heads 0.474 -> 0.445; s_q 8192
16 heads 2.883 -> 2.722 (5.5-6.6% faster, 95% intervals 1.048-1.084; max_abs_out_diff 0); its GPU tests (43, bit
equality at 8..128 heads included) passed (bench/logs/s19_cvt_pipe_tests.log). Compile check: no spill at 8..64
heads, D 576 and 512.

Partitions (gl.warp_specialize):
  producer (worker, 4 warps): cp.async of each block's rows as stored (latent [BN, 512] and RoPE [BN, 64] into
      NVMMA-swizzled stages of a ring of NS stages, NS - 1 blocks in flight); invalid entries are masked copies
      (src-size 0: zero-filled, nothing read, so NaN rows behind them never reach the tile); once a block landed
      (cp.async.wait_group), fence.proxy.async, partition barrier, arrive on `full[stage]`. Before reusing a
      stage it waits on `free[stage]`.
  consumer warpgroup 0 (_wg_s, default partition, 4 warps): q [64, 512] into shared memory, q_rope [64, 64] into
      registers (a wgmma A operand: the 8 KB it would take in shared memory is what lets 2 x 64-key stages fit);
      per block: retire its previous P @ V, partition barrier, arrive `free`; wait `full`; S over all BN entries
      (wgmma N = BN: q is read from shared memory once a block); the online softmax (base 2) within its own rows;
      P (and the rescale factor alpha) into shared memory for warpgroup 1 (mbarriers p_ready / p_free); O[:, :256]
      += P V with P from its registers, left in flight.
  consumer warpgroup 1 (_wg_v, worker, 4 warps): rescales O[:, 256:] by alpha and adds P V[:, 256:] (P from shared
      memory), then p_free, so its P @ V overlaps warpgroup 0's S and softmax of the next block. Stages are released
      by both consumer warpgroups (free counts 2).

Schedules measured on the H200 and removed (each passed its GPU tests against the reference; their numbers are in
notes/sparse_mla.md): three consumer warpgroups (S and the softmax alone in warpgroup 0; slower at 64 / 128 heads,
level at 16 (3.76 vs 3.75 us a block); session 11, code at 0980bad), overlap 2 (warpgroup 0's softmax of block b + 1
under S(b + 2); slower at every head count; session 14, cf36ac8), persistent programs (slower at 64 / 128 heads, within
run-to-run drift at 16 / 32; session 14, 69caf59), a tail schedule (S(b + 1) queued behind P V(b); slower at every head
count; session 16, 1689471), FlashMLA's staggered pair (0.63-0.75x; session 26, a7f7a6d), the N-split consumer and
overlap 1 (slower wherever they ran; session 30, 7811b1a), config vt (fp16 P without the producer's conversion
pass: each warpgroup's O^T += V^T P^T with V^T converted in registers; right, and 0.901x / 0.878x the default at 32
heads s_q 1024 / 8192, 0.912x at 64, on an H100: session 64, f3ae6df, bench/results/ab_s64_vt_*_h100.json), config
pair (FlashMLA's numerics and its staggered pair schedule: bf16 P alone, each warpgroup S and the softmax of every other
block and half of O's columns for both, the max passed one way; q and its RoPE part in shared memory, warpgroup 0's P
in its stage's RoPE tile, each stage as two halves with one releasing warpgroup each and per-thread cp.async
arrives, as FlashMLA's kernel does it; spill-free at 8..64 heads. Right, and 0.937x the same numerics on the split
consumer, config plo 0, at 32 heads s_q 1024 on an H100 (0.922x with whole stages). Its consumers alone ran 1.91 us a
64-row block against plo 0's 2.36 (FlashMLA's whole block ~2.0), but with two stages the next pair's gathers are not
hidden: 2.68 us a block in full against plo 0's 2.51. Session 65, 9d66719, notes/sparse_mla.md,
bench/results/ab_s65_pair_*_h100.json), config l2pf (FlashMLA's L2 prefetch-size hint, cp.async ... L2::256B, put on
the producer's copies by a PTX rewrite in Triton's compile-stage hook; outputs bit-equal; `dsattn bench ab` on an H100,
s_q 1024, against the default: 0.943x / 0.990x / 0.996x at 8 / 16 / 32 heads (an in-process probe read 0.99-1.05x), no
gain with the pair either. Session 66, 2174404, bench/results/s66/), the pair over fp16 stages (our numerics: each
producer thread converts the chunks it copied; right at q x 1 and x 6, and 0.814x the default at 32 heads on an H100;
with the conversions pipelined behind the next half's copies 0.850x / 0.857x: the producer's conversion and the
consumers overlap by under 1 us a block. Session 68, measuring patches bench/results/s67/pair_s67.patch and
bench/results/s68/pair_s68.patch on 9d66719, never in the tree; bench/results/s68/).

Launch configurations (PrefillConfig; DSATTN_PF_CONFIG='field=value,...', parse_prefill_config): 64-entry blocks x 2
stages (default, prefill_config) or 32 x 4 (one block in flight against three; 32 x 4 split 0.885 vs 0.790 ms at 64
heads, bf16 P, bench/results/pf_sched5.json), f16 0 / 1 (a second wgmma per block against a conversion pass in the
producer), cvt_pipe, vst, the producer's registers, cvt_asm (session 60; the default since session 62), cl (session 67:
the producer's copies in FlashMLA's layout, bit-equal; the default from 64 heads since session 68: PrefillConfig.cl),
pre16 (session 68: rows converted before the call by kernels.f16_rows, no conversion pass; set by launch_prefill for
sparse_mla_prefill's row_scratch, never by DSATTN_PF_CONFIG), pair (session 69: over those converted rows,
gluon_pair.py's kernel, FlashMLA's staggered pair schedule with our numerics, in place of the split consumer; the
default there at 1-32 heads, rows_config; H100, `dsattn bench ab` 1.098x at 32 heads s_q 1024), and plo (f16 0:
0 runs bf16 P alone, FlashMLA's numerics, for measuring only; session 62; 32 heads, H100: 1.103x / 1.121x the
default at s_q 1024 / 8192, bench/results/ab_s62_plo0_*_h32_h100.json). Measured
(H200, s_q 1024, bench/results/pf1_schedules.json): the consumer limits (timing build without gathers 1.139 ms against
1.182 at 64 heads, 32 x 4 N-split; producer alone 0.374 ms), and the per-block times of the schedules follow their
shared-memory traffic per entry (N-split 32 x 4: ~610 KB per 64 entries, 4.8 us a block; 64 x 2 and split 32 x 4: ~460
KB, 3.5 us).

Outputs: out [T, H, 512] bf16 (any row strides), lse [T, H] fp32 natural log; a row without a valid entry gets
out = 0, lse = -inf. Rows of heads past H and of tokens past the chunk are never stored.

Splits (session 38): below one wave of programs (a short prefill, or a bf16-cache decode step) each work item's list
is cut into parts of whole blocks (dispatch.prefill_splits: programs x parts <= SMs, >= 64 keys a part), grid axis 1
walks one part each into normalized fp32 partials [T, S, H, 512] / [T, S, H] (an empty part: 0 / -inf), and
launch.combine_splits merges them into out / lse. H200, CUDA-graph replays (bench/results/prefill_splits_sweep_s38.json):
8 heads 32 tokens pad64 0.089 -> 0.032 ms, native 0.232 -> 0.052; 64 heads 1 token 0.102 -> 0.020.
"""
from __future__ import annotations

import dataclasses
import functools
import os

import torch

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (async_copy, fence_async_shared, mbarrier,
                                                                   warpgroup_mma, warpgroup_mma_init,
                                                                   warpgroup_mma_wait)
    HAVE_GLUON = True
except Exception:  # pragma: no cover - older triton without Gluon
    HAVE_GLUON = False

from ...formats import LATENT_DIM
from .._fastlaunch import launch as _fast
from .grouping import _build_groups, group_shape, prefill_scratch_spec, translate_entries
from .launch import combine_splits
from .named_config import named_spec, parse_named

if HAVE_GLUON:
    from .gluon_small import _bf16_to_f16_scaled, _copy_layout, _idx  # noqa: F401 (used inside the kernels)

M = 64               # rows of a program (wgmma M): G tokens x HPT heads
SPLIT_V_REGS = 160   # registers of consumer warpgroup 1 (_wg_v: O[:, 256:] alone takes 128 of them)
PRODUCER_WARPS = 4   # 8 did not compile beside the two consumer warpgroups (40 / 56 producer registers, 8 / 64 heads;
#                      16 warps leave 128 registers a thread at launch, within which ptxas places a wgmma's: C7602)
SMEM_LIMIT = 232448  # bytes of shared memory one CTA may use on sm_90
SMEM_MARGIN = 1024   # mbarriers and the compiler's reduction scratch
LOG2E = 1.4426950408889634


@dataclasses.dataclass(frozen=True)
class PrefillConfig:
    """Launch configuration of sparse_mla_prefill_kernel: entries per block (BN: S's N, P @ V's K), stages of the
    cp.async ring (NS - 1 blocks in flight), the register budget of the producer partition (PRODUCER_WARPS warps;
    setmaxnreg: the consumer warpgroups get the rest of the register file); f16: 1 converts the stages to fp16 x
    V_SCALE in the producer and runs one fp16 P @ V, 0 runs P_hi V + P_lo V in bf16 (no fp16 range limit: module
    docstring); cvt_pipe (f16 only; 1 is the default since session 19, 5.5-6.6% faster: module docstring): the producer
    gathers each block's latent as four 128-column commit groups and converts each as soon as it landed, so the
    conversion overlaps the rest of the block's gather instead of following all of it. The consumer is always the split
    one (_wg_s / _wg_v); the N-split consumer and overlap 1 were removed in session 30, and overlap 2, a tail schedule,
    persistent programs and two pair schedules before them (module docstring)."""
    block_n: int = 64
    stages: int = 2
    producer_regs: int = 80
    f16: int = 1
    cvt_pipe: int = 1   # 1 (f16): the latent gathered as four 128-column commit groups, each converted as it lands
    vst: int = 0        # 1: each warpgroup's half of out goes through an idle stage (stmatrix) and is stored in
    #                     16-byte pieces (_store_rows_tile; session 21; prefill_config's default at >= 64 heads
    #                     since session 22: 1.029-1.037x there, 0.985x at 16 / 32 heads). The pair takes it too
    #                     (session 78: each warpgroup through its own stage once both are past their last step; its
    #                     epilogue 13.4k / 9.8k -> 3.7k / 2.9k cycles at 32 heads s_q 1024, bench/s78/edges.py, the
    #                     second run with qld too (q's load only); H100,
    #                     `dsattn bench ab` against vst 0: 1.028x (95% CI 1.018-1.049) there, with session 78's qld
    #                     1.029x (1.023-1.037) and 1.025x (1.019-1.031) at s_q 8192; bench/results/s78/). THE PAIR'S
    #                     DEFAULT since session 78 (rows_config)
    cvt_asm: int = 1    # 1 (THE DEFAULT since session 62; f16 only, f16 0 ignores it): the producer's conversion by
    #                     _bf16_to_f16_scaled (the scale applied in bf16 before the one rounding to fp16, 4
    #                     instructions a pair of values against 5, no fp16 overflow below 2^24; see _to_f16_group).
    #                     H100, `dsattn bench ab` against 0: 1.017x / 1.029x / 1.033x / 1.032x at 8 / 16 / 32 / 64
    #                     heads s_q 1024, 1.044x at 32 heads s_q 8192, outputs bit-equal (ab_s62_cvt_asm_*_h100.json)
    plo: int = 1        # f16 0 only. 1: P @ V as P_hi V + P_lo V (bf16, ~16 bits of P). 0: bf16 P alone, one product,
    #                     FlashMLA's numerics, which miss the issue's 2e-3 + 3/128 on peaked softmaxes
    #                     (test_emulated_bf16_p_misses_tolerance): for measuring what those numerics are worth, never
    #                     a default (session 62; only through DSATTN_PF_CONFIG). H100, 32 heads, against the
    #                     default: 1.103x / 1.121x at s_q 1024 / 8192 (ab_s62_plo0_*_h32_h100.json, session 63)
    cl: int = 0         # the producer's copy layout (session 67). 0: one warp instruction copies 512 contiguous bytes
    #                     of a row (cvt_pipe's 128-column groups: 256 bytes of two rows), so a thread gathers from 16
    #                     (8) rows and loads, checks and scales 16 (8) indices a block, plus 4 for RoPE. 1: eight
    #                     threads copy a 128-byte row piece, a warp instruction four rows (FlashMLA's producer groups):
    #                     4 rows a thread, one index vector for the latent and RoPE copies. The same bytes land
    #                     (test_pf_cl_bit_equal). The producer's loop, SASS instructions a block a warp at 32 heads
    #                     (sm_90a, bench/mla_gluon_check.py --dump, ptxas + cuobjdump; notes/sparse_mla.md, session
    #                     67): 880 -> 741 (the default), 379 -> 138 (plo 0). H100, s_q 1024 (bench/results/s67/): `dsattn
    #                     bench ab` against cl 0 at 8 / 16 / 32 heads 0.992x / 0.995x / 0.997x (consumer-bound there);
    #                     kernel times at 64 heads 643.4 -> 628.8 us (one probe run), plo 0 at 32 heads 441.0 -> 413.4
    #                     us. THE DEFAULT FROM 64 HEADS since session 68 (with vst 1): `dsattn bench ab` against cl 0,
    #                     64 heads 1.018x, 128 heads 1.015x (bench/results/s68/; prefill_config)
    pre16: int = 0      # f16 only (session 68). 1: the rows' latent part already holds fp16(x x V_SCALE)
    #                     (kernels.f16_rows: the producer's conversion done once a row before the call), so the
    #                     producer only gathers and hands each stage over: no conversion pass in shared memory. Set
    #                     by launch.launch_prefill when sparse_mla_prefill gets a row_scratch (never through
    #                     DSATTN_PF_CONFIG: over rows not converted it reads garbage). H100, issue 3's case, the
    #                     call over converted rows against the default's (the conversion not counted): 1.09x / 1.19x /
    #                     1.19x at 32 / 64 / 128 heads s_q 1024 (bench/s68_pre16.py, bench/results/s68/, call 5)
    pair: int = 0       # with pre16 (f16 1, 64 x 2; session 69): gluon_pair's kernel, FlashMLA's staggered pair
    #                     schedule over the converted rows, in place of the split consumer. A call that does not run
    #                     over converted rows (pre16 0), or at D_qk 512, runs the split consumer (run_prefill_gluon).
    #                     DSATTN_PF_CONFIG may name it (for A/B runs: it takes effect where row_scratch converts).
    #                     Its producer takes gluon_pair.PAIR_PRODUCER_REGS registers, whatever producer_regs says.
    sfold: int = 0      # pair only (session 72). 1: S and the row maxima unscaled, P = 2^(S c - m c) by one FFMA an
    #                     element (FlashMLA's form) in place of S c and S c - m (sm_90a SASS at 32 heads, the whole
    #                     function: FMUL 764 -> 708, FADD 148 -> 84, FFMA 28 -> 96, 4328 -> 4272 instructions).
    #                     H100, `dsattn bench ab` against the pair: 32 / 16 heads s_q 1024 0.999x / 1.002x (95% CI
    #                     0.995-1.002 / 0.995-1.007; bench/results/s72/ab_s72_sfold_*): no difference, so not a default
    prel: int = 0       # pair only (session 72). 1: a consumer releases a stage's half by every thread's own arrive
    #                     (gluon_pair._release), not a partition barrier and one thread's arrive (PTX bar.sync 31 -> 25).
    #                     H100, bench/s72/arms.py over sfold 1: 0.994x / 0.998x / 0.999x at 32 heads s_q 1024 / 8192,
    #                     16 heads s_q 1024 (s72_arms_h100.log): no gain, so not a default
    fq: int = 0         # pair only (session 73). 1: each half of a stage lands in two parts with their own full
    #                     mbarriers (columns c0..c0 + 127, then the rest), and S's product over the first part starts
    #                     before the second lands (gluon_pair._s_wait_half): stage 1, released last in a step, is
    #                     refilled while its S runs. H100, `dsattn bench ab` against the pair: 1.002x (95% CI
    #                     0.992-1.010) / 1.014x (1.004-1.019) at 32 / 16 heads s_q 1024, 1.009x (1.004-1.018) at 32
    #                     heads s_q 8192; outputs bit-equal (bench/results/s73/). Not a default. (Session 74's
    #                     0.978x at 8 heads s_q 1024 compared the split consumer with itself: prefill_converts_rows
    #                     converts no rows there, so the pair does not run; session 75)
    qreg: int = 0       # pair only (session 73). 1: q's RoPE part held in registers as S's A operand (an RS wgmma,
    #                     16 registers a consumer thread), 8 KB fewer shared-memory reads a block's S. H100, `dsattn
    #                     bench ab` against the pair: 0.997x (0.993-1.000) at 32 heads s_q 1024: no gain
    lazy: int = 0       # pair only (session 74). 1: O is rescaled only when a row's max rises more than 2^8 above the
    #                     max in use (FA4's lazy rescale): P against that max reaches at most 2^8, and a warpgroup
    #                     skips its 128 FMULs a thread of a rescale when none of its rows moved (one reduction across
    #                     its warps instead; gluon_pair._lazy_up / _any_row). Outputs differ from the pair's within
    #                     rounding (P's fp16 and the sums' order of scaling). THE PAIR'S DEFAULT since session 74
    #                     (rows_config). H100, `dsattn bench ab` against the pair (bench/results/s74/): 32 heads s_q
    #                     1024 1.011x (95% CI 0.995-1.019) and 1.006x (1.003-1.016), s_q 8192 1.015x (1.006-1.030);
    #                     16 heads s_q 1024 0.989x (0.775-1.076) and 1.005x (0.970-1.041); 8 heads s_q 8192 1.009x
    #                     (1.004-1.016). Consumers alone (PROFILE 1) 347.5 -> 348.2 us. (The 1.042x at 8 heads s_q
    #                     1024 compared the split consumer with itself: no rows converted there, so no pair)
    odd: int = 0        # pair only (session 79). 1: where a list's block count is odd, the last step's second block
    #                     (past the list) is not copied, and its S and both P V products against it are skipped
    #                     (gluon_pair: has1); 0 gathers it as all invalid (zero-filled) and runs every product. Outputs
    #                     bit-equal (the skipped products add exact zeros). H100, `dsattn bench ab` against odd 0
    #                     (bench/results/s79/): 32 heads s_q 1024 1.016x (95% CI 1.010-1.020). THE PAIR'S DEFAULT
    #                     since session 79 (rows_config)
    # (pers, session 79, removed: persistent pair programs, one an SM, each walking work items program_id,
    #  + programs, ...; the producer refilled the next item's first halves as the last item's last step released them
    #  and vst staged O through q's buffer. Right (GPU tests bit-equal to the default, 8 passed; the protocol model,
    #  tests/test_prefill_protocol.py test_pair_pers_protocol). H200, `dsattn bench ab` against the default at 32 heads
    #  s_q 1024: 0.986x (0.973-0.991; its blocks spread 10.9%). Code at d33fcee)
    # (qpf, session 79, removed: the producer prefetched into L2, once a program's first step was issued, q's rows of
    #  the program an SM count ahead (prefetch.global.L2). H100, 32 heads s_q 1024: q stored 9.8k -> 7.3k cycles after
    #  entry (mean; median 9.3k -> 5.9k, bench/s78/edges.py), but the steps 156.7k -> 161.3k cycles (p90 172.7k) and
    #  `dsattn bench ab` 0.954x (0.942-0.967). Code at 7b39b99)
    # (pe, session 75, removed in 76: warpgroup 0 handed its P to warpgroup 1 against the max it used, before the
    #  common max came back, and warpgroup 1 rescaled that tile in place where the max moved; pe 2 also issued that
    #  P V before computing its own P. H100, `dsattn bench ab` against the default, bench/results/s75/: 32 heads s_q
    #  1024 0.998x (95% CI 0.991-1.003), pe 2 0.994x (0.988-1.000); s_q 8192 0.992x; 16 heads 0.993x. Warpgroup 1,
    #  not 0, is the late one (session 75's stamps), so an earlier P waited longer. Code at 09992f9)
    # (ring, sessions 75-76, removed: the pair's halves refilled in two other orders, L(0), R(0), L(1), R(1) and L(0),
    #  R(1), L(1), R(0), warpgroup 1's S and P V order with them. H200, `dsattn bench ab` against the default at 32
    #  heads: 1.005x / 1.006x (s_q 1024), 1.006x / 1.006x (8192), no interval above 1.002; the clock stamps show the
    #  wait for a refill moving to the other half, the step the same. bench/results/s76/, code at 09992f9)


def prefill_smem_bytes(d_qk: int, block_n: int, stages: int) -> int:
    """Shared memory the kernel allocates (without mbarriers and the compiler's scratch): q's latent part, the
    stages (latent + RoPE rows), P_hi and P_lo."""
    return M * LATENT_DIM * 2 + stages * block_n * d_qk * 2 + 2 * M * block_n * 2


def parse_prefill_config(spec: str, allow_pre16: bool = False) -> PrefillConfig:
    """DSATTN_PF_CONFIG's text -> PrefillConfig: 'field=value' pairs separated by commas, PrefillConfig's field names,
    integer values, each field at most once; fields left out take PrefillConfig's defaults (not prefill_config's: vst
    is 0 unless named), e.g. 'f16=0,cvt_pipe=0,producer_regs=56' (the bf16 schedule) or 'vst=1' (the default at >= 64
    heads). ValueError naming DSATTN_PF_CONFIG for anything else, and for a configuration the kernel does not take.
    (Before session 30 the fields were positional,
    'bn/stages/producer_warps/producer_regs[/overlap[/f16[/split[/cvt_pipe[/vst]]]]]', fields left out 0; that form is
    refused, so that an old string cannot be read with shifted fields. producer_warps went with them: 8 producer warps
    did not compile beside the split consumer, PRODUCER_WARPS.) pre16 1 only with allow_pre16 (compile checks):
    over rows that were not converted it reads garbage, so DSATTN_PF_CONFIG never sets it."""
    cfg = parse_named(PrefillConfig, spec, "DSATTN_PF_CONFIG", "f16=0,cvt_pipe=0,producer_regs=56")
    ok = (cfg.block_n in (32, 64) and 2 <= cfg.stages <= 6
          and cfg.producer_regs % 8 == 0 and 24 <= cfg.producer_regs <= 160
          and cfg.f16 in (0, 1) and cfg.cvt_pipe in (0, cfg.f16) and cfg.vst in (0, 1) and cfg.cvt_asm in (0, 1)
          and cfg.plo in (0, 1) and (cfg.plo or not cfg.f16) and cfg.cl in (0, 1)
          and cfg.pre16 in ((0, cfg.f16) if allow_pre16 else (0,))
          and cfg.pair in (0, 1) and (not cfg.pair or (cfg.f16 and cfg.block_n == 64 and cfg.stages == 2))
          and cfg.sfold in (0, 1) and cfg.prel in (0, 1) and cfg.fq in (0, 1) and cfg.qreg in (0, 1)
          and cfg.lazy in (0, 1) and cfg.odd in (0, 1)
          and prefill_smem_bytes(576, cfg.block_n, cfg.stages) + SMEM_MARGIN <= SMEM_LIMIT)
    if not ok:
        raise ValueError("DSATTN_PF_CONFIG: block_n 32 or 64, 2..6 stages that fit 227 KB of shared memory, "
                         "producer_regs a multiple of 8 in [24, 160], f16 0 or 1, "
                         "cvt_pipe 0 or 1 (1: with f16 1), vst 0 or 1, cvt_asm 0 or 1, plo 0 or 1 (0: with f16 0), "
                         "cl 0 or 1, pre16 0 (sparse_mla_prefill's row_scratch turns it on, with rows it converted), "
                         "pair 0 or 1 (1: with f16 1, block_n 64, 2 stages), sfold 0 or 1, prel 0 or 1, fq 0 or 1, "
                         "qreg 0 or 1, lazy 0 or 1, odd 0 or 1; "
                         f"got {spec!r}")
    return cfg


def prefill_config_spec(cfg: PrefillConfig) -> str:
    """DSATTN_PF_CONFIG's text for cfg, every field named (parse_prefill_config(prefill_config_spec(cfg)) == cfg)."""
    return named_spec(cfg)


def prefill_config(num_heads: int, d_qk: int = 576) -> PrefillConfig:
    """The default launch (PrefillConfig(); vst 1 and cl 1 from 64 heads): the split consumer over 64-entry blocks,
    2 stages, fp16 P (f16: the producer converts each landed stage to fp16 x 2^-8, one P @ V; cvt_pipe: in four column groups as
    they land, since session 19: module docstring) with 80 producer registers (56 spilled in the f16 producer; sm_90a
    compile check, no spill at 80 for 8..64 heads). Measured on the H200, s_q 1024, against the bf16 hi / lo schedule
    (f16=0,cvt_pipe=0,producer_regs=56) in the same process (session 11 call 4, bench/results/s11_pf_f16.json): 64
    heads 0.731 vs 0.791 ms (2.95 vs 3.19 us a 64-entry block), 128 heads 1.45-1.49 vs 1.61, 32 heads 0.647 vs 0.663,
    16 heads 0.426 vs 0.435. Split 2 (three consumer warpgroups, removed in session 12) was slower in both numerics.
    Earlier schedules: bench/results/pf1_schedules.json, pf_sched5.json. At 64 heads and more, vst 1 (out through an
    idle stage, 16-byte stores): H200, s_q 1024, A/B against vst 0 in one process (session 22,
    bench/results/ab_s22_pfvst_h*.json, bench/gpu_s22_pf_vst.sh), 64 heads 0.708 vs 0.734 ms (1.037x, 95% CI
    1.030-1.048), 128 heads 1.430 vs 1.471 (1.029x); at 16 and 32 heads it was slower (0.985x, CI 0.975-0.992 and
    0.975-0.993), so those (and the pad64 variant, which takes the config of q's head count) keep vst 0. From 64
    heads cl 1 too (FlashMLA's copy layout, session 68): H100, s_q 1024, `dsattn bench ab` of vst=1,cl=1 against vst 1
    alone, 64 heads 1.018x (95% CI 1.013-1.020), 128 heads 1.015x (1.011-1.020); at 8 / 16 / 32 heads no difference
    (0.992x-1.022x, CIs across 1; bench/results/s67/, bench/results/s68/), so those keep cl 0.
    DSATTN_PF_CONFIG overrides it at launch time (parse_prefill_config: fields left out take PrefillConfig's defaults,
    so vst is 0 unless named)."""
    return _prefill_config(os.environ.get("DSATTN_PF_CONFIG", "").strip(), num_heads >= 64)


@functools.lru_cache(maxsize=64)
def _prefill_config(spec: str, wide: bool) -> PrefillConfig:
    """prefill_config's result by (DSATTN_PF_CONFIG's text, num_heads >= 64): made once, not per call (frozen, so
    shared). Session 71: the rows path built three configs a call (bench/host_overhead.py --stub --profile)."""
    if spec:
        return parse_prefill_config(spec)
    return PrefillConfig(vst=1, cl=1) if wide else PrefillConfig()


PAIR_HEADS = (1, 32)  # rows_config's head counts for gluon_pair: every grouped program shape (G 8 / 4 / 2)


def rows_config(base: PrefillConfig, num_heads: int, d_qk: int, variant: str) -> PrefillConfig:
    """The config of a call over rows converted by sparse_mla_prefill's row_scratch: base with pre16, and gluon_pair's
    schedule (pair) at PAIR_HEADS heads, D_qk 576, the grouped variant ('native'), unless DSATTN_PF_CONFIG set base
    (its pair field then decides). H100, issue 3's case, against the split consumer over the same rows (session 69,
    bench/results/s69/): 32 heads `dsattn bench ab` s_q 1024 1.098x (95% CI 1.084-1.109), s_q 8192 1.129x; 16 / 8
    heads s_q 8192 1.131x / 1.133x (bench/s69_pair/pair_pre16.py, medians of alternating rounds); 64 heads (one
    token a program) 0.943x, so not there. The pair runs with lazy 1 (session 74: PrefillConfig.lazy), vst 1
    (session 78: PrefillConfig.vst) and odd 1 (session 79: PrefillConfig.odd)."""
    return _rows_config(base, not os.environ.get("DSATTN_PF_CONFIG", "").strip()
                        and PAIR_HEADS[0] <= num_heads <= PAIR_HEADS[1] and d_qk == LATENT_DIM + 64
                        and variant == "native")


@functools.lru_cache(maxsize=64)
def _rows_config(base: PrefillConfig, pair: bool) -> PrefillConfig:
    """rows_config's result by (base, whether the pair runs): made once, not per call."""
    cfg = dataclasses.replace(base, pre16=1)
    return dataclasses.replace(cfg, pair=1, lazy=1, vst=1, odd=1) if pair else cfg


if HAVE_GLUON:
    LN2 = gl.constexpr(0.6931471805599453)
    V_SCALE = gl.constexpr(1.0 / 256)
    NEG_INF = gl.constexpr(float("-inf"))
    ROWS = gl.constexpr(M)

    @gluon.constexpr_function
    def _gather_layout(cols, num_warps, cl):
        """The producer's copy layout of a [rows, cols] bf16 gather (config cl): 0 _copy_layout (threads along the
        row first); 1 eight threads a 128-byte row piece, four rows a warp instruction (cols a multiple of 64)."""
        if cl:
            return gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
        return _copy_layout(cols, 2, num_warps)

    @gluon.jit
    def _entries(idx_row, start, hi, BN: gl.constexpr, PW: gl.constexpr, CP: gl.constexpr = 0, CL: gl.constexpr = 0):
        """Entries [start, start + BN) (-1 past hi) in the row layouts of the latent and RoPE copies (CP: of the
        128-column latent copies, _gather_groups), loaded a block ahead of their copies so that the index load's
        latency stays off the gather's path. CL: both copies share one layout's rows, so one load serves both."""
        if CL:
            ix1 = _idx(idx_row, start, hi, BN, gl.SliceLayout(1, _gather_layout(64, PW, CL)))
            ix = (ix1, ix1)
        else:
            ix = (_idx(idx_row, start, hi, BN, gl.SliceLayout(1, _gather_layout(128 if CP else 512, PW, CL))),
                  _idx(idx_row, start, hi, BN, gl.SliceLayout(1, _gather_layout(64, PW, CL))))
        return ix

    @gluon.jit
    def _gather(ix, num_slots, kv_ptr, lat_buf, rope_buf, stride_kv: gl.constexpr, HAS_ROPE: gl.constexpr,
                PW: gl.constexpr, CL: gl.constexpr = 0):
        """cp.async of one block's rows (ix: its entries, from _entries) into one stage (latent, RoPE), one commit
        group. Invalid entries (< 0, >= num_slots, past hi) are masked copies: zero-filled, nothing read."""
        LAT_L: gl.constexpr = _gather_layout(512, PW, CL)
        ix_lat, ix_rope = ix
        valid = (ix_lat >= 0) & (ix_lat < num_slots)
        row = kv_ptr + gl.where(valid, ix_lat, 0).to(gl.int64) * stride_kv
        cols = gl.arange(0, 512, gl.SliceLayout(0, LAT_L))
        async_copy.async_copy_global_to_shared(lat_buf, row[:, None] + cols[None, :], mask=valid[:, None])
        _gather_rope(ix_rope, num_slots, kv_ptr, rope_buf, stride_kv, HAS_ROPE, PW, CL)
        async_copy.commit_group()

    @gluon.jit
    def _gather_rope(ix_rope, num_slots, kv_ptr, rope_buf, stride_kv: gl.constexpr, HAS_ROPE: gl.constexpr,
                     PW: gl.constexpr, CL: gl.constexpr = 0):
        """cp.async of one block's RoPE columns (none without HAS_ROPE), into the caller's commit group."""
        if HAS_ROPE:
            ROPE_L: gl.constexpr = _gather_layout(64, PW, CL)
            valid = (ix_rope >= 0) & (ix_rope < num_slots)
            row = kv_ptr + gl.where(valid, ix_rope, 0).to(gl.int64) * stride_kv + 512
            rc = gl.arange(0, 64, gl.SliceLayout(0, ROPE_L))
            async_copy.async_copy_global_to_shared(rope_buf, row[:, None] + rc[None, :], mask=valid[:, None])

    @gluon.jit
    def _gather_groups(ix, num_slots, kv_ptr, lat_buf, rope_buf, stride_kv: gl.constexpr, HAS_ROPE: gl.constexpr,
                       PW: gl.constexpr, CL: gl.constexpr = 0):
        """_gather as four commit groups (config cvt_pipe): latent columns [128 g, 128 g + 128) in group g, the
        RoPE columns with group 3 (ix from _entries with CP)."""
        LAT_G: gl.constexpr = _gather_layout(128, PW, CL)
        ix_lat, ix_rope = ix
        valid = (ix_lat >= 0) & (ix_lat < num_slots)
        row = kv_ptr + gl.where(valid, ix_lat, 0).to(gl.int64) * stride_kv
        cols = gl.arange(0, 128, gl.SliceLayout(0, LAT_G))
        for g in gl.static_range(4):
            async_copy.async_copy_global_to_shared(lat_buf.slice(g * 128, 128, dim=1),
                                                   row[:, None] + (g * 128 + cols)[None, :], mask=valid[:, None])
            if g == 3:
                _gather_rope(ix_rope, num_slots, kv_ptr, rope_buf, stride_kv, HAS_ROPE, PW, CL)
            async_copy.commit_group()

    @gluon.jit
    def _commit_empty(CP: gl.constexpr):
        """A block's worth of empty commit groups (four under CP, else one), so group counts stay per block."""
        for _g in gl.static_range(4 if CP else 1):
            async_copy.commit_group()

    @gluon.jit
    def _to_f16(src, dst, PW: gl.constexpr, CVT_ASM: gl.constexpr = 0):
        """A landed bf16 latent stage [BN, 512] into fp16 x V_SCALE in place (each thread rewrites what it read;
        exact but for values below 2^-6, which become fp16 subnormals: 2^-17 absolute at most), one 128-column
        group at a time (registers)."""
        for g in gl.static_range(4):
            _to_f16_group(src, dst, g, PW, CVT_ASM)

    @gluon.jit
    def _to_f16_group(src, dst, g: gl.constexpr, PW: gl.constexpr, CVT_ASM: gl.constexpr = 0):
        """Columns [128 g, 128 g + 128) of _to_f16. Without CVT_ASM the compiled code rounds x to fp16 before it
        scales (_bf16_to_f16_scaled says why): latent values of magnitude >= 65520 become inf."""
        CVT_L: gl.constexpr = _copy_layout(128, 2, PW)
        raw = src.slice(g * 128, 128, dim=1).load(CVT_L)
        if CVT_ASM:
            dst.slice(g * 128, 128, dim=1).store(_bf16_to_f16_scaled(raw))
        else:
            dst.slice(g * 128, 128, dim=1).store((raw.to(gl.float32) * V_SCALE).to(gl.float16))

    @gluon.jit
    def _producer(idx_row, hi, num_slots, kv_ptr, lat, rope, full, free, stride_kv: gl.constexpr,
                  HAS_ROPE: gl.constexpr, BN: gl.constexpr, NS: gl.constexpr, F16: gl.constexpr,
                  PROFILE: gl.constexpr, PW: gl.constexpr, CVT_PIPE: gl.constexpr = 0, CVT_ASM: gl.constexpr = 0,
                  CL: gl.constexpr = 0, PRE16: gl.constexpr = 0):
        """NS - 1 blocks in flight; block b is handed over (full) once it landed (F16: and its latent was converted
        in place into fp16 x V_SCALE), then block b + NS - 1 is issued into the stage block b - 1 used, after the
        consumers freed it. A consumer that frees block b only after block b + 2 arrived needs a longer lag (overlap 2,
        removed, hung at this one on the H200, session 14; git cf36ac8 has a LAG parameter). Groups past the last
        block are empty. PROFILE bit 0 (timing builds only): no gathers (the stages are handed over as they are).
        CVT_PIPE (config cvt_pipe, with F16): each block is four commit groups (_gather_groups), and its latent is
        converted group by group as each lands (wait_group of the groups still allowed in flight: the block's later
        groups and the NS - 2 younger blocks' four each). PRE16 (config pre16): the rows hold fp16 already, so no
        conversion (and no column groups): each stage is handed over once it landed."""
        GATHER: gl.constexpr = (PROFILE & 1) == 0
        CP: gl.constexpr = (CVT_PIPE != 0) & (F16 != 0) & (PRE16 == 0)
        CVT: gl.constexpr = (F16 != 0) & (PRE16 == 0)
        nblocks = gl.cdiv(hi, BN)
        if CVT:
            lat16 = lat._reinterpret(gl.float16, [NS, BN, 512],
                                     gl.NVMMASharedLayout.get_default_for([BN, 512], gl.float16))
        for i in gl.static_range(NS - 1):
            if i < nblocks and GATHER:
                if CP:
                    _gather_groups(_entries(idx_row, i * BN, hi, BN, PW, CP, CL), num_slots, kv_ptr, lat.index(i),
                                   rope.index(i), stride_kv, HAS_ROPE, PW, CL)
                else:
                    _gather(_entries(idx_row, i * BN, hi, BN, PW, 0, CL), num_slots, kv_ptr, lat.index(i),
                            rope.index(i), stride_kv, HAS_ROPE, PW, CL)
            else:
                _commit_empty(CP)
        nx = _entries(idx_row, (NS - 1) * BN, hi, BN, PW, CP, CL)
        for b in range(nblocks):
            # block b landed (NS - 2 younger blocks' groups may fly); fence for the async proxy (wgmma reads it),
            # then every producer thread's copies are done before the arrive
            if CP:
                for g in gl.static_range(4):
                    async_copy.wait_group(4 * (NS - 2) + 3 - g)
                    gl.thread_barrier()  # every producer thread's copies of group g landed
                    _to_f16_group(lat.index(b % NS), lat16.index(b % NS), g, PW, CVT_ASM)
            else:
                async_copy.wait_group(NS - 2)
                if CVT:
                    gl.thread_barrier()  # every producer thread's copies landed: any thread may read any row
                    _to_f16(lat.index(b % NS), lat16.index(b % NS), PW, CVT_ASM)
            fence_async_shared()
            gl.thread_barrier()
            mbarrier.arrive(full.index(b % NS), count=1)
            nb = b + NS - 1
            st = nb % NS
            if nb < nblocks:
                # use nb // NS of this stage: the consumers released use nb // NS - 1 (block b - 1); fresh
                # mbarriers count as phase 1 complete
                mbarrier.wait(free.index(st), ((nb // NS) & 1) ^ 1)
                if GATHER:
                    if CP:
                        _gather_groups(nx, num_slots, kv_ptr, lat.index(st), rope.index(st), stride_kv, HAS_ROPE,
                                       PW, CL)
                    else:
                        _gather(nx, num_slots, kv_ptr, lat.index(st), rope.index(st), stride_kv, HAS_ROPE, PW, CL)
                else:
                    _commit_empty(CP)
            else:
                _commit_empty(CP)
            nx = _entries(idx_row, (nb + 1) * BN, hi, BN, PW, CP, CL)
        async_copy.wait_group(0)

    @gluon.jit
    def _s_issue(q_rope, q_smem, lat_t, rope_t, MMA_S: gl.constexpr, HAS_ROPE: gl.constexpr, BN: gl.constexpr):
        """S [64, BN] = q_rope K_rope^T + q K^T of one stage, left in flight (one wgmma group each product)."""
        s = gl.zeros([ROWS, BN], gl.float32, MMA_S)
        if HAS_ROPE:
            s = warpgroup_mma(q_rope, rope_t.permute((1, 0)), s, is_async=True)
        s = warpgroup_mma(q_smem, lat_t.permute((1, 0)), s, is_async=True)
        return s

    @gluon.jit
    def _load_q(q_ptr, stride_qt, stride_qh, t0, tok_end, h0, num_heads, q_smem, QR_L: gl.constexpr,
                HAS_ROPE: gl.constexpr, F16: gl.constexpr, HPT: gl.constexpr, num_warps: gl.constexpr):
        """q's latent part into q_smem (rows: token t0 + r // HPT, head h0 + r % HPT; zeros past T / H) and its RoPE
        part into registers in layout QR_L (a wgmma A operand; x V_SCALE under F16); returns q_rope."""
        Q_L: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [num_warps, 1], [1, 0])
        r = gl.arange(0, ROWS, gl.SliceLayout(1, Q_L))
        qt = t0 + r // HPT
        qh = h0 + r % HPT
        q_row = q_ptr + qt.to(gl.int64) * stride_qt + qh * stride_qh
        qd = gl.arange(0, 512, gl.SliceLayout(0, Q_L))
        q_ok = (qt < tok_end) & (qh < num_heads)
        q_smem.store(gl.load(q_row[:, None] + qd[None, :], mask=q_ok[:, None], other=0.0).to(q_smem.dtype))
        if HAS_ROPE:
            rr = gl.arange(0, ROWS, gl.SliceLayout(1, QR_L))
            rt = t0 + rr // HPT
            rh = h0 + rr % HPT
            qr = gl.arange(0, 64, gl.SliceLayout(0, QR_L))
            qr_ptrs = q_ptr + rt.to(gl.int64)[:, None] * stride_qt + (rh * stride_qh)[:, None] + 512 + qr[None, :]
            q_rope = gl.load(qr_ptrs, mask=((rt < tok_end) & (rh < num_heads))[:, None], other=0.0)
            if F16:
                q_rope = (q_rope.to(gl.float32) * V_SCALE).to(gl.bfloat16)
        else:
            q_rope = q_smem  # unused
        return q_rope

    @gluon.jit
    def _store_rows(o, t0, tok_end, h0, num_heads, out_ptr, stride_ot, stride_oh, col0: gl.constexpr,
                    HPT: gl.constexpr):
        """Rows of o [64, N] into out[t, h, col0:col0 + N] (rows past T / H are not stored)."""
        L: gl.constexpr = o.type.layout
        ro = gl.arange(0, ROWS, gl.SliceLayout(1, L))
        ot = t0 + ro // HPT
        oh = h0 + ro % HPT
        od = col0 + gl.arange(0, o.shape[1], gl.SliceLayout(0, L))
        o_ptrs = out_ptr + ot.to(gl.int64)[:, None] * stride_ot + (oh * stride_oh)[:, None] + od[None, :]
        gl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=((ot < tok_end) & (oh < num_heads))[:, None])

    @gluon.jit
    def _store_rows_tile(o, stage, t0, tok_end, h0, num_heads, out_ptr, stride_ot, stride_oh, col0: gl.constexpr,
                         HPT: gl.constexpr):
        """_store_rows through shared memory (config vst): o [64, 256] written into `stage` (a ring stage nothing reads
        or writes any more: the caller's warpgroup and the other one are past their last P V, the producer past its last
        block) as out's dtype, 16-byte chunks XOR-swizzled by row, then read back 16 bytes a thread, a warp a row, so
        that out is stored in 16-byte pieces (the accumulator layout stores 4 bytes a lane, 8 half-filled sectors an
        instruction; the same change gave gluon64 1.2-1.9%, session 21)."""
        DT: gl.constexpr = out_ptr.dtype.element_ty
        VEC: gl.constexpr = 128 // DT.primitive_bitwidth
        buf = stage._reinterpret(DT, [ROWS, o.shape[1]], gl.SwizzledSharedLayout(VEC, 1, 8, [1, 0]))
        buf.store(o.to(DT))
        gl.thread_barrier()
        O_L: gl.constexpr = gl.BlockedLayout([1, VEC], [1, 32], [4, 1], [1, 0])
        ro = gl.arange(0, ROWS, gl.SliceLayout(1, O_L))
        ot = t0 + ro // HPT
        oh = h0 + ro % HPT
        od = col0 + gl.arange(0, o.shape[1], gl.SliceLayout(0, O_L))
        o_ptrs = out_ptr + ot.to(gl.int64)[:, None] * stride_ot + (oh * stride_oh)[:, None] + od[None, :]
        gl.store(o_ptrs, buf.load(O_L), mask=((ot < tok_end) & (oh < num_heads))[:, None])

    @gluon.jit
    def _softmax_step(s, ix, bits, num_slots, tok_of_row, qk_scale, m_i, l_i, GROUPED: gl.constexpr):
        """One block of the online softmax (base 2) over the rows of S [64, BN]: an entry outside [0, num_slots)
        or (GROUPED) one the row's token did not list (its bit in `bits`) scores -inf. Returns (P, alpha, m, l);
        the rows' reductions run over S's layout (one warpgroup's rows). (Session 60's sffma, the scale inside
        exp2's argument as one FFMA an element, was 0.987x / 0.990x at 8 / 32 heads on an H100 in session 62,
        ab_s62_sffma_*_h100.json, and was removed.)"""
        valid = ((ix >= 0) & (ix < num_slots))[None, :]
        if GROUPED:
            valid = valid & (((bits[None, :] >> tok_of_row) & 1) != 0)
        s = gl.where(valid, s * qk_scale, NEG_INF)
        m_new = gl.maximum(m_i, gl.max(s, 1))
        m_use = gl.where(m_new == NEG_INF, 0.0, m_new)
        alpha = gl.exp2(m_i - m_use)
        p = gl.exp2(s - m_use[:, None])
        l_i = l_i * alpha + gl.sum(p, 1)
        return p, alpha, m_new, l_i

    @gluon.jit
    def _hand_back(hi, full, free, BN: gl.constexpr, NS: gl.constexpr):
        """Timing builds (PROFILE bit 1): take each gathered stage and hand it back at once, no products."""
        for b in range(gl.cdiv(hi, BN)):
            mbarrier.wait(full.index(b % NS), (b // NS) & 1)
            gl.thread_barrier()
            mbarrier.arrive(free.index(b % NS), count=1)

    @gluon.jit
    def _wg_s(q_ptr, stride_qt, stride_qh, idx_row, mask_row, hi, t0, tok_end, h0, num_slots, num_heads,
              qk_scale, out_ptr, stride_ot, stride_oh, lse_ptr, stride_lt, stride_lh,
              q_smem, lat, rope, ph_smem, pl_smem, a_smem, full, free, p_ready, p_free,
              HAS_ROPE: gl.constexpr, GROUPED: gl.constexpr, HPT: gl.constexpr, BN: gl.constexpr,
              NS: gl.constexpr, F16: gl.constexpr, PROFILE: gl.constexpr, num_warps: gl.constexpr,
              VST: gl.constexpr = 0, PLO: gl.constexpr = 1):
        """Consumer warpgroup 0 (default partition): S of every block over all BN entries (wgmma N = BN), the online
        softmax, P (and the rescale factor alpha) to shared memory for warpgroup 1, and O[:, :256]."""
        gl.static_assert(num_warps == 4, "one warpgroup")
        MMA_S: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, BN, 16])
        MMA_O: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, 256, 16])
        QR_L: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA_S, k_width=2)
        ROW_S: gl.constexpr = gl.SliceLayout(1, MMA_S)
        COL_S: gl.constexpr = gl.SliceLayout(0, MMA_S)
        ROW_O: gl.constexpr = gl.SliceLayout(1, MMA_O)
        P_L: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA_O, k_width=2)  # P as P @ V's A operand
        q_rope = _load_q(q_ptr, stride_qt, stride_qh, t0, tok_end, h0, num_heads, q_smem, QR_L, HAS_ROPE, F16, HPT,
                         num_warps)
        fence_async_shared()
        gl.thread_barrier()
        if PROFILE & 2:
            _hand_back(hi, full, free, BN, NS)
            hi = 0
        if F16:
            qk_scale = qk_scale * 256.0
            lat = lat._reinterpret(gl.float16, [NS, BN, 512], gl.NVMMASharedLayout.get_default_for([BN, 512],
                                                                                                  gl.float16))
        tok_of_row = (gl.arange(0, ROWS, ROW_S) // HPT)[:, None]
        m_i = gl.full([ROWS], NEG_INF, gl.float32, ROW_S)
        l_i = gl.zeros([ROWS], gl.float32, ROW_S)
        acc = warpgroup_mma_init(gl.zeros([ROWS, 256], gl.float32, MMA_O))
        nblocks = gl.cdiv(hi, BN)
        for b in range(nblocks):
            st = b % NS
            # the block's entries (and token bits), loaded here and used after S: their latency hides behind S,
            # and no next block's entries are carried in registers (at BN = 64 those spilled)
            ix = _idx(idx_row, b * BN, hi, BN, COL_S)
            if GROUPED:
                bits = _idx(mask_row, b * BN, hi, BN, COL_S)
            else:
                bits = ix  # (unread)
            # O[:, :256] += P V of block b - 1 retired: this warpgroup's hold on its stage ends (warpgroup 1 releases
            # it too once its half retired)
            acc = warpgroup_mma_wait(0, deps=(acc,))
            gl.thread_barrier()
            mbarrier.arrive(free.index((b + NS - 1) % NS), count=1, pred=b > 0)
            mbarrier.wait(full.index(st), (b // NS) & 1)
            s = _s_issue(q_rope, q_smem, lat.index(st), rope.index(st), MMA_S, HAS_ROPE, BN)
            s = warpgroup_mma_wait(0, deps=(s,))

            p, alpha, m_i, l_i = _softmax_step(s, ix, bits, num_slots, tok_of_row, qk_scale, m_i, l_i, GROUPED)
            acc = acc * gl.convert_layout(alpha, ROW_O)[:, None]
            # warpgroup 1 is done with P and alpha of block b - 1 (fresh mbarriers count as phase 1 complete)
            mbarrier.wait(p_free, (b & 1) ^ 1)
            if F16:
                p_hi = p.to(gl.float16)
                ph_smem.store(p_hi)
            else:
                p_hi = p.to(gl.bfloat16)
                if PLO:
                    p_lo = (p - p_hi.to(gl.float32)).to(gl.bfloat16)
                ph_smem.store(p_hi)
                if PLO:
                    pl_smem.store(p_lo)
            a_smem.store(alpha)
            fence_async_shared()
            gl.thread_barrier()
            mbarrier.arrive(p_ready, count=1)
            # this warpgroup's P @ V takes P from its registers (A operand), warpgroup 1 from shared memory
            v_left = lat.index(st).slice(0, 256, dim=1)
            acc = warpgroup_mma(gl.convert_layout(p_hi, P_L), v_left, acc, is_async=True)
            if not F16:
                if PLO:
                    acc = warpgroup_mma(gl.convert_layout(p_lo, P_L), v_left, acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc,))

        empty = l_i == 0.0
        lse = gl.where(empty, NEG_INF, (m_i + gl.log2(gl.where(empty, 1.0, l_i))) * LN2)
        inv_l = (256.0 if F16 else 1.0) / gl.where(empty, 1.0, l_i)
        # 1 / l for warpgroup 1 once it is done with the last alpha
        mbarrier.wait(p_free, (nblocks & 1) ^ 1)
        a_smem.store(inv_l)
        gl.thread_barrier()
        mbarrier.arrive(p_ready, count=1)
        if VST:  # (warpgroup 1 is past its last P V: it freed P for the last alpha, above)
            _store_rows_tile(acc * gl.convert_layout(inv_l, ROW_O)[:, None], lat.index(0), t0, tok_end, h0,
                             num_heads, out_ptr, stride_ot, stride_oh, 0, HPT)
        else:
            _store_rows(acc * gl.convert_layout(inv_l, ROW_O)[:, None], t0, tok_end, h0, num_heads, out_ptr,
                        stride_ot, stride_oh, 0, HPT)
        rl = gl.arange(0, ROWS, ROW_S)
        lt = t0 + rl // HPT
        lh = h0 + rl % HPT
        gl.store(lse_ptr + lt.to(gl.int64) * stride_lt + lh * stride_lh, lse, mask=(lt < tok_end) & (lh < num_heads))

    @gluon.jit
    def _wg_v(hi, t0, tok_end, h0, num_heads, out_ptr, stride_ot, stride_oh, lat, ph_smem, pl_smem, a_smem, full,
              free, p_ready, p_free, HPT: gl.constexpr, BN: gl.constexpr, NS: gl.constexpr, F16: gl.constexpr,
              PROFILE: gl.constexpr, VST: gl.constexpr = 0, PLO: gl.constexpr = 1):
        """Consumer warpgroup 1 (worker partition): O[:, 256:] += P V of every block with warpgroup 0's P and
        alpha, then its half of the epilogue with warpgroup 0's 1 / l."""
        MMA_O: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, 256, 16])
        ROW_O: gl.constexpr = gl.SliceLayout(1, MMA_O)
        if PROFILE & 2:
            _hand_back(hi, full, free, BN, NS)
            hi = 0
        if F16:
            lat = lat._reinterpret(gl.float16, [NS, BN, 512], gl.NVMMASharedLayout.get_default_for([BN, 512],
                                                                                                  gl.float16))
        acc = gl.zeros([ROWS, 256], gl.float32, MMA_O)  # each block's product is waited for in its iteration
        nblocks = gl.cdiv(hi, BN)
        for b in range(nblocks):
            st = b % NS
            mbarrier.wait(p_ready, b & 1)
            acc = acc * a_smem.load(ROW_O)[:, None]
            v_right = lat.index(st).slice(256, 256, dim=1)
            acc = warpgroup_mma(ph_smem, v_right, acc, is_async=True)
            if not F16:
                if PLO:
                    acc = warpgroup_mma(pl_smem, v_right, acc, is_async=True)
            acc = warpgroup_mma_wait(0, deps=(acc,))
            gl.thread_barrier()
            mbarrier.arrive(p_free, count=1)
            mbarrier.arrive(free.index(st), count=1)
        mbarrier.wait(p_ready, nblocks & 1)
        if VST:  # stage 1: warpgroup 0 stores through stage 0
            _store_rows_tile(acc * a_smem.load(ROW_O)[:, None], lat.index(1), t0, tok_end, h0, num_heads, out_ptr,
                             stride_ot, stride_oh, 256, HPT)
        else:
            _store_rows(acc * a_smem.load(ROW_O)[:, None], t0, tok_end, h0, num_heads, out_ptr, stride_ot,
                        stride_oh, 256, HPT)

    @gluon.jit
    def _work_item(idx_ptr, stride_it, end_ptr, mask_ptr, out_ptr, lse_ptr, stride_os, stride_ls, splits, num_heads,
                   topk, token0, G: gl.constexpr, HPT: gl.constexpr, BN: gl.constexpr, HAS_LEN: gl.constexpr,
                   SPLIT: gl.constexpr):
        """This program's work item (sparse_mla_prefill_kernel's docstring): (t0, h0, hi, its list's entries and
        masks rows, out_ptr and lse_ptr moved to its split's partial under SPLIT). Shared with gluon_pair."""
        g = gl.program_id(0)
        if G > 1:
            t0 = token0 + g * G
            h0 = g * 0
            row_off = g.to(gl.int64) * stride_it
            hi = gl.load(end_ptr + g)
        else:
            nhb = gl.cdiv(num_heads, HPT)
            t0 = g // nhb
            h0 = (g % nhb) * HPT
            row_off = t0.to(gl.int64) * stride_it
            hi = topk + g * 0
            if HAS_LEN:
                hi = gl.minimum(gl.load(end_ptr + t0), topk)
        if SPLIT:  # this split's part of the list: [lo, lo + hi) after the cut
            sp = gl.program_id(1)
            hi = gl.maximum(hi, 0)
            per = gl.cdiv(gl.cdiv(hi, BN), splits) * BN
            lo = sp * per
            hi = gl.maximum(gl.minimum(hi - lo, per), 0)
            row_off = row_off + lo
            out_ptr = out_ptr + sp.to(gl.int64) * stride_os
            lse_ptr = lse_ptr + sp.to(gl.int64) * stride_ls
        return t0, h0, hi, idx_ptr + row_off, mask_ptr + row_off, out_ptr, lse_ptr

    @gluon.jit(do_not_specialize=["num_slots", "num_heads", "topk", "token0", "tok_end", "stride_os", "stride_ls",
                                  "splits"])
    def sparse_mla_prefill_kernel(
            q_ptr, stride_qt, stride_qh, kv_ptr,
            idx_ptr, stride_it, end_ptr, mask_ptr,
            out_ptr, stride_ot, stride_oh, lse_ptr, stride_lt, stride_lh, stride_os, stride_ls, splits,
            num_slots, num_heads, topk, token0, tok_end, qk_scale,
            stride_kv: gl.constexpr, HAS_ROPE: gl.constexpr, HAS_LEN: gl.constexpr, G: gl.constexpr,
            HPT: gl.constexpr, BN: gl.constexpr, NS: gl.constexpr, F16: gl.constexpr,
            PROFILE: gl.constexpr, V_REGS: gl.constexpr,
            PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr,
            CVT_PIPE: gl.constexpr = 0, VST: gl.constexpr = 0, SPLIT: gl.constexpr = 0, CVT_ASM: gl.constexpr = 0,
            PLO: gl.constexpr = 1, CL: gl.constexpr = 0, PRE16: gl.constexpr = 0):
        """1-D grid, one program a work item. G > 1: program g of the chunk = tokens token0 + g * G + [0, G), its
        union list entries / masks row g (stride_it), end_ptr = counts. G == 1: program p = token p // nhb, head
        block p % nhb (nhb = cdiv(num_heads, HPT): a token's head blocks are neighbouring programs, so they run at
        the same time and may share their gathered rows in L2; at 128 heads s_q 1024 issue 3's table read 1.506 ms
        against 1.515 with the head block as the slower grid axis, within run-to-run spread: session 14,
        bench/results/sparse_mla_s14_prefill_1024_order.json, _eager.json), idx_ptr = indices, end_ptr =
        topk_length (HAS_LEN) or unused. qk_scale: sm_scale * log2(e).
        SPLIT (splits > 1): grid axis 1 = split; the work item's list of hi entries is cut into `splits` parts of
        whole blocks (cdiv(cdiv(hi, BN), splits) blocks each, the last ones shorter or empty), split s walks part s
        alone and stores its normalized partial at out_ptr + s * stride_os / lse_ptr + s * stride_ls (an empty
        part: 0 / -inf), for kernels.combine_splits_kernel. Unsplit launches (SPLIT 0) compile none of it: with the
        cut computed at run time in every launch (064edf2 to session 58), the unsplit 64-head prefill ran 15% slower
        on an H100 (s_q 1024: 775.6 against 675.5 us a call before 064edf2; notes/sparse_mla.md, session 58)."""
        gl.static_assert(G * HPT == 64, "64 rows a program")
        GROUPED: gl.constexpr = G > 1
        t0, h0, hi, idx_row, mask_row, out_ptr, lse_ptr = _work_item(
            idx_ptr, stride_it, end_ptr, mask_ptr, out_ptr, lse_ptr, stride_os, stride_ls, splits, num_heads, topk,
            token0, G, HPT, BN, HAS_LEN, SPLIT)

        LAT_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, 512], gl.bfloat16)
        ROPE_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BN, 64], gl.bfloat16)

        # F16: q, P and the converted stages in fp16 (V_SCALE units for the stages); else bf16 throughout
        QP_DT: gl.constexpr = gl.float16 if F16 else gl.bfloat16
        Q_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([ROWS, 512], QP_DT)
        P_S: gl.constexpr = gl.NVMMASharedLayout.get_default_for([ROWS, BN], QP_DT)
        q_smem = gl.allocate_shared_memory(QP_DT, [ROWS, 512], Q_S)
        lat = gl.allocate_shared_memory(gl.bfloat16, [NS, BN, 512], LAT_S)
        if HAS_ROPE:
            rope = gl.allocate_shared_memory(gl.bfloat16, [NS, BN, 64], ROPE_S)
        else:
            rope = lat
        ph_smem = gl.allocate_shared_memory(QP_DT, [ROWS, BN], P_S)
        if F16:
            pl_smem = ph_smem  # one fp16 P
        elif PLO:
            pl_smem = gl.allocate_shared_memory(gl.bfloat16, [ROWS, BN], P_S)
        else:
            pl_smem = ph_smem  # bf16 P alone (config plo 0): unread
        full = gl.allocate_shared_memory(gl.int64, [NS, 1], mbarrier.MBarrierLayout())
        free = gl.allocate_shared_memory(gl.int64, [NS, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NS):
            mbarrier.init(full.index(i), count=1)
            mbarrier.init(free.index(i), count=2)  # both consumer warpgroups release a stage

        p_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        p_free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(p_ready, count=1)
        mbarrier.init(p_free, count=1)
        a_smem = gl.allocate_shared_memory(gl.float32, [ROWS], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        gl.warp_specialize([
            (_wg_s, (q_ptr, stride_qt, stride_qh, idx_row, mask_row, hi, t0, tok_end, h0, num_slots, num_heads,
                     qk_scale, out_ptr, stride_ot, stride_oh, lse_ptr, stride_lt, stride_lh,
                     q_smem, lat, rope, ph_smem, pl_smem, a_smem, full, free, p_ready, p_free,
                     HAS_ROPE, GROUPED, HPT, BN, NS, F16, PROFILE, num_warps, VST, PLO)),
            (_wg_v, (hi, t0, tok_end, h0, num_heads, out_ptr, stride_ot, stride_oh, lat, ph_smem, pl_smem, a_smem,
                     full, free, p_ready, p_free, HPT, BN, NS, F16, PROFILE, VST, PLO)),
            (_producer, (idx_row, hi, num_slots, kv_ptr, lat, rope, full, free, stride_kv, HAS_ROPE, BN, NS, F16,
                         PROFILE, PRODUCER_WARPS, CVT_PIPE, CVT_ASM, CL, PRE16)),
        ], [4, PRODUCER_WARPS], [V_REGS, PRODUCER_REGS])


def _profile() -> int:
    """DSATTN_PF_PROFILE (timing builds only, WRONG OUTPUTS), bits: 1 no gathers (the consumer computes on whatever
    the stages hold); 2 no products (the consumer takes each gathered stage and hands it back; 3: the hand-offs
    alone). 4 (gluon_pair only, outputs right; session 72): the producer reads each stage's latent part once more
    from shared memory (gluon_pair._probe_reads), a probe of whether shared-memory traffic bounds the kernel; 8 / 16
    (gluon_pair only, session 73): the consumers issue no S / no P V products (every wait, hand-off and release
    stays; 24 = both: its build drops the stages' shared memory, so it is not comparable). 32 (gluon_pair only,
    outputs right; session 74): each consumer warpgroup stamps %clock64 at a step's points into
    gluon_pair.LAST_STAMPS (gluon_pair.stamp_buffer, allocated by the launch: a timing build's only allocation).
    Taken: 0..5, 8 / 16 / 24 alone or with 1, and 32."""
    v = os.environ.get("DSATTN_PF_PROFILE", "0").strip() or "0"
    if v not in ("0", "1", "2", "3", "4", "5", "8", "9", "16", "17", "24", "25", "32"):
        raise ValueError(f"DSATTN_PF_PROFILE must be 0..5, 8 / 16 / 24 alone or with 1, or 32, got {v!r}")
    return int(v)


def _launch(q, flat, idx, stride_i, end, masks, sm_scale, topk, token0, tok_end, programs, g, hpt, has_len,
            cfg: PrefillConfig, dest) -> None:
    """One launch of `programs` work items x dest's splits. dest: (splits, o, o's token / split / head strides,
    lse, lse's three strides), from _dest. cfg.pair: gluon_pair's kernel (run_prefill_gluon checked pre16 and
    D_qk 576)."""
    profile = _profile()
    splits, o, so_t, so_s, so_h, ls, sl_t, sl_s, sl_h = dest
    if cfg.pair:
        from . import gluon_pair
        stamps = None
        if profile & 32:
            stamps = gluon_pair.LAST_STAMPS = gluon_pair.stamp_buffer(programs, splits, q.device)
        _fast(
            gluon_pair.pair_prefill_kernel, (programs, splits),
            q, q.stride(0), q.stride(1), flat,
            idx, stride_i, end, masks,
            o, so_t, so_h, ls, sl_t, sl_h, so_s, sl_s, splits,
            flat.shape[0], q.shape[1], topk, token0, tok_end, float(sm_scale) * LOG2E,
            flat.stride(0), has_len, g, hpt, profile, gluon_pair.pair_regs(gluon_pair.PAIR_PRODUCER_REGS),
            PRODUCER_WARPS, gluon_pair.PAIR_PRODUCER_REGS, num_warps=4, SPLIT=int(splits > 1), SFOLD=cfg.sfold, PREL=cfg.prel, FQ=cfg.fq,
            QREG=cfg.qreg, LAZY=cfg.lazy, VST=cfg.vst, stamp_ptr=stamps, ODD=cfg.odd,
        )
        return
    _fast(  # kernel[grid](...) without Triton's per-call binding once this specialization ran (ops/_fastlaunch.py)
        sparse_mla_prefill_kernel, (programs, splits),
        q, q.stride(0), q.stride(1), flat,
        idx, stride_i, end, masks,
        o, so_t, so_h, ls, sl_t, sl_h, so_s, sl_s, splits,
        flat.shape[0], q.shape[1], topk, token0, tok_end, float(sm_scale) * LOG2E,
        flat.stride(0), q.shape[2] > LATENT_DIM, has_len, g, hpt, cfg.block_n, cfg.stages,
        bool(cfg.f16), profile, SPLIT_V_REGS,
        PRODUCER_WARPS, cfg.producer_regs,
        num_warps=4, CVT_PIPE=cfg.cvt_pipe, VST=cfg.vst, SPLIT=int(splits > 1),
        CVT_ASM=cfg.cvt_asm if cfg.f16 else 0, PLO=1 if cfg.f16 else cfg.plo, CL=cfg.cl, PRE16=cfg.pre16,
    )


def _dest(out, lse, splits, part_o, part_lse):
    """Where the programs store: out / lse (splits 1), else the partials [T, S, H, 512] / [T, S, H]."""
    if splits == 1:
        return (1, out, out.stride(0), 0, out.stride(1), lse, lse.stride(0), 0, lse.stride(1))
    return (splits, part_o, part_o.stride(0), part_o.stride(1), part_o.stride(2),
            part_lse, part_lse.stride(0), part_lse.stride(1), part_lse.stride(2))


def run_prefill_gluon(q, flat, indices, sm_scale, topk_length, out, lse, scratch=None,
                      config: PrefillConfig | None = None, pad64: bool = False, splits: int = 1, part_o=None,
                      part_lse=None, key_slots=None) -> None:
    """Sparse MLA prefill (SPEC 3) over bf16 rows flat [N, D_qk] for q [T, H, D_qk] into out / lse through
    sparse_mla_prefill_kernel. Inputs already validated by sparse_mla_prefill. G > 1 (<= 32 heads): tokens in
    chunks of C * G (C: the groups scratch holds), each chunk's union lists built by grouping.build_groups into
    scratch = (entries, masks, counts) (validated by sparse_mla_prefill; allocated here from
    grouping.prefill_scratch_spec when None), then one launch per chunk. G == 1: one launch of T x (head blocks of
    64) programs. pad64 (the 'pad64' variant): G == 1 at any head count, a token's heads in one 64-row program
    (rows past H masked: zero q, never stored), scratch unused. splits > 1 (a short prefill; dispatch.prefill_splits):
    each work item's list is walked by `splits` programs into part_o / part_lse ([T, S, H, 512] / [T, S, H] fp32),
    then launch.combine_splits writes out / lse. key_slots (G > 1 only): indices are keys; the union lists are built
    over them (keys in [0, len(key_slots))) and then turned into slots (grouping.translate_entries)."""
    t, h, d = q.shape
    topk = indices.shape[1]
    hpt, g = (64, 1) if pad64 else group_shape(h)
    cfg = config or prefill_config(h, d)
    if cfg.pair and not (cfg.pre16 and d == LATENT_DIM + 64):
        cfg = dataclasses.replace(cfg, pair=0)  # the pair runs over converted rows with a RoPE tile (its P's place)
    if splits > 1 and cfg.vst and cfg.block_n * 512 * 2 < M * 256 * 4:
        cfg = dataclasses.replace(cfg, vst=0)  # a 32-entry stage cannot hold a half of the fp32 partial
    dest = _dest(out, lse, splits, part_o, part_lse)
    if key_slots is not None and g == 1:
        raise ValueError("key_slots needs the grouped kernel (G > 1); launch.launch_prefill looks the slots up")
    if g == 1:
        end = topk_length if topk_length is not None else indices
        _launch(q, flat, indices, indices.stride(0), end, indices, sm_scale, topk, 0, t,
                t * -(-h // hpt), 1, hpt, topk_length is not None, cfg, dest)
        combine_splits(out, lse, part_o, part_lse, splits)
        return
    if scratch is None:
        scratch = [torch.empty(shape, dtype=dt, device=q.device) for shape, dt in prefill_scratch_spec(t, h, topk)]
    entries, masks, counts = scratch
    chunk = counts.shape[0] * g
    for token0 in range(0, t, chunk):
        n = min(chunk, t - token0)
        num = flat.shape[0] if key_slots is None else key_slots.shape[0]
        groups = _build_groups(indices, topk_length, num, g, token0, n, entries, masks, counts, -(-n // g))
        if key_slots is not None:
            # gluon_pair reads validity from the masks alone: an entry whose slot is outside flat scores -inf there
            # only with its mask cleared (a keyed call over converted rows: kmap's -1)
            translate_entries(entries, counts, groups, key_slots, masks if cfg.pair else None, flat.shape[0])
        _launch(q, flat, entries, entries.stride(0), counts, masks, sm_scale, topk, token0, token0 + n,
                groups, g, hpt, False, cfg, dest)
    combine_splits(out, lse, part_o, part_lse, splits)
