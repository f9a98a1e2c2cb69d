"""A Gluon select for rows that fit the candidate capacity (Hopper, sm_90): one program a row (one CTA, or a
thread-block cluster of CTAs, below), the row's keys in registers, the k-th largest found by radix passes over
shared-memory histograms (inline-PTX shared atomics) instead of select.py's two-bit counting steps.
select.launch_topk_v4 runs it on sm_90 for every row set that fits its capacity (`gluon`; DSATTN_TOPK_GLUON=0 keeps
the Triton kernels, for A/B runs), with the capacity widened to the rows' width up to 8192 columns at <= 2 x SMs rows
(wide_capacity: at k 512 rows past select_capacity's 2048 take it instead of the long-row paths), and over
thread-block clusters (default_ctas) up to 16384 columns at <= SMs rows (4 CTAs at 1-33 rows, 2 at 34-132 past 8192
columns) and past them (decodes over 16K-64K contexts) up to MAX_CLUSTER_CAP (65536): 8 CTAs at <= 15 rows, 4 at
16-30 rows up to 32768 columns and at 16 past them; the interpreter and other GPUs keep the Triton select, whose
output it equals column for column (tests/gpu/test_indexer_gpu.py::test_topk_gluon_select_rows,
test_topk_gluon_wide_rows). DSATTN_TOPK_CTAS and
DSATTN_TOPK_CLUSTER_CAP (16384-65536 columns, MAX_CTA_COLS a CTA) set the cluster for A/B runs.

Why: at 1-8 decode requests the Triton select alone (`_v4_select` over rows a little wider than the usual capacity,
select.select_capacity) was the largest kernel of a glm-5 decode layer, 15.8-16.5 us of a 30.0-36.1 us span
(bench/results/decode_layer_topk_e_s48_triton.json), for one row of ~4K columns a program: 7-12 two-bit steps,
each a CTA-wide tuple reduction (shuffles, two barriers) after 96 compares a thread, then two CTA-wide ordered scans
(notes/indexer.md, session 41's profile). Here a pass decides 8 bits with one shared atomic a matching key, one barrier, and a scan that every warp
runs by itself over the whole histogram (no second barrier, no broadcast).

The program (NW warps, R consecutive columns a thread, CAP = 32 R NW columns; a [NW, 32 R] tile, one warp a row, so
that every scan and sum runs within a warp by shuffles and no Triton operation uses shared memory, as
sparse_mla.grouping_smem's kernels):
1. keys: an fp32 logit maps to the uint32 whose unsigned order is the float order (-0.0 as +0.0), as select.py.
   The row is loaded before its length is known (columns past it masked after). A row with n_valid <= k lists its
   valid columns and -1 after them, and nothing else runs.
2. lo / hi: the smallest and largest valid key (a warp's by redux, the CTA's by red.shared.min / max). Every valid key
   shares lo's bits above hb, the highest bit in which lo and hi differ, so the passes decide only the hb bits below.
3. pass p: the keys that match the prefix decided so far (bits above hi_bit) add one to bin (key >> shift) & mask of
   the pass's histogram (shift = max(hi_bit - DB, 0), its own 2^DB-word region, zeroed at the start); a barrier; then
   every warp reads the whole histogram and takes its suffix sums suf; since suf does not grow with the bin, the bin b
   of the `need`-th largest matching key (the count of suf >= need, less one), the keys above it (the largest suf below
   need) and those from it on (the smallest suf at or above need) are three reductions that do not wait for one
   another. need -= above, the prefix gains b. When the bin holds exactly `need` keys the prefix (its lower bits 0) is a
   threshold with exactly k keys >= it: stop early. The pass's results are the same in every warp; each warp stores
   them in its own words and reads them back as scalars (inline PTX, address from %tid.x), so the loop runs on
   scalars without another barrier.
4. emit: entries > T (or >= T after an early stop) and the first `need` entries == T in column order; each entry's
   place is its count of taken entries before it, from one scan of (gt | eq << 16) within its warp plus the warp
   totals of the warps before (one barrier). The taken columns go to their places in a shared-memory copy of the
   output row and, after a barrier, out in coalesced stores. So the row comes out in ascending column order, the same
   set and order as the Triton select's.

A row over a cluster (CTAS > 1; default_ctas: rows of >= 4096 columns at few enough rows, above). CTA c takes the
columns [c span, c span + span) (cluster_columns: width / ctas rounded up to 16) and runs the steps above over them,
the cluster's sums exchanged through distributed shared memory (inline PTX: mapa + red.shared::cluster into every
CTA's words, then barrier.cluster.arrive / wait, release / acquire):
- lo / hi: every warp's min / max into every CTA's lo / hi words, one cluster barrier (and one before it: every CTA's
  words zeroed before any CTA adds into them);
- a pass: the matching keys count into the CTA's own histogram; after a CTA barrier each CTA adds its nonzero bins into
  every CTA's pass histogram; a cluster barrier; then each warp scans as above, so every CTA of the cluster decides the
  same bits, the same number of passes and the same `need`;
- emit: every warp's packed (gt | eq << 16) total into every CTA's word of this CTA; a cluster barrier; a CTA's first
  output place is the gt count of the CTAs before it plus min(their eq count, need) (the CTAs' words unpacked first: a
  CTA's eq count fits 16 bits, a row's may not, and past 2^15 the packed sum went negative: an illegal instruction on
  the H200 at 8 x 65536 ±0 ties, session 53), and its entries go out from its own shared-memory copy. The stretches
  are in column order, so the output is the same as one CTA's.
Triton stores a tensor whose layout is whole in every CTA of a cluster from CTA 0 only, so the output's stores are
inline PTX (st.global) there. No CTA touches another's shared memory after the last cluster barrier, so none waits
before it exits.

Histogram words are swizzled (bin b at word (b % HR) x 32 + b // HR, HR bins a lane) so that a warp's reads of the
whole histogram, lane l taking bins l HR .. l HR + HR - 1, touch 32 banks at once.

Shared memory (words from global_smem, sized by one buffer allocated below): lo, hi, in a cluster the CTAs' totals,
the NW emit totals, the pass results (MAXP x 4 x NW), MAXP histograms of 2^DB words (in a cluster MAXP more: the CTA's
own), the output row's copy (CAP / 2 words; in a cluster the CTA's part, up to its columns). sm_90a compile check
(bench/topk_gluon_check.py, this CPU machine): at the default warps 47-88 registers, no spill, the dynamic shared
memory exactly the words the inline PTX addresses; the predicated shared adds become ATOMS.POPC.INC. With a
cluster (--ctas 2 4 8, capacities 1024-8192): at most 53 registers, no spill, the shared memory again exactly the
words, the remote adds ATOM.E, the cluster barriers UCGABAR; one CTA's SASS is the same as before the cluster was
added (session 49).

Measured (H200; the numbers, with every version tried and dropped, in notes/indexer.md, sessions 48-53): a row a CTA
against the Triton select, CUDA-graph replays, 1 x 4160 10.6 against 15.0 us, 264 x 8192 24.5 against 39.1
(topk_gluon_e_s48.json); the rows over clusters in default_ctas. Tried and removed: the first pass's bin gathered into
shared memory for the later passes (code at 95964fa), 10 bits a pass; a row a CTA at capacity 16384 ran right and
no faster than the Triton long-row paths on the whole, so MAX_CAP stays 8192.
"""
from __future__ import annotations

