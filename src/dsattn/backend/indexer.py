"""The indexer driver: this step's indexer keys into the cache, then the top-k positions of every query
row into the step's index buffer, through workspace views only.

- Decode rows (first in the batch) score the paged cache directly (``indexer_logits_paged``).
- Prefill rows gather their requests' keys from the paged cache into a flat array and score it
  (``indexer_logits``, DeepGEMM's convention), so rows of one request share the gathered keys.
- Both run in row chunks planned by ``metadata.plan_indexer_chunks``: everything one chunk
  materializes (logits, top-k scratch, gathered keys, pooled top-k) fits ``indexer_cap_bytes``.
- K-pool layers (kpool P > 1) pool this step's keys into the pooled cache (``kpool_update``), score
  pools, keep the best K / P (``topk``) and expand them to tokens plus the incomplete tail
  (``kpool_expand``): rows of width K + P - 1.
- With a tensor-parallel group and a step whose ``prepare`` passed the SPEC 8 gate (``tp_boundaries``),
  the prefill rows go through ``distributed.sharded_prefill_topk`` with that plan; otherwise they run
  here, replicated.

Shared layers run no indexer: the backend keeps the previous full layer's indices.
"""
from __future__ import annotations

import dataclasses

import torch

from .._checks import check_tensor
from ..config import DSAGeometry
from ..distributed import group_size, sharded_prefill_topk, staging_spec
from ..formats import FP8, INDEX_DIM, INDEX_ROW_BYTES
from ..memory.workspace import Workspace, specs_nbytes
from ..ops.indexer import indexer_logits, indexer_logits_paged, kpool_expand, kpool_update
from ..ops.cache import write_indexer_cache
from ..ops.gather import gather_indexer_keys
from ..ops.topk import MAX_TOPK, topk, topk_scratch_spec
from .metadata import BatchLimits, Chunk

PHASE = "indexer"
CHUNK = "indexer.chunk"
TP_STAGING = "indexer.tp_staging"


# fp32 logits columns per row of a chunk's buffer are a multiple of this: with an unaligned row stride the
# top-k loses its 16-byte loads (2048 x 262144 rows on the H200: 2.99 ms at stride 262144, 4.43 ms at 262143;
# align_probe of bench/results/tp_tp1_h200.json)
LOGITS_ALIGN = 16