import functools
import os

from .._fastlaunch import launch as _fast_launch
from .._triton import interpreting

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    HAVE_GLUON = True
except Exception:  # pragma: no cover - a Triton without Gluon
    HAVE_GLUON = False

MIN_CAP = 256       # the smallest capacity it takes
MAX_CAP = 8192      # the largest it takes with one CTA a row: 16 keys a thread at 16 warps. 16384 (32 keys a thread,
                    # 120 registers, no spill by bench/topk_gluon_check.py) ran right but no faster than the Triton
                    # long-row paths on the whole (bench/gpu_s48.sh g, topk_gluon_wide_s48.json: 1 x 16384 32.6
                    # against 24.6 us, 128 x 12288 29.1 against 32.8; notes/indexer.md), so those rows keep them
MAX_CLUSTER_CAP = 65536  # the largest with a row over a cluster (ctas > 1), within MAX_CTA_COLS columns a CTA:
                         # 8 CTAs of 8192 columns, 103 registers, no spill; 1 x 65536 17.7 against 22.7 us on the
                         # Triton paths (bench/gpu_s50.sh a, session 52). Session 49's 4-CTA clusters stopped at 16384
                         # (1 x 16384 12.6 against 22.8 us, bench/gpu_s49.sh e)
MAX_CTA_COLS = 16384     # a CTA's columns at most: 32 keys a thread at 16 warps, 120 registers, no spill (4 CTAs at
                         # cap 65536); 32768 spilled 252 bytes a thread (2 CTAs at 65536; compile check, session 50:
                         # bench/logs/s50/topk_gluon_check_wide.log)


def cluster_cap() -> int:
    """The widest capacity a row over a cluster takes: MAX_CLUSTER_CAP, or DSATTN_TOPK_CLUSTER_CAP (read at each call;
    a power of two in [16384, MAX_CLUSTER_CAP]) for A/B runs: 16384 is session 49's limit."""
    env = os.environ.get("DSATTN_TOPK_CLUSTER_CAP", "").strip()
    if not env:
        return MAX_CLUSTER_CAP
    v = int(env) if env.isdigit() else 0
    if v & (v - 1) or not 16384 <= v <= MAX_CLUSTER_CAP:
        raise ValueError(f"DSATTN_TOPK_CLUSTER_CAP must be a power of two in [16384, {MAX_CLUSTER_CAP}], got {env!r}")
    return v


def max_capacity(ctas: int) -> int:
    """The widest capacity at `ctas` CTAs a row: MAX_CAP for one CTA; over a cluster cluster_cap(), within
    MAX_CTA_COLS columns a CTA."""
    return MAX_CAP if ctas == 1 else min(cluster_cap(), ctas * MAX_CTA_COLS)


def wide_capacity(rows: int, width: int, k: int, sms: int, ctas: int | None = None) -> int:
    """The capacity that takes rows of `width` columns in one launch of this select: the power of two at or above
    max(2k, width), when it is at most max_capacity(ctas) (MAX_CAP; MAX_CLUSTER_CAP where a row goes over a cluster:
    `ctas`, None: default_ctas) and there are at most two rows an SM (as select.select_capacity's doubled capacity);
    else 0. At k 2048 and one CTA a row that is select_capacity's own; at k 512 (glm-5.3-flash's pooled keys) it takes
    rows up to 8192 columns, where select_capacity stops at 2048: H200, CUDA-graph replays, against the Triton kernels
    (topk_gluon_wide_k512_s48.json): 1 x 4160 11.6 against 16.4 us, 32 x 3072 9.6 against 19.7, 128 x 3072 10.4
    against 24.5, 128 x 8192 14.0 against 24.5. Over 4-CTA clusters (<= SMs / 4 rows) k 2048 rows up to 16384 columns
    too (topk_cluster_e_s49.json): 1 x 12288 12.2 against 23.1 us, 32 x 10176 16.6 against 25.8; over 2, 4 or 8-CTA
    clusters the wider rows of default_ctas (its docstring has the numbers)."""
    cap = 1 << (max(2 * k, width, MIN_CAP) - 1).bit_length()
    ctas = ctas or default_ctas(rows, width, sms)
    return cap if cap <= max_capacity(ctas) and rows <= 2 * sms else 0


def default_warps(cap: int) -> int:
    """Warps a program at capacity cap: 16 from 4096, 8 at 2048, else 4 (8-16 keys a thread). H200, CUDA-graph replays
    (bench/results/topk_gluon_b_s48.json, _k512_b_s48.json), us at 8 -> 16 warps: 1 x 4160 (cap 8192) 14.8 -> 12.2,
    264 x 8192 34.8 -> 27.9, 1 x 4096 10.6 -> 9.3; k 512 at cap 2048 4 -> 8 warps: 8 x 2048 9.0 -> 8.0."""
    return 16 if cap >= 4096 else 8 if cap >= 2048 else 4


CLUSTER_CTAS = 4            # CTAs a row where a cluster pays (default_ctas)
CLUSTER_MIN_WIDTH = 4096    # ... from this many columns


def default_ctas(rows: int, width: int, sms: int) -> int:
    """CTAs a row (a thread-block cluster, each CTA over width / ctas columns), by the rows' width:
    - below CLUSTER_MIN_WIDTH (4096) columns: 1;
    - 4096-16384 columns: CLUSTER_CTAS (4) while the clusters fit one wave (4 x rows <= SMs: decodes at 1-33
      requests); past 8192 columns 2 while rows <= SMs (34-132 rows: 2 x rows CTAs, one an SM, at most two waves;
      the Triton long-row paths ran there before); else 1 (one CTA's 8192 columns, or those paths past them);
    - past 16384 columns (decodes over 16K+ contexts; wide_capacity takes them up to MAX_CLUSTER_CAP): 8 while the
      clusters fit one wave, 8 x rows <= cluster_slots(sms) (1-15 rows at 132 SMs); then up to 32768 columns 4 while
      4 x rows <= cluster_slots (16-30 rows), past them 4 while 4 x rows <= SMs / 2 (16 rows); else 1 (the Triton
      paths). Past 32768 columns a CTA of a 4-CTA cluster holds 16384 columns (131072 B of shared memory): on an H100
      it lost to the Triton paths at every row count measured past 15 but one (16 x 33728 29.9 against 25.9 us,
      24 x 33728 33.6 against 27.7, 24 x 65536 37.8 against 34.8; 30 x 33728 30.7 against 33.6), while on the H200
      at 16 rows from 32K contexts it ran 23.4-23.6 against 26.1 inside the glm-5 TP8 decode layer
      (decode_layer_rule_32k_{b,d,f}_s53_*.json); 16 rows keep it there until an H200 A/B of 16-30 rows.
    H200 unless said, CUDA-graph replays, us, each branch against the next choice (the full tables: notes/indexer.md,
    sessions 49, 52, 53, 57): 4 CTAs 1 x 8192 10.5 against 13.0 a row a CTA, 64 x 4160 12.7 against 12.3 (past SMs / 4
    rows 4 CTAs lose); 2 CTAs 64 x 12288 18.5 against 29.8 on the Triton long-row paths (4 CTAs 23.9); 8 CTAs 1 x 32768
    12.3 against 15.0 over 4 and 23.1 on the Triton paths, 12 x 40000 19.4 against 31.5 over 4; H100 (session 57):
    15 x 33728 22.0 over 8 against 33.2 over 4 and 26.6 on the Triton paths, 13 x 24576 18.1 over 8 against 20.4 over
    4, 24 x 24576 20.8 over 4 against 27.2 on the Triton paths, 30 x 32768 22.0 against 27.7; 16 x 33728 over 8
    (a second wave) 32.8 (topk_cluster_c_s49.json, bench/logs/s52/a, topk_rows12_e_s53.json, topk_rows16_d_s53.json,
    topk_counts_{a,b}_h100_s57.json).
    DSATTN_TOPK_CTAS (1, 2, 4 or 8; read at each call) sets it for A/B runs."""
    env = os.environ.get("DSATTN_TOPK_CTAS", "").strip()
    if env:
        if env not in ("1", "2", "4", "8"):
            raise ValueError(f"DSATTN_TOPK_CTAS must be 1, 2, 4 or 8, got {env!r}")
        return int(env)
    if width < CLUSTER_MIN_WIDTH:
        return 1
    if width <= 16384:
        if CLUSTER_CTAS * rows <= sms:
            return CLUSTER_CTAS
        return 2 if width > MAX_CAP and rows <= sms else 1
    slots = cluster_slots(sms)
    if 8 * rows <= slots:
        return 8
    if width <= 32768:
        return 4 if 4 * rows <= slots else 1
    return 4 if 4 * rows <= sms // 2 else 1  # session 53's bound: at 16 rows an H200 A/B had 4 CTAs ahead