def logits_stride(width: int) -> int:
    """Row stride (fp32 elements) of a chunk's logits buffer for `width` columns."""
    return -(-width // LOGITS_ALIGN) * LOGITS_ALIGN


@dataclasses.dataclass
class IndexerInputs:
    """One full layer's indexer inputs for the step's T tokens.

    q        [T, Hi, 128] fp8 e4m3 or bf16 indexer queries
    weights  [T, Hi] fp32 head weights, every scale folded in (SPEC 4)
    k        [T, 128] bf16 or fp32: this step's indexer keys (written to the cache by the step). q and k are
             used as given, rotated by nothing: DeepSeek's reference indexer Hadamard-rotates both before its fp8
             quantization (`rotate_activation`), so a caller that wants those numerics rotates first
             (transformers' indexers skip it, so the tests against them pass unrotated inputs)
    cache    uint8 indexer key cache [num_blocks, block_size, 132]; k-pool: the pooled cache
             [num_blocks, block_size // P, 132]
    gate, ape, tail_state   k-pool only: gate [T, 128] fp32, ape [P, 128] fp32, tail_state fp32
             [S, P - 1, 256] (see ``ops.indexer.kpool_update``)
    """

    q: torch.Tensor
    weights: torch.Tensor
    k: torch.Tensor
    cache: torch.Tensor
    gate: torch.Tensor | None = None
    ape: torch.Tensor | None = None
    tail_state: torch.Tensor | None = None


class IndexerDriver:
    """Runs a full layer's indexer for a prepared step (see the module docstring)."""

    # k-pool layers: a step of one token a request updates the pools in one launch (kpool_update's
    # single_token_requests); False: two launches, as before session 45 (A/B runs).
    one_launch_kpool: bool = True

    def __init__(self, geometry: DSAGeometry, limits: BatchLimits, workspace: Workspace, *, tp_group=None,
                 tp_min_rows_per_rank: int | None = None):
        self.geometry, self.limits, self.workspace = geometry, limits, workspace
        self.kpool = geometry.kpool
        self.k = geometry.index_topk // self.kpool   # what one top-k call selects: tokens, or pools
        self.width = geometry.topk_width
        self.tp_group, self.tp_min_rows_per_rank = tp_group, tp_min_rows_per_rank
        if geometry.index_head_dim != INDEX_DIM:
            raise ValueError(f"geometry.index_head_dim must be {INDEX_DIM}, got {geometry.index_head_dim}")
        if self.k > MAX_TOPK:
            raise ValueError(f"geometry.index_topk / kpool must be <= {MAX_TOPK} (the top-k's largest k), got "
                             f"{geometry.index_topk} / {self.kpool}")
        cap = limits.indexer_cap_bytes
        if self.chunk_bytes(1, limits.max_keys, limits.max_keys) > cap:
            raise ValueError(f"indexer_cap_bytes must hold one chunk of one row of the longest request "
                             f"({self.chunk_bytes(1, limits.max_keys, limits.max_keys)} bytes), got {cap}")
        most_keys = min(limits.max_num_reqs, limits.max_num_tokens) * limits.max_keys
        workspace.reserve_bytes(CHUNK, min(cap, self.chunk_bytes(limits.max_num_tokens, limits.max_keys, most_keys)),
                                phase=PHASE)
        if tp_group is not None:
            self._staging = {"staging": staging_spec(limits.max_num_tokens, self.width, group_size(tp_group))}
            workspace.reserve(TP_STAGING, self._staging, phase="tp_gather")

    # -- workspace ------------------------------------------------------------------------------

    def chunk_specs(self, rows: int, width: int, num_keys: int) -> dict:
        """What one chunk of `rows` query rows, `width` logits columns and `num_keys` gathered keys holds.
        The logits rows are `logits_stride(width)` apart; the kernels see the [rows, width] view."""
        specs = {"logits": ((rows, logits_stride(width)), torch.float32)}
        for i, spec in enumerate(topk_scratch_spec(rows, width, self.k)):
            specs[f"topk_scratch{i}"] = spec
        specs["keys"] = ((num_keys, INDEX_DIM), FP8)
        specs["key_scales"] = ((num_keys,), torch.float32)
        if self.kpool > 1:
            specs["pool_topk"] = ((rows, self.k), torch.int32)
        return specs

    def chunk_bytes(self, rows: int, width: int, num_keys: int) -> int:
        return specs_nbytes(self.chunk_specs(rows, width, num_keys))

    # -- checks ---------------------------------------------------------------------------------

    def check_inputs(self, inputs: IndexerInputs, step, device) -> None:
        """ValueError naming the argument, before anything is written."""
        if not isinstance(inputs, IndexerInputs):
            raise ValueError(f"indexer must be IndexerInputs for a full layer, got {type(inputs).__name__}")
        t, hi = step.host.num_tokens, self.geometry.index_n_heads
        check_tensor("indexer.q", inputs.q, dtype=(FP8, torch.bfloat16), shape=(t, hi, INDEX_DIM), device=device)
        check_tensor("indexer.weights", inputs.weights, dtype=torch.float32, shape=(t, hi), device=device,
                     last_dim_contiguous=False)
        check_tensor("indexer.k", inputs.k, dtype=(torch.bfloat16, torch.float32), shape=(t, INDEX_DIM),
                     device=device)
        bs = self.limits.block_size // self.kpool
        cache = inputs.cache
        if isinstance(cache, torch.Tensor) and cache.dim() == 4 and cache.shape[2] == 1:
            cache = cache.squeeze(2)
        check_tensor("indexer.cache", cache, dtype=torch.uint8, shape=(None, bs, INDEX_ROW_BYTES), device=device)
        if not cache.is_contiguous():
            raise ValueError("indexer.cache must be contiguous")
        if step.host.max_block_id >= cache.shape[0]:
            raise ValueError(f"indexer.cache has {cache.shape[0]} blocks but the block tables use block "
                             f"{step.host.max_block_id}")
        if self.kpool > 1:
            p = self.kpool
            check_tensor("indexer.gate", inputs.gate, dtype=torch.float32, shape=(t, INDEX_DIM), device=device)
            check_tensor("indexer.ape", inputs.ape, dtype=torch.float32, shape=(p, INDEX_DIM), device=device)
            check_tensor("indexer.tail_state", inputs.tail_state, dtype=torch.float32,
                         shape=(None, p - 1, 2 * INDEX_DIM), device=device)
            for name in ("ape", "tail_state"):  # kpool_update's own checks come after the KV cache write
                if not getattr(inputs, name).is_contiguous():
                    raise ValueError(f"indexer.{name} must be contiguous")
            top = int(step.host.state_slot.max())
            if top >= inputs.tail_state.shape[0]:
                raise ValueError(f"indexer.tail_state has {inputs.tail_state.shape[0]} rows but a request uses "
                                 f"state slot {top}")

    # -- the run --------------------------------------------------------------------------------

    def run(self, step, inputs: IndexerInputs, indices: torch.Tensor, cache_written: bool = False) -> None:
        """Top-k positions of every row of the step into indices [T, width] int32 (-1 unused). cache_written: the
        step's keys are in the indexer cache already (the caller wrote them with its KV rows; kpool 1 only)."""
        cache = inputs.cache.squeeze(2) if inputs.cache.dim() == 4 else inputs.cache
        if self.kpool > 1:
            # a step of one token a request (num_scheduled >= 1 each) updates the pools in one launch
            kpool_update(inputs.k, inputs.gate, inputs.ape, step.positions, step.token_req, step.block_table, cache,
                         inputs.tail_state, step.state_slot,
                         single_token_requests=step.host.num_tokens == step.host.num_reqs and self.one_launch_kpool)
        elif not cache_written:
            write_indexer_cache(inputs.k, cache, step.slot_mapping)
        host = step.host
        for c in host.decode_chunks:
            self._decode_chunk(step, inputs, cache, c, indices[c.row_start:c.row_end])
        rows = host.num_prefill_tokens
        if rows == 0:
            return
        d = host.num_decode_tokens
        out = indices[d:d + rows]

        def compute_rows(a: int, b: int, out_rows: torch.Tensor) -> None:
            for i, c in enumerate(host.prefill_chunks):
                lo, hi = max(c.row_start, d + a), min(c.row_end, d + b)
                if lo < hi:
                    self._prefill_rows(step, inputs, cache, i, lo, hi, out_rows[lo - d - a:hi - d - a])

        if step.tp_boundaries is None:  # no TP group, or prepare() found the SPEC 8 gate closed
            compute_rows(0, rows, out)
            return
        staging = self.workspace.views(TP_STAGING, self._staging)["staging"]
        sharded_prefill_topk(compute_rows, None, out, self.tp_group, self.tp_min_rows_per_rank, staging,
                             boundaries=step.tp_boundaries)

    def _select(self, step, bufs, logits, lo: int, hi: int, out_rows: torch.Tensor) -> None:
        """Top-k of the chunk's logits into out_rows (through the pooled top-k and expansion for k-pool)."""
        dest = bufs["pool_topk"] if self.kpool > 1 else out_rows
        if logits.shape[1] == 0:  # no row of the chunk sees a key yet (k-pool: no complete pool)
            dest.fill_(-1)
        else:
            topk(logits, step.row_keys[lo:hi], self.k, out=dest, scratch=bufs.get("topk_scratch0"))
        if self.kpool > 1:
            kpool_expand(dest, step.positions[lo:hi], self.kpool, out=out_rows)

    def _decode_chunk(self, step, inputs, cache, c: Chunk, out_rows) -> None:
        bufs = self.workspace.views(CHUNK, self.chunk_specs(c.rows, c.width, 0))
        lo, hi = c.row_start, c.row_end
        logits = bufs["logits"][:, :c.width]
        if c.width:
            indexer_logits_paged(inputs.q[lo:hi], inputs.weights[lo:hi], cache, step.block_table,
                                 step.token_req[lo:hi], step.row_keys[lo:hi], out=logits)
        self._select(step, bufs, logits, lo, hi, out_rows)

    def _prefill_rows(self, step, inputs, cache, chunk_index: int, lo: int, hi: int, out_rows) -> None:
        """Rows [lo, hi) of prefill chunk `chunk_index`: gather the keys of their pieces, score, select."""
        c = step.host.prefill_chunks[chunk_index]
        first = step.key_piece_start[chunk_index]
        used = [i for i, (a, b) in enumerate(step.key_piece_rows[chunk_index]) if a < hi and b > lo]
        p0, p1 = first + used[0], first + used[-1] + 1
        bufs = self.workspace.views(CHUNK, self.chunk_specs(hi - lo, c.width, c.num_keys))
        logits = bufs["logits"][:, :c.width]
        if c.width:
            max_len = max(c.pieces[i].num_keys for i in used)
            gather_indexer_keys(cache, step.block_table, step.key_pieces[0, p0:p1], step.key_pieces[1, p0:p1],
                                step.key_pieces[2, p0:p1], max_len, bufs["keys"], bufs["key_scales"])
            indexer_logits(inputs.q[lo:hi], inputs.weights[lo:hi], bufs["keys"], bufs["key_scales"],
                           step.ks[lo:hi], step.ke[lo:hi], out=logits)
        self._select(step, bufs, logits, lo, hi, out_rows)