def cluster_slots(sms: int) -> int:
    """CTAs of the wide rows' clusters that run at once, one CTA an SM: 10/11 of the SMs. The driver's counts on a
    132-SM H100 (bench/cluster_occupancy.py; cluster_occupancy_h100_s56.json, the same again in session 57) come to
    120 CTAs at every cluster past 16384 columns: 15 clusters of 8 and 30 of 4 at one CTA an SM, 30 of 8 at two (an
    8-CTA cluster stays within one GPC, so some SMs of each GPC stay out). Other SM counts scale by the same fraction,
    which no driver here has confirmed."""
    return sms * 10 // 11


def default_bits(cap: int, num_warps: int) -> int:
    """Bits a pass decides (2^bits bins): 8, fewer where a warp holds fewer than 256 columns. H200, 16 warps, 9 -> 8
    bits (topk_gluon_b_s48.json): 1 x 4160 12.2 -> 12.0 us, 32 x 6144 14.6 -> 13.5, 264 x 8192 27.9 -> 25.6; 10 bits
    slower everywhere (1 x 4160 14.4)."""
    return min(8, (cap // num_warps).bit_length() - 1)


def passes(bits: int) -> int:
    """Histogram passes at most: 32 bits, `bits` a pass."""
    return (32 + bits - 1) // bits


def smem_words(cols: int, num_warps: int, bits: int, ctas: int = 1) -> int:
    """A CTA's shared-memory words at `cols` columns a CTA: lo, hi and padding (8), in a cluster the CTAs' totals
    (ctas), the emit totals, pass results, histograms (in a cluster twice: the cluster's and the CTA's own), the output
    row's copy (cols / 2 words, k <= cap / 2; in a cluster the CTA's part, up to cols), rounded up to a power of 2 (the
    buffer that sizes them)."""
    maxp = passes(bits)
    if ctas == 1:
        used = 8 + num_warps + maxp * 4 * num_warps + maxp * (1 << bits) + cols // 2
    else:
        used = 8 + ctas + num_warps + maxp * 4 * num_warps + 2 * maxp * (1 << bits) + cols
    return 1 << (used - 1).bit_length()


def cluster_columns(width: int, cap: int, ctas: int) -> tuple[int, int]:
    """(span, cols): a CTA's stretch of the row and its columns (registers; a power of two >= span). One CTA takes
    the capacity whole; in a cluster each CTA takes width / ctas columns rounded up to 16 (Triton then knows that a
    thread's run of consecutive columns lies in one CTA's stretch: one compare a run), at least 128."""
    if ctas == 1:
        return cap, cap
    span = max((-(-width // ctas) + 15) // 16 * 16, 128)
    return span, 1 << (span - 1).bit_length()


if HAVE_GLUON:
    from .._smem import add as _add, lds as _lds, sts as _sts, sts_if as _sts_if  # noqa: F401 (used in the kernels)

    @gluon.jit
    def _lds_warp(off):
        """ld.shared.b32 [global_smem + off + 4 x warp] with a scalar off: a scalar, the word of the reading thread's
        warp (%tid.x / 32)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a, t; mov.u32 t, %tid.x; shr.u32 t, t, 5; shl.b32 t, t, 2; mov.u32 a, global_smem; "
            "add.u32 a, a, $1; add.u32 a, a, t; ld.shared.b32 $0, [a]; }",
            "=r,r", [off], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _red_add_if(off, ok):
        """red.shared.add.u32 [global_smem + off], 1 where ok != 0 (elementwise; the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a; .reg .pred p; setp.ne.u32 p, $2, 0; mov.u32 a, global_smem; add.u32 a, a, $1; "
            "@p red.shared.add.u32 [a], 1; mov.u32 $0, 0; }",
            "=r,r,r", [off, ok], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _red_minmax_lane0(off, lo, hi):
        """Lane 0 of the warp: red.shared.min.u32 [global_smem + off], lo and red.shared.max.u32 [.. + 4], hi
        (elementwise; the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a, l; .reg .pred p; mov.u32 l, %laneid; setp.eq.u32 p, l, 0; mov.u32 a, global_smem; "
            "add.u32 a, a, $1; @p red.shared.min.u32 [a], $2; @p red.shared.max.u32 [a+4], $3; mov.u32 $0, 0; }",
            "=r,r,r,r", [off, lo, hi], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _cta_rank():
        """%cluster_ctarank: this CTA's rank in its cluster (a scalar; 0 without a cluster)."""
        return gl.inline_asm_elementwise("mov.u32 $0, %cluster_ctarank;", "=r", [], dtype=gl.int32, is_pure=True,
                                         pack=1)

    @gluon.jit
    def _cluster_sync():
        """barrier.cluster.arrive (release) + barrier.cluster.wait (acquire): every thread of every CTA of the cluster
        is here, and the shared-memory writes and reductions each made before it, to its own or another CTA's words,
        are seen after it (a scalar dummy 0)."""
        return gl.inline_asm_elementwise("barrier.cluster.arrive; barrier.cluster.wait; mov.u32 $0, 0;", "=r", [],
                                         dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _stg_if(ptr, val, ok):
        """st.global.b32 [ptr], val where ok != 0, from every CTA of a cluster (elementwise; the output is a dummy 0).
        Triton stores a tensor whose layout is the same in every CTA of a cluster from CTA 0 only."""
        return gl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.u32 p, $3, 0; @p st.global.b32 [$1], $2; mov.u32 $0, 0; }",
            "=r,l,r,r", [ptr.to(gl.int64, bitcast=True), val, ok], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _red_cluster_add_if(off, val, dst, ok):
        """red.shared::cluster.add.u32 [the word at global_smem + off of CTA dst of the cluster], val where ok != 0
        (elementwise; the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a, r; .reg .pred p; setp.ne.u32 p, $4, 0; mov.u32 a, global_smem; add.u32 a, a, $1; "
            "mapa.shared::cluster.u32 r, a, $3; @p red.shared::cluster.add.u32 [r], $2; mov.u32 $0, 0; }",
            "=r,r,r,r,r", [off, val, dst, ok], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _red_cluster_add_lane0(off, val, dst):
        """Lane 0 of the warp: red.shared::cluster.add.u32 [the word at global_smem + off of CTA dst], val
        (elementwise; the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a, r, l; .reg .pred p; mov.u32 l, %laneid; setp.eq.u32 p, l, 0; mov.u32 a, global_smem; "
            "add.u32 a, a, $1; mapa.shared::cluster.u32 r, a, $3; @p red.shared::cluster.add.u32 [r], $2; "
            "mov.u32 $0, 0; }",
            "=r,r,r,r", [off, val, dst], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _red_cluster_lane0(off, lo, hi, dst):
        """Lane 0 of the warp, into CTA dst of the cluster: red.shared::cluster.min.u32 [global_smem + off], lo and
        .max.u32 [.. + 4], hi (elementwise; the output is a dummy 0)."""
        return gl.inline_asm_elementwise(
            "{ .reg .u32 a, r, l; .reg .pred p; mov.u32 l, %laneid; setp.eq.u32 p, l, 0; mov.u32 a, global_smem; "
            "add.u32 a, a, $1; mapa.shared::cluster.u32 r, a, $4; @p red.shared::cluster.min.u32 [r], $2; "
            "@p red.shared::cluster.max.u32 [r+4], $3; mov.u32 $0, 0; }",
            "=r,r,r,r,r", [off, lo, hi, dst], dtype=gl.int32, is_pure=False, pack=1)

    @gluon.constexpr_function
    def _blocked(size_per_thread, threads_per_warp, warps_per_cta, order, ctas):
        """gl.BlockedLayout for a cluster of `ctas` CTAs (a power of two) that each hold the whole tensor: one zero CGA
        basis a doubling (none without a cluster)."""
        cga = [[0] * len(order) for _ in range(ctas.bit_length() - 1)]
        return gl.BlockedLayout(size_per_thread, threads_per_warp, warps_per_cta, order, cga)

    @gluon.constexpr_function
    def _words_layout(ctas):
        """The shared buffer's layout, whole in every CTA of a cluster of `ctas`."""
        return gl.SwizzledSharedLayout(1, 1, 1, [0], [[0] for _ in range(ctas.bit_length() - 1)])

    @gluon.jit
    def _clz(x):
        """clz.b32 (32 for 0)."""
        return gl.inline_asm_elementwise("clz.b32 $0, $1;", "=r,r", [x], dtype=gl.int32, is_pure=True, pack=1)

    @gluon.jit
    def _pass(key, valid, t, hi_bit, need, p, HIST: gl.constexpr, RES: gl.constexpr, DB: gl.constexpr,
              H: gl.constexpr, NW: gl.constexpr, CTAS: gl.constexpr, LH: gl.constexpr, CL: gl.constexpr):
        """One histogram pass over the keys (any layout) that match t above hi_bit: the next DB bits (at most hi_bit)
        of the need-th largest among them. Returns t with them, need less the keys above its bin, early (1 when its
        bin holds exactly need keys) and the new hi_bit (the pass's shift). In a cluster (CTAS > 1) the keys count
        into this CTA's own histogram at LH first, which then adds itself into every CTA's at HIST."""
        NBIN: gl.constexpr = 1 << DB
        HR: gl.constexpr = NBIN // 32
        shift = gl.maximum(hi_bit - DB, 0)
        dmask = (1 << (hi_bit - shift)) - 1
        himask = (gl.full([], 0xFFFFFFFF, gl.int64) << hi_bit.to(gl.int64)).to(gl.uint32)  # bits >= hi_bit
        match = valid & (((key ^ t) & himask) == 0)
        digit = ((key >> shift.to(gl.uint32)) & dmask.to(gl.uint32)).to(gl.int32)
        hist = HIST + p * NBIN
        if CTAS == 1:
            _red_add_if((hist + (digit % HR) * 32 + digit // HR) * 4, match.to(gl.int32))
            gl.thread_barrier()
        else:
            _red_add_if((LH + p * NBIN + (digit % HR) * 32 + digit // HR) * 4, match.to(gl.int32))
            gl.thread_barrier()
            ci = gl.arange(0, 32 * NW, CL)
            for z in gl.static_range((NBIN + 32 * NW - 1) // (32 * NW)):
                w = gl.minimum(z * 32 * NW + ci, NBIN - 1)
                n = _lds((LH + p * NBIN + w) * 4)
                ok = ((n != 0) & (z * 32 * NW + ci < NBIN)).to(gl.int32)
                for d in gl.static_range(CTAS):
                    _red_cluster_add_if((hist + w) * 4, n, d, ok)
            _cluster_sync()
        hw = gl.arange(0, NW, gl.SliceLayout(1, H))
        bi = gl.arange(0, NBIN, gl.SliceLayout(0, H))        # a histogram's bins, HR consecutive a lane
        h = _lds(gl.zeros([NW, NBIN], gl.int32, H) + ((hist + (bi % HR) * 32 + bi // HR) * 4)[None, :])
        # matching keys in bins >= b (a forward scan: Triton's reverse one shuffles every element)
        suf = gl.sum(h, axis=1)[:, None] - gl.associative_scan(h, 1, _add) + h
        # suf does not grow with the bin, so the need-th largest's bin b, the keys above it (suf[b + 1]) and those
        # from it on (suf[b]) are three reductions that do not wait for one another
        b = gl.sum((suf >= need).to(gl.int32), axis=1) - 1
        above = gl.max(gl.where(suf < need, suf, 0), axis=1)
        inb = gl.min(gl.where(suf >= need, suf, 2147483647), axis=1) - above
        at = RES + p * 4 * NW
        _sts((at + hw) * 4, b)
        _sts((at + NW + hw) * 4, above)
        _sts((at + 2 * NW + hw) * 4, inb)
        b_s = _lds_warp(at * 4)
        need = need - _lds_warp((at + NW) * 4)
        t = t | (b_s.to(gl.uint32) << shift.to(gl.uint32))
        return t, need, (_lds_warp((at + 2 * NW) * 4) == need).to(gl.int32), shift

    @gluon.jit(do_not_specialize=["k", "width"])
    def select_rows_kernel(logits, stride_row, lengths, width, out, stride_out, k, span, R: gl.constexpr,
                           DB: gl.constexpr, MAXP: gl.constexpr, WORDS: gl.constexpr, STOP: gl.constexpr,
                           CTAS: gl.constexpr, num_warps: gl.constexpr):
        """Program r (one CTA, or a cluster of CTAS CTAs, CTA c over the columns [c span, c span + span), span <= 32 R
        num_warps): the columns of row r's k largest valid logits (columns < min(lengths[r], width)), ties toward the
        lower column, in ascending column order, -1 after them when fewer than k are valid. 32 R num_warps CTAS >=
        width without a cluster, span CTAS >= width with one (the launcher checks); a pass decides DB bits (2^DB bins).
        STOP (timing only, wrong output): 1 ends after lo / hi, 2 after the passes."""
        NW: gl.constexpr = num_warps
        NB: gl.constexpr = 32 * R                   # columns a warp
        NBIN: gl.constexpr = 1 << DB
        HR: gl.constexpr = NBIN // 32               # bins a lane
        P: gl.constexpr = _blocked([1, R], [1, 32], [NW, 1], [1, 0], CTAS)
        H: gl.constexpr = _blocked([1, HR], [1, 32], [NW, 1], [1, 0], CTAS)
        CL: gl.constexpr = _blocked([1], [32], [NW], [0], CTAS)
        LO: gl.constexpr = 0                        # word offsets: lo, hi
        CT: gl.constexpr = 8                        # a cluster's CTA totals, one a CTA
        TOT: gl.constexpr = 8 + (CTAS if CTAS > 1 else 0)   # emit totals, one a warp
        RES: gl.constexpr = TOT + NW                # pass p's results: 3 x NW words from RES + 4 NW p
        HIST: gl.constexpr = RES + MAXP * 4 * NW    # pass p's histogram: NBIN words from HIST + NBIN p
        LH: gl.constexpr = HIST + MAXP * NBIN       # in a cluster, this CTA's own histogram of pass p from LH + NBIN p
        OUT: gl.constexpr = LH + (MAXP * NBIN if CTAS > 1 else 0)   # the output row's copy (this CTA's part)
        OUTW: gl.constexpr = NB * NW // 2 if CTAS == 1 else NB * NW  # (k <= CAP / 2; a CTA's part <= its columns)
        USED: gl.constexpr = OUT                    # (the words that must start zeroed)
        gl.static_assert(OUT + OUTW <= WORDS, "shared-memory words")
        gl.static_assert(HR >= 1, "at least 32 bins")
        res = gl.allocate_shared_memory(gl.int32, [WORDS], _words_layout(CTAS))
        r = gl.program_id(0).to(gl.int64)
        out_row = out + r * stride_out
        wk = gl.arange(0, NW, gl.SliceLayout(1, P))
        cc = gl.arange(0, NB, gl.SliceLayout(0, P))
        col = wk[:, None] * NB + cc[None, :]                 # [NW, NB]: lane l of warp w holds R consecutive columns
        if CTAS == 1:
            inrow = col < width
        else:
            rank = _cta_rank()
            mine = col < span                                # this CTA's columns
            col = col + rank * span
            inrow = mine & (col < width)
        # the row's loads do not wait for its length (columns past it are masked after)
        x = gl.load(logits + r * stride_row + col, mask=inrow, other=0.0)
        n_valid = gl.minimum(gl.maximum(gl.load(lengths + r), 0), width)
        if n_valid <= k:
            if CTAS == 1:
                gl.store(out_row + col, gl.where(col < n_valid, col, -1), mask=col < k)
            else:
                _stg_if(out_row + col, gl.where(col < n_valid, col, -1), (mine & (col < k)).to(gl.int32))
        else:
            valid = col < n_valid
            if CTAS > 1:
                valid = valid & mine
            bits = (x + 0.0).to(gl.int32, bitcast=True)      # -0.0 + 0.0 = +0.0
            key = (bits ^ ((bits >> 31) | -2147483648)).to(gl.uint32, bitcast=True)
            # lo = 0xFFFFFFFF, hi = 0, the rest 0 (the histograms and the cluster's totals must be)
            ci = gl.arange(0, 32 * NW, CL)
            for z in gl.static_range((USED + 32 * NW - 1) // (32 * NW)):
                _sts_if((z * 32 * NW + ci) * 4, gl.where(z * 32 * NW + ci == LO, -1, 0),
                        (z * 32 * NW + ci < USED).to(gl.int32))
            if CTAS == 1:
                gl.thread_barrier()
            else:
                _cluster_sync()                              # every CTA's words zeroed before any CTA adds into them
            wlo = gl.min(gl.where(valid, key, 0xFFFFFFFF), axis=1)
            whi = gl.max(gl.where(valid, key, 0), axis=1)
            if CTAS == 1:
                _red_minmax_lane0(wk * 0 + LO * 4, wlo.to(gl.int32, bitcast=True), whi.to(gl.int32, bitcast=True))
                gl.thread_barrier()
            else:
                for d in gl.static_range(CTAS):
                    _red_cluster_lane0(wk * 0 + LO * 4, wlo.to(gl.int32, bitcast=True),
                                       whi.to(gl.int32, bitcast=True), d)
                _cluster_sync()
            lo = _lds(LO * 4)
            hi = _lds(LO * 4 + 4)
            hb = 32 - _clz(lo ^ hi)                          # bits below the shared prefix
            t = (lo.to(gl.int64) & ~((gl.full([], 1, gl.int64) << hb.to(gl.int64)) - 1)).to(gl.uint32)
            need = k + gl.to_tensor(0)
            hi_bit = hb
            early = gl.to_tensor(0)
            if STOP == 1:
                hi_bit = hi_bit * 0
            p = gl.to_tensor(0)
            while (hi_bit > 0) & (early == 0):
                t, need, early, hi_bit = _pass(key, valid, t, hi_bit, need, p, HIST, RES, DB, H, NW, CTAS, LH, CL)
                p += 1
            if STOP == 0:
                # after an early stop exactly k valid keys are >= t; else t is the k-th largest and `need` of its
                # ties go
                gt = valid & gl.where(early != 0, key >= t, key > t)
                eq = valid & (early == 0) & (key == t)
                v = gt.to(gl.int32) + (eq.to(gl.int32) << 16)
                incl = gl.associative_scan(v, 1, _add)
                wsum = gl.sum(v, axis=1)
                _sts((TOT + wk) * 4, wsum)
                base = gl.zeros([NW], gl.int32, gl.SliceLayout(1, P))
                if CTAS == 1:
                    gl.thread_barrier()
                    first = gl.to_tensor(0)                  # the output place of this CTA's first taken entry
                    n_out = k + gl.to_tensor(0)              # and its number of taken entries
                else:
                    # the CTA's total (packed) into every CTA's word of this CTA, warp by warp
                    for d in gl.static_range(CTAS):
                        _red_cluster_add_lane0(wk * 0 + (CT + rank) * 4, wsum, d)
                    _cluster_sync()
                    # the gt and eq counts of the CTAs before this one, and with this one's, unpacked: a CTA's
                    # packed total fits (<= MAX_CTA_COLS of each), the row's eq count may not (65536 ties << 16)
                    gt_before = gl.to_tensor(0)
                    eq_before = gl.to_tensor(0)
                    gt_upto = gl.to_tensor(0)
                    eq_upto = gl.to_tensor(0)
                    for j in gl.static_range(CTAS):
                        c = _lds((CT + j) * 4)
                        gt_before += gl.where(rank > j, c & 0xFFFF, 0)
                        eq_before += gl.where(rank > j, c >> 16, 0)
                        gt_upto += gl.where(rank >= j, c & 0xFFFF, 0)
                        eq_upto += gl.where(rank >= j, c >> 16, 0)
                    # eq packed again at most `need` (<= k): only min(eq before, need) decides a place, and a CTA's
                    # own eq count on top of it stays below 2^15
                    eq_before = gl.minimum(eq_before, need)
                    base += gt_before + (eq_before << 16)
                    first = gt_before + eq_before
                    n_out = gt_upto + gl.minimum(eq_upto, need) - first
                for j in gl.static_range(NW):
                    base += gl.where(wk > j, _lds(wk * 0 + (TOT + j) * 4), 0)
                pre = base[:, None] + incl - v               # taken entries before this one (packed)
                gtb = pre & 0xFFFF
                eqb = pre >> 16
                sel = gt | (eq & (eqb < need))
                # each taken column to its place in a shared-memory copy of the output row (this CTA's part), then
                # the row out in coalesced stores (a thread's taken columns land apart from its neighbours': 32 lines
                # a store)
                _sts_if((OUT + gtb + gl.minimum(eqb, need) - first) * 4, col, sel.to(gl.int32))
                gl.thread_barrier()
                for o in range(0, n_out, 32 * NW):
                    if CTAS == 1:
                        gl.store(out_row + o + ci, _lds((OUT + gl.minimum(o + ci, OUTW - 1)) * 4), mask=o + ci < k)
                    else:
                        _stg_if(out_row + first + o + ci, _lds((OUT + gl.minimum(o + ci, OUTW - 1)) * 4),
                                (o + ci < n_out).to(gl.int32))
            gl.thread_barrier()                              # every raw read done before the buffer is written
        if CTAS == 1:
            res.slice(0, 32 * NW).store(gl.zeros([32 * NW], gl.int32, CL))
        else:  # (no slice of a cluster's buffer compiles)
            res.store(gl.zeros([WORDS], gl.int32, gl.BlockedLayout([4], [32], [NW], [0], CL.cga_layout)))


def usable(device) -> bool:
    """Whether the Gluon select can run on `device`: a CUDA device of compute capability 9.x and Gluon (never under
    the interpreter, which runs no inline PTX). DSATTN_TOPK_GLUON=0 (read at each call) switches it off (A/B runs)."""
    if os.environ.get("DSATTN_TOPK_GLUON", "1").strip() == "0":
        return False
    if not HAVE_GLUON or device.type != "cuda" or interpreting():
        return False
    return _sm90(device.index)


@functools.lru_cache(maxsize=None)
def _sm90(index) -> bool:
    import torch
    return torch.cuda.get_device_capability(index)[0] == 9


def launch_select_rows(logits, lengths, k: int, out, cap: int, num_warps: int | None = None, bits: int | None = None,
                       ctas: int = 1, stop: int = 0, launch=None) -> None:
    """Rows of at most `cap` columns (a power of two >= 2k, >= MIN_CAP), one program a row: one CTA over the capacity,
    or a cluster of `ctas` CTAs (2, 4 or 8), each over its own stretch of the row (cluster_columns); num_warps warps a
    CTA (None: default_warps of its columns), `bits` a histogram pass (None: default_bits, 5..10). stop (timing only):
    select_rows_kernel's STOP. launch: a stand-in for kernel[grid] (the compile check); else the cached launcher
    (ops._fastlaunch)."""
    t, w = logits.shape
    if ctas not in (1, 2, 4, 8):
        raise ValueError(f"ctas must be 1, 2, 4 or 8, got {ctas!r}")
    span, cols = cluster_columns(w, cap, ctas)
    num_warps = num_warps or default_warps(cols)
    r = cols // (32 * num_warps)
    if cap & (cap - 1) or r < 1 or w > cap or span * ctas < w or cols > MAX_CTA_COLS:
        raise ValueError(f"cap must be a power of two >= the width, and a CTA's columns at least 32 x num_warps and at "
                         f"most {MAX_CTA_COLS}: got cap {cap}, width {w}, {cols} columns a CTA ({ctas} CTAs), "
                         f"{num_warps} warps")
    if k < 1 or 2 * k > cap or k + cols >= 1 << 15:
        # the output row's shared-memory copy holds cap / 2 words (one CTA); over a cluster a CTA's packed emit count
        # (gt | eq << 16) reaches k + its columns, which must stay below 2^15 (topk() takes k <= 8192)
        raise ValueError(f"k must be in [1, cap / 2] and k + a CTA's columns below 32768: got k {k}, cap {cap}, "
                         f"{cols} columns a CTA")
    bits = bits or default_bits(cols, num_warps)
    if not 5 <= bits <= 10:
        raise ValueError(f"bits must be in [5, 10], got {bits}")
    args = (logits, logits.stride(0), lengths, w, out, out.stride(0), k, span)
    kw = dict(R=r, DB=bits, MAXP=passes(bits), WORDS=smem_words(cols, num_warps, bits, ctas), STOP=stop, CTAS=ctas,
              num_warps=num_warps, **({"num_ctas": ctas} if ctas > 1 else {}))
    if launch is not None:
        launch(select_rows_kernel)[(t,)](*args, **kw)
    else:
        _fast_launch(select_rows_kernel, (t,), *args, **kw)
