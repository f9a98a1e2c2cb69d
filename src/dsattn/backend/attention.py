"""``DSAAttention``: the serving backend of one model's DSA attention layers on one device (SPEC 6, 7).

    attn = DSAAttention(preset("glm-5"), tp=8, kv_layout="fp8_ds_mla", block_size=64, device="cuda",
                        max_num_tokens=8192, max_num_reqs=256, max_model_len=131072)
    ...one profile step with the largest batch, then: attn.lock()
    step = attn.prepare(requests)                       # once per step, shared by every layer
    for layer in range(num_layers):
        out = attn.forward(step, q, latent, kv_caches[layer], IndexerInputs(...) or None, layer=layer, out=out)

A step writes its tokens' latent rows into the layer's KV cache, runs the indexer (or, on a shared
layer, reuses the previous full layer's indices), maps the selected positions to cache slots, and runs
sparse MLA on the path SPEC 7 gives the cache layout and heads per rank (``policy.choose_path``):

    bf16_prefill   every token through sparse_mla_prefill over the flat cache view (the decode rows in a
                   call of their own, one token a program: policy.bf16_decode_variant); where the grouped kernel
                   runs, the prefill rows a call per gather chunk, each numbering its requests' positions densely
                   (keys), so that the union lists are built over the keys, not over the whole cache's slots
                   (keyed_prefill_keys)
    fp8_mixed      every token through sparse_mla_decode (decodes and prefill chunks in one call)
    fp8_gathered   decodes through sparse_mla_decode; each chunk of prefill requests' context is
                   gathered and dequantized into a bf16 workspace buffer and run through
                   sparse_mla_prefill, its indices pointing into that buffer

Head counts below 64 run padded or native inside the kernels (variant ``pad64`` masks the missing
heads), so no step copies q or out into padded buffers. Every intermediate is a view of the workspace,
reserved at construction for the largest batch the limits allow and for the chosen path only; a step
allocates nothing on the device when ``out`` is given.

Micro-batches (an engine's two-batch overlap: the layers of two batches interleaved, A's layer i, B's layer i,
A's layer i + 1, ...): with ``micro_batches=n`` each of n slots has its own step-long regions (the device metadata
and the indices a shared layer reuses), so ``prepare(requests, micro_batch=i)`` leaves the other slots' steps valid.
The per-call scratch (indexer chunk, attention phase) is one region for all slots: their forwards must run one
after another in stream order (one stream, as the overlap runs its compute), not at once on two streams; slots that
do run at once take one DSAAttention each, with a workspace each (SPEC 6's buffer a slot). At 8192 tokens, 256
requests and 131072 tokens of context (glm-5 TP8, fp8_ds_mla) two slots take 644.6 MiB, one 578.3, two backends
1156.6 (bench/micro_batch_workspace.py: the reservations, exact).

    attn = DSAAttention(..., micro_batches=2)
    a, b = attn.prepare(batch_a, micro_batch=0), attn.prepare(batch_b, micro_batch=1)
    for layer in range(num_layers):
        attn.forward(a, ...); attn.forward(b, ...)     # each with its own q, latent, out

CUDA graphs across steps (an engine captures its decode batches once a batch size and replays them every step):
``prepare(requests, graph=True)`` lays a decode-only step out by its bucket (metadata.graph_bucket: the power of
two at or above its longest request's tokens, or finer with graph_bucket_steps, at most max_model_len): the block
table gets ceil(bucket / block_size) columns and the indexer's logits bucket // kpool columns (-inf past each row's
keys; the selection is the same), so every host-side choice of the forward (shapes, chunk plans, top-k and split-K
paths, kernel arguments) depends on ``step.graph_key`` alone: (micro_batch, tokens, requests, bucket, the indexer's
row chunks: one chunk unless the indexer cap splits the rows). The metadata lands at the same device addresses. A
graph captured over a step's forwards replays for any later step with the same key once that step is prepared (its
prepare copies the new metadata in) and its inputs are copied into the captured q, latent, indexer and out tensors.
The engine pads its batch to the graph's request count with decode requests whose block table (and k-pool state
slot) point at memory kept for padding, since they write their token's rows as any request does. What the padding
to the bucket costs on the GPU (bench/gpu_s50.sh c, H200): 2.8-4.5% of a decode layer's span at 128 requests from
4K contexts with power-of-two buckets (glm-5 TP8 140.0 -> 146.3 us), -2.0 to +2.5 us in the other cases measured (1-128
requests from 4K and 8K contexts, one replay each), at most +1.4 us with graph_bucket_steps=4.

    step = attn.prepare(batch, graph=True)
    if step.graph_key not in graphs: graphs[step.graph_key] = capture(lambda: layers(step))
    else: graphs[step.graph_key].replay()
"""
from __future__ import annotations

import dataclasses
import itertools
import os

import numpy as np
import torch

from .._checks import check_tensor
from ..config import DSAGeometry
from ..distributed import group_size, plan_row_shards, should_shard
from ..formats import LATENT_DIM, ROPE_DIM, KVLayout, as_layout, infer_layout, kv_cache_flat
from ..memory.workspace import Workspace, specs_nbytes
from ..ops._triton import sm_count
from ..ops.cache import write_kv_and_indexer_cache, write_kv_cache
from ..ops.gather import gather_latent, gather_slots, positions_to_offsets, positions_to_slots
from ..ops.sparse_mla import (decode_scratch_spec, prefill_row_spec, prefill_scratch_spec, prefill_split_spec,
                               sparse_mla_decode, sparse_mla_prefill)
from ..ops.sparse_mla.dispatch import DEFAULT_SM_COUNT, prefill_split_tokens_max
from . import policy
from .indexer import IndexerDriver, IndexerInputs, logits_stride
from .metadata import BatchLimits, BatchMetadata, Request, RequestBatch, build_metadata

METADATA = "metadata"
INDICES = "indices"
LSE = "attention.lse"
DECODE_SCRATCH = "attention.decode_scratch"
PREFILL_SCRATCH = "attention.prefill_scratch"
PREFILL_SPLIT = "attention.prefill_split"
GATHERED = "attention.gathered_context"
KEY_SLOTS = "attention.key_slots"
ROW_SCRATCH = "attention.row_scratch"
ATTENTION = "attention"

_ALIGN_ELEMS = 64  # int32 metadata arrays start 256-byte aligned
_step_ids = itertools.count(1)


def step_region(consumer: str, micro_batch: int) -> str:
    """The workspace consumer of a step-long region (METADATA, INDICES) for micro-batch slot `micro_batch`: the name
    itself for slot 0 (one slot: the names of before), `name.i` for slot i."""
    return consumer if micro_batch == 0 else f"{consumer}.{micro_batch}"


@dataclasses.dataclass
class StepMetadata:
    """A prepared step: the host metadata and its device copy (views of the workspace, int32).

    Device arrays: positions, token_req, slot_mapping, row_keys, ks, ke, gather_base [T];
    block_table [B, M]; state_slot [B]; key_pieces [3, pieces] (request, keys, offset) of the prefill
    indexer chunks, chunk i's at key_piece_start[i]; gather_pieces [3, pieces] of the gathered path.
    graph_key (prepare's graph=True; None else): steps with equal keys launch the same kernels on the same memory
    (the module docstring, "CUDA graphs").
    """

    host: BatchMetadata
    step_id: int
    positions: torch.Tensor
    token_req: torch.Tensor
    slot_mapping: torch.Tensor
    row_keys: torch.Tensor
    ks: torch.Tensor
    ke: torch.Tensor
    gather_base: torch.Tensor
    block_table: torch.Tensor
    state_slot: torch.Tensor
    key_pieces: torch.Tensor
    gather_pieces: torch.Tensor
    key_piece_start: list[int]
    key_piece_rows: list[list[tuple[int, int]]]
    gather_piece_start: list[int]
    tp_boundaries: list[int] | None = None
    micro_batch: int = 0
    graph_key: tuple | None = None


class DSAAttention:
    """DSA attention for one model geometry on one device (see the module docstring).

    geometry           the model (``config.preset`` / ``config.from_hf_config``)
    tp                 tensor-parallel size: heads per rank = geometry.num_heads / tp
    kv_layout          'bf16', 'fp8_ds_mla' or 'fp8_ds_mla_nope' (the latent cache of every layer)
    block_size         tokens per cache block (a multiple of kpool)
    max_num_tokens, max_num_reqs, max_model_len   the largest step: reserved for, and enforced
    decode_threshold   a request with at most this many scheduled tokens is a decode (1 + speculative)
    indexer_cap_bytes  workspace bytes one indexer chunk may take (logits, top-k scratch, keys)
    gather_cap_tokens  fp8_gathered: context rows gathered at once (default max_model_len)
    calibration        a calibration table (dict, or path (str / os.PathLike) to its JSON) for head dispatch;
                       None: SPEC 7
    workspace          a Workspace to share (one per device), else a new one
    tp_group, tp_min_rows_per_rank   tensor-parallel indexer prefill (SPEC 8); None: replicated
    micro_batches      steps that may be prepared and in use at once, one a slot (prepare's micro_batch; the
                       module docstring); each slot adds its metadata and indices regions to the workspace
    graph_bucket_steps buckets a doubling of the context for graph steps (prepare's graph; metadata.graph_bucket):
                       1 (powers of two), 2, 4, 8 or 16
    """

    # A full layer of a kpool-1 model writes its latent rows and indexer keys in one launch
    # (ops.cache.write_kv_and_indexer_cache); False: one launch each, as before session 45 (A/B runs).
    fused_cache_writes: bool = True
    # bf16 path: decode rows run as their own prefill call with policy.bf16_decode_variant (no grouping across
    # requests); False: every row in one call with the calibrated variant, as before session 45 (A/B runs).
    bf16_decodes_apart: bool = True
    # bf16 path: the kernel of the decode rows' call (when bf16_decodes_apart): 'prefill' (sparse_mla_prefill over the
    # flat view with policy.bf16_decode_variant, since session 45), or 'decode' (sparse_mla_decode over the paged cache
    # with the variant policy.choose_variant gives a bf16 cache's decode rows), 'decode:native' / 'decode:pad64' (that
    # variant). Read at construction (a decode kernel's split-K scratch is reserved then). For A/B runs
    # (bench/bf16_decode_rows.py times the kernels on these rows; not yet on the GPU).
    bf16_decode_kernel: str = "prefill"
    # bf16 path: the prefill rows' grouped call builds its union lists over keys (the call's positions numbered
    # densely) with sparse_mla_prefill's key_slots; False: over the cache's slots, as before session 46 (A/B runs).
    bf16_keyed_prefill: bool = True
    # bf16 path: a keyed prefill call (keyed_prefill_keys) passes sparse_mla_prefill a row_scratch of its keys' rows
    # (prefill_row_spec(_key_cap, D_qk), reserved at construction in the attention phase: _key_cap x (2 D_qk + 4)
    # bytes), so that where dispatch.prefill_converts_rows agrees the rows are converted once (kernels.f16_rows) and
    # the grouped kernel runs over them (gluon_prefill.rows_config: gluon_pair). Read at construction. H100, one layer's
    # forward, on against off (session 69, bench/s69_serve_rows.py, bench/results/s69/s69_call3_h100.log): glm-5 TP8
    # prefill / mixed 1.005x / 1.046x (bit-equal), deepseek-v3.2 TP4 (32 heads) 1.087x / 1.108x. The workspace the
    # same size there (576.3 / 544.7 MiB), and at 8192 tokens, 256 requests, 131072 of context (glm-5 TP8 / TP4,
    # deepseek-v3.2 TP4: 578.3 MiB with or without its 144.5 MiB; a CPU count of the reservations): the phase's other
    # regions are larger.
    bf16_row_scratch: bool = True
    # fp8_gathered path: each chunk's gathered prefill call passes sparse_mla_prefill a row_scratch of the gathered
    # context's size (prefill_row_spec(gather_tokens, D_qk), reserved at construction in the attention phase), so
    # that where dispatch.prefill_converts_rows agrees the context rows are converted once and the kernel runs over
    # them (config pre16; gluon_pair at 32 heads). Read at construction. H100, one layer's forward, on against off
    # (session 71, bench/s69_serve_rows.py --layout fp8_ds_mla, bench/results/s71/s71_gathered_rows_h100.log),
    # prefill / mixed: deepseek-v3.2 TP4 (32 heads) 1.083x / 1.103x, TP2 (64) 1.099x / 1.098x, TP1 (128) 1.139x /
    # 1.132x; outputs bit-equal at 64 / 128 heads (at 32 the pair sums in another order); the workspace the same size
    # (576.3 / 544.7 MiB: the phase's other regions are larger).
    gathered_row_scratch: bool = True

    def __init__(self, geometry: DSAGeometry, *, kv_layout: KVLayout | str, block_size: int, max_num_tokens: int,
                 max_num_reqs: int, max_model_len: int, tp: int = 1, device: torch.device | str = "cpu",
                 decode_threshold: int = 1, indexer_cap_bytes: int = 512 << 20, gather_cap_tokens: int | None = None,
                 calibration: dict | str | os.PathLike | None = None, workspace: Workspace | None = None, tp_group=None,
                 tp_min_rows_per_rank: int | None = None, micro_batches: int = 1, graph_bucket_steps: int = 1):
        self.geometry = geometry
        if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) or micro_batches < 1:
            raise ValueError(f"micro_batches must be an int >= 1, got {micro_batches!r}")
        self.micro_batches = micro_batches
        if geometry.kv_lora_rank != LATENT_DIM or geometry.qk_rope_head_dim not in (0, ROPE_DIM):
            # the kernels run D_v = 512 and D_qk 512 or 576 (SPEC 3): reject here, not after a cache write
            raise ValueError(f"geometry must have kv_lora_rank {LATENT_DIM} and qk_rope_head_dim 0 or {ROPE_DIM}, got "
                             f"{geometry.kv_lora_rank} and {geometry.qk_rope_head_dim}")
        self.heads = geometry.heads_per_rank(tp)
        self.kv_layout = as_layout(kv_layout, "kv_layout")
        if self.kv_layout.max_d_qk() is not None and geometry.d_qk > self.kv_layout.max_d_qk():
            raise ValueError(f"kv_layout {self.kv_layout.value} cannot hold D_qk {geometry.d_qk}")
        self.device = torch.device(device)
        self.path = policy.choose_path(self.kv_layout, self.heads)
        self.limits = BatchLimits(max_num_tokens=max_num_tokens, max_num_reqs=max_num_reqs,
                                  max_model_len=max_model_len, block_size=block_size,
                                  decode_threshold=decode_threshold, kpool=geometry.kpool,
                                  indexer_cap_bytes=indexer_cap_bytes, gather_cap_tokens=gather_cap_tokens,
                                  graph_bucket_steps=graph_bucket_steps)
        self.table = (policy.load_table(calibration) if isinstance(calibration, (str, os.PathLike))
                      else calibration)
        self.sm_count = sm_count(self.device, DEFAULT_SM_COUNT)
        self.sm_scale = geometry.softmax_scale
        self.width = geometry.topk_width
        self.workspace = workspace if workspace is not None else Workspace(self.device)
        if self.workspace.device != self.device:
            raise ValueError(f"workspace must be on {self.device}, got {self.workspace.device}")
        self.tp_group, self.tp_min_rows_per_rank = tp_group, tp_min_rows_per_rank
        self.indexer = IndexerDriver(geometry, self.limits, self.workspace, tp_group=tp_group,
                                     tp_min_rows_per_rank=tp_min_rows_per_rank)
        self._key_cap = self._keys_capacity()
        self._rows_on = bool(self.bf16_row_scratch and self._key_cap)  # bf16_row_scratch, read here
        self._gathered_rows_on = bool(self.gathered_row_scratch and self.path is policy.Path.FP8_GATHERED)
        self._bf16_decode = self._bf16_decode_call()
        self._reserve()
        self.workspace.allocate()
        # two pinned staging buffers used in turn, so that prepare() of step N + 1 waits only for the copy of
        # step N - 1, not for step N's (still queued behind the GPU's work when the host runs ahead)
        self._host_meta = [torch.empty(self._meta_capacity(), dtype=torch.int32, pin_memory=self.device.type == "cuda")
                           for _ in range(2)]
        self._host_np = [h.numpy() for h in self._host_meta]  # the same memory, for numpy's cheaper small copies
        self._upload_done: list[torch.cuda.Event | None] = [None, None]
        self._uploads = 0

    # -- workspace --------------------------------------------------------------------------------

    def _meta_capacity(self) -> int:
        lim = self.limits
        t, b = lim.max_num_tokens, lim.max_num_reqs
        # 7 per-token arrays, the block table, state slots, key pieces (at most one per prefill request
        # and chunk boundary), gather pieces (one per prefill request), each aligned
        return 7 * t + b * lim.max_blocks_per_req + b + 3 * (b + t) + 3 * b + 11 * _ALIGN_ELEMS

    def _keys_capacity(self) -> int:
        """Keys a keyed bf16 prefill call may hold (0: never keyed): on the bf16 path where the grouped kernel's
        shared-memory union lists run (grouping_smem.usable) at 2-32 heads, the dense reach of their G
        (grouping.dense_reach), at most gather_tokens."""
        from ..ops.sparse_mla import grouping, grouping_smem
        g = grouping.group_shape(self.heads)[1]
        if self.path is not policy.Path.BF16_PREFILL or g == 1 or not grouping_smem.usable(self.device):
            return 0
        return min(self.limits.gather_tokens, grouping.dense_reach(g, self.width, self.device))

    def keyed_prefill_keys(self, step: StepMetadata) -> list[int]:
        """Per chunk of host.gather_chunks (the step's prefill requests, whose pieces number each request's positions
        after the previous requests' of its chunk), its keys when that chunk's prefill call is keyed, else 0; [] when
        no call of the step is (not the bf16 path, bf16_keyed_prefill off, _key_cap 0, or decode rows sharing the
        prefill rows' call). Keyed: at most _key_cap keys and the call's variant 'native' (grouped). A keyed call's
        rows hold keys (gather_base + position) and it passes key_slots (ops.gather.gather_slots of its pieces), so
        its union lists are built over at most _key_cap keys, within the dense path's reach, where the flat view's
        slots (an engine's whole cache) are often past it. A function of the step alone, so a shared layer decides
        as its full layer did."""
        host = step.host
        if not (self.bf16_keyed_prefill and self._key_cap) or (host.num_decode_tokens and not self.bf16_decodes_apart):
            return []
        keys = [c.num_keys if c.num_keys <= self._key_cap and
                self._prefill_split(c.row_end - c.row_start, False, c.num_keys)[0] == "native" else 0
                for c in host.gather_chunks]
        return keys if any(keys) else []

    def _bf16_decode_call(self) -> tuple[str, str | None]:
        """(kernel, variant or None for the policy's) of the bf16 path's decode rows, from bf16_decode_kernel."""
        k = self.bf16_decode_kernel
        calls = {"prefill": ("prefill", None), "decode": ("decode", None), "decode:native": ("decode", "native"),
                 "decode:pad64": ("decode", "pad64")}
        if k not in calls:
            raise ValueError(f"bf16_decode_kernel must be one of {list(calls)}, got {k!r}")
        kernel, variant = calls[k]
        if variant is not None and variant not in policy.variants("decode", self.heads, KVLayout.BF16):
            variant = None  # one variant at >= 64 heads: the policy's
        return kernel, variant

    def _bf16_decode_kernel_runs(self) -> bool:
        """Whether a bf16-path step runs its decode rows through sparse_mla_decode (bf16_decode_kernel)."""
        return self.path is policy.Path.BF16_PREFILL and self.bf16_decodes_apart and self._bf16_decode[0] == "decode"

    def _decode_tokens_max(self) -> int:
        lim = self.limits
        if self.path is policy.Path.FP8_MIXED:
            return lim.max_num_tokens
        return min(lim.max_num_tokens, lim.max_num_reqs * lim.decode_threshold)

    def _prefill_split(self, tokens: int, decodes: bool = False, num_slots: int | None = None) -> tuple[str, list]:
        """(variant, prefill_split_spec) of a prefill call of `tokens` tokens (decodes: the bf16 path's decode rows,
        policy.bf16_decode_variant; num_slots: rows of the call's flat source, for policy.prefill_variant_for_slots;
        None, as the workspace's reservation asks, leaves the table's variant, which with pad64 covers both)."""
        if decodes:
            variant = policy.bf16_decode_variant(self.heads)
        else:
            variant = policy.choose_variant("prefill", self.heads, tokens, self.table, self.sm_count)
            if num_slots is not None:
                variant = policy.prefill_variant_for_slots(variant, self.heads, num_slots, self.width,
                                                            self.device)
        return variant, prefill_split_spec(tokens, self.heads, self.width, variant, self.sm_count)

    def _decode_scratch(self, tokens: int) -> tuple[str, list]:
        variant = None
        if self.path is policy.Path.BF16_PREFILL:
            variant = self._bf16_decode[1]
        variant = variant or policy.choose_variant("decode", self.heads, tokens, self.table, self.sm_count,
                                                   self.kv_layout)
        return variant, decode_scratch_spec(tokens, self.heads, self.width, variant, self.kv_layout, self.sm_count)

    def _reserve(self) -> None:
        ws, lim, g = self.workspace, self.limits, self.geometry
        for i in range(self.micro_batches):
            ws.reserve(step_region(METADATA, i), {"meta": ((self._meta_capacity(),), torch.int32)})
            ws.reserve(step_region(INDICES, i), {"indices": ((lim.max_num_tokens, self.width), torch.int32)})
        ws.reserve(LSE, {"lse": ((lim.max_num_tokens, self.heads), torch.float32)}, phase=ATTENTION)
        if self.path is not policy.Path.BF16_PREFILL or self._bf16_decode[0] == "decode":
            # exact: the largest split-K scratch over every decode call size the limits allow
            most = max(specs_nbytes(dict(enumerate(self._decode_scratch(t)[1])))
                       for t in range(1, self._decode_tokens_max() + 1))
            ws.reserve_bytes(DECODE_SCRATCH, most, phase=ATTENTION)
        if self.path is not policy.Path.FP8_MIXED:
            # the grouped prefill kernel's union lists for the largest prefill call (every token of a step);
            # prefill_scratch_spec caps them at a 64 MiB chunk, so it grows no further with the tokens
            specs = prefill_scratch_spec(lim.max_num_tokens, self.heads, self.width)
            if specs:
                ws.reserve(PREFILL_SCRATCH, dict(enumerate(specs)), phase=ATTENTION)
            # exact: the largest split partials over every prefill call size that can split (short prefills; on
            # the bf16 path every step, its decode rows (pad64) and its prefill rows in calls of their own)
            top = prefill_split_tokens_max(self.sm_count)
            top = lim.max_num_tokens if top is None else min(top, lim.max_num_tokens)
            kinds = (False,) if self._bf16_decode[0] == "decode" else (False, True)
            most = max((specs_nbytes(dict(enumerate(self._prefill_split(t, decodes)[1])))
                        for t in range(1, top + 1) for decodes in kinds), default=0)
            if most:
                ws.reserve_bytes(PREFILL_SPLIT, most, phase=ATTENTION)
        if self.path is policy.Path.FP8_GATHERED:
            ws.reserve(GATHERED, {"context": ((lim.gather_tokens, g.d_qk), torch.bfloat16)}, phase=ATTENTION)
            if self._gathered_rows_on:
                rows, kmap = prefill_row_spec(lim.gather_tokens, g.d_qk)
                ws.reserve(ROW_SCRATCH, {"rows": rows, "kmap": kmap}, phase=ATTENTION)
        if self._key_cap:
            ws.reserve(KEY_SLOTS, {"slots": ((self._key_cap,), torch.int32)}, phase=ATTENTION)
            if self._rows_on:
                rows, kmap = prefill_row_spec(self._key_cap, g.d_qk)
                ws.reserve(ROW_SCRATCH, {"rows": rows, "kmap": kmap}, phase=ATTENTION)

    def lock(self) -> None:
        """Lock the workspace (after the profile step): a step that needs more raises WorkspaceLockedError."""
        self.workspace.lock()

    @property
    def workspace_bytes(self) -> int:
        """Bytes of the workspace: what a step adds to the device memory in use (the predicted peak)."""
        return self.workspace.nbytes

    # -- a step -----------------------------------------------------------------------------------

    def prepare(self, requests: list[Request] | RequestBatch, *, micro_batch: int = 0,
                graph: bool = False) -> StepMetadata:
        """Metadata of one step, copied to the device once; ValueError for a batch over the limits. requests: a
        list of Request, or the same as tensors (RequestBatch, an engine's form: no loop over the requests).
        micro_batch: the slot (0 .. micro_batches - 1) whose regions the step takes; the step of that slot prepared
        before is no longer valid, the other slots' are. graph: a decode-only step laid out for CUDA-graph replay
        across steps (step.graph_key; the module docstring, "CUDA graphs"); ValueError for prefill rows."""
        if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or not \
                0 <= micro_batch < self.micro_batches:
            raise ValueError(f"micro_batch must be an int in [0, {self.micro_batches}) (micro_batches="
                             f"{self.micro_batches}), got {micro_batch!r}")
        host = build_metadata(requests, self.limits,
                              gathered_prefill=self.path is policy.Path.FP8_GATHERED or self._key_cap > 0,
                              chunk_bytes=self.indexer.chunk_bytes, graph=graph)
        qs = host.query_start
        key_piece_start, key_piece_rows, key_pieces = [], [], []
        for c in host.prefill_chunks:
            key_piece_start.append(len(key_pieces))
            key_piece_rows.append([(max(c.row_start, qs[p.req]), min(c.row_end, qs[p.req + 1])) for p in c.pieces])
            key_pieces += [(p.req, p.num_keys, p.offset) for p in c.pieces]
        gather_piece_start, gather_pieces = [], []
        for c in host.gather_chunks:
            gather_piece_start.append(len(gather_pieces))
            gather_pieces += [(p.req, p.num_keys, p.offset) for p in c.pieces]
        arrays = {
            "positions": host.positions, "token_req": host.token_req, "slot_mapping": host.slot_mapping,
            "row_keys": host.row_keys, "ks": host.ks, "ke": host.ke, "gather_base": host.gather_base,
            "block_table": host.block_table, "state_slot": host.state_slot,
            "key_pieces": np.array(key_pieces, dtype=np.int32).reshape(-1, 3).T,
            "gather_pieces": np.array(gather_pieces, dtype=np.int32).reshape(-1, 3).T,
        }
        region = step_region(METADATA, micro_batch)
        dev = self._upload(arrays, region)
        step_id = next(_step_ids)  # unique over every backend, so a stamp names one step of one backend
        self.workspace.stamp(region, step_id)
        key = (micro_batch, host.num_tokens, host.num_reqs, host.graph_bucket,
               tuple((c.row_start, c.row_end, c.width) for c in host.decode_chunks)) if graph else None
        return StepMetadata(host=host, step_id=step_id, **dev, key_piece_start=key_piece_start,
                            key_piece_rows=key_piece_rows, gather_piece_start=gather_piece_start,
                            tp_boundaries=self._plan_tp(host), micro_batch=micro_batch, graph_key=key)

    def indices(self, step: StepMetadata) -> torch.Tensor:
        """The step's top-k indices [T, width] int32 as its last full layer left them (cache slots, or rows of the
        gathered context / keys where those paths ran): a view of its micro-batch's region."""
        return self.workspace.view(step_region(INDICES, step.micro_batch), (step.host.num_tokens, self.width),
                                   torch.int32)

    def _upload(self, arrays: dict[str, torch.Tensor | np.ndarray], region: str = METADATA) -> dict[str, torch.Tensor]:
        """One host-to-device copy of every array (int32, host) into the metadata region `region`, each starting
        _ALIGN_ELEMS-aligned; returns the device views, of the arrays' shapes."""
        turn = self._uploads % 2
        self._uploads += 1
        if self._upload_done[turn] is not None:
            self._upload_done[turn].synchronize()  # this buffer may still feed the copy of two steps ago
        host, off, sizes, shapes = self._host_np[turn], 0, [], []
        for a in arrays.values():
            a = a.numpy() if isinstance(a, torch.Tensor) else a
            n = a.size
            host[off:off + n] = a.reshape(-1)
            pad = -n % _ALIGN_ELEMS
            sizes += (n, pad)
            shapes.append(a.shape)
            off += n + pad
        dev = self.workspace.view(region, (self._meta_capacity(),), torch.int32)[:off]
        dev.copy_(self._host_meta[turn][:off], non_blocking=True)
        if self.device.type == "cuda":
            self._upload_done[turn] = torch.cuda.Event()
            self._upload_done[turn].record()
        views = dev.split_with_sizes(sizes)[::2]  # (one op for every view; the pads between them dropped)
        return {name: v if len(shape) == 1 else v.view(shape) for name, v, shape in zip(arrays, views, shapes)}

    def _plan_tp(self, host: BatchMetadata) -> list[int] | None:
        if self.tp_group is None or host.num_prefill_tokens == 0:
            return None
        if not should_shard(self.tp_group, host.num_prefill_tokens, self.tp_min_rows_per_rank, self.device):
            return None
        # row costs of the cost model (distributed/cost_model.py) over the driver's prefill chunk grid,
        # which does not move with the slices: keys scored, padded -inf columns, unaligned widths, per
        # row, and per chunk a slice touches
        from ..distributed.cost_model import default_cost_model
        d = host.num_decode_tokens
        # the logits row stride the driver runs at (indexer.logits_stride): 16-aligned, so no unaligned term
        chunks = [(c.row_start - d, c.row_end - d, logits_stride(c.width)) for c in host.prefill_chunks]
        model = default_cost_model(self.indexer.k)
        return plan_row_shards(model.row_costs(host.row_keys[d:], chunks), group_size(self.tp_group),
                               chunk_starts=[c[0] for c in chunks], launch_cost=model.launch_units)

    def _check(self, step, q, latent, kv_cache, indexer, layer, out) -> bool:
        """Every argument, before anything is written. Returns whether the layer is a shared one."""
        if not isinstance(step, StepMetadata) or step.host.limits is not self.limits:
            raise ValueError("step must be the StepMetadata this backend's prepare() returned")
        if self.workspace.stamp_of(step_region(METADATA, step.micro_batch)) != step.step_id:
            # its device metadata lives in one workspace region that a later prepare() overwrote: this backend's
            # (of the same micro-batch) or another's on the same workspace
            raise ValueError(f"step must come from the latest prepare() of its micro-batch ({step.micro_batch}) on "
                             f"this workspace (a later one, by this backend or another sharing the workspace, "
                             f"replaced its metadata)")
        shared = bool(self.geometry.indexer_types) and self.geometry.is_shared_layer(layer)
        t, h, d = step.host.num_tokens, self.heads, self.geometry.d_qk
        check_tensor("q", q, dtype=torch.bfloat16, shape=(t, h, d), device=self.device)
        if latent is not None:
            check_tensor("latent", latent, dtype=(torch.bfloat16, torch.float32), shape=(t, d), device=self.device)
        if not isinstance(kv_cache, torch.Tensor) or kv_cache.dim() not in (3, 4) or (
                kv_cache.dim() == 4 and kv_cache.shape[2] != 1):
            raise ValueError("kv_cache must be a tensor [num_blocks, block_size, row] or [num_blocks, block_size, 1, "
                             "row]")
        if infer_layout(kv_cache) is not self.kv_layout:
            raise ValueError(f"kv_cache must hold {self.kv_layout.value} rows, got {infer_layout(kv_cache).value}")
        check_tensor("kv_cache", kv_cache, device=self.device)
        if kv_cache.shape[1] != self.limits.block_size:
            raise ValueError(f"kv_cache must have block_size {self.limits.block_size}, got {kv_cache.shape[1]}")
        if self.kv_layout is KVLayout.BF16 and kv_cache.shape[-1] != d:
            raise ValueError(f"kv_cache must have rows of D_qk {d}, got {kv_cache.shape[-1]}")
        cache = kv_cache[:, :, 0] if kv_cache.dim() == 4 else kv_cache
        if cache.shape[0] > 1 and cache.shape[1] > 1 and cache.stride(0) != cache.shape[1] * cache.stride(1):
            # the kernels read the cache as one [slots, row] view; a padded cache would be copied
            raise ValueError("kv_cache must hold its blocks back to back (stride(0) == block_size * stride(1))")
        if (latent is not None or self.path is policy.Path.FP8_GATHERED) and not cache.is_contiguous():
            # write_kv_cache and gather_latent address it densely (padded rows are for steps that only read it)
            raise ValueError("kv_cache must be contiguous (" + ("this step writes latent rows into it)" if latent
                             is not None else "the fp8 gathered path reads it densely)"))
        row_stride = cache.stride(1) if cache.shape[1] > 1 else cache.stride(0)
        if (row_stride * cache.element_size()) % 16 or cache.data_ptr() % 16:
            raise ValueError("kv_cache rows must be 16-byte aligned (row stride and start)")
        if step.host.max_block_id >= kv_cache.shape[0]:
            raise ValueError(f"kv_cache has {kv_cache.shape[0]} blocks but the block tables use block "
                             f"{step.host.max_block_id}")
        if out is not None:
            check_tensor("out", out, dtype=torch.bfloat16, shape=(t, h, LATENT_DIM), device=self.device)
        if shared:
            if indexer is not None:
                raise ValueError(f"indexer must be None on shared layer {layer} (it reuses the previous top-k)")
            if self.workspace.stamp_of(step_region(INDICES, step.micro_batch)) != step.step_id:
                raise ValueError(f"layer {layer} is a shared layer but no full layer ran earlier in this step")
        else:
            self.indexer.check_inputs(indexer, step, self.device)
        return shared

    def forward(self, step: StepMetadata, q: torch.Tensor, latent: torch.Tensor | None, kv_cache: torch.Tensor,
                indexer: IndexerInputs | None = None, *, layer: int = 0,
                out: torch.Tensor | None = None) -> torch.Tensor:
        """One layer's DSA attention for the prepared step.

        q [T, H, D_qk] bf16 latent queries (H = heads per rank); latent [T, D_qk] this step's latent KV
        rows, written into kv_cache at the step's slots (None: already written); kv_cache this layer's
        [num_blocks, block_size, row] cache; indexer: this layer's IndexerInputs (None on a shared
        layer); out [T, H, 512] bf16 (allocated when None). Returns out.
        """
        shared = self._check(step, q, latent, kv_cache, indexer, layer, out)
        host, ws = step.host, self.workspace
        t = host.num_tokens
        if out is None:
            out = torch.empty((t, self.heads, LATENT_DIM), dtype=torch.bfloat16, device=self.device)
        # a full layer of a kpool-1 model writes both caches at the same slots: one launch for the two
        both = latent is not None and not shared and self.indexer.kpool == 1 and self.fused_cache_writes
        if both:
            write_kv_and_indexer_cache(latent, kv_cache, indexer.k, indexer.cache, step.slot_mapping)
        elif latent is not None:
            write_kv_cache(latent, kv_cache, step.slot_mapping)
        indices = self.indices(step)
        keyed = self.keyed_prefill_keys(step) if self.path is policy.Path.BF16_PREFILL else []
        if not shared:
            self.indexer.run(step, indexer, indices, cache_written=both)
            self._positions_to_kv_rows(step, indices, keyed)
            ws.stamp(step_region(INDICES, step.micro_batch), step.step_id)
        lse = ws.view(LSE, (t, self.heads), torch.float32)
        if self.path is policy.Path.BF16_PREFILL:
            d = host.num_decode_tokens if self.bf16_decodes_apart else 0
            # decode rows in a call of their own: they share no keys (policy.bf16_decode_variant)
            flat = kv_cache_flat(kv_cache)
            # (rows, keys): the decode rows, then the prefill rows in one call, or a call a gather chunk when keyed
            calls = [(0, d, None), (d, t, 0)] if not keyed else [(0, d, None)] + [
                (c.row_start, c.row_end, k) for c, k in zip(host.gather_chunks, keyed)]
            if self._bf16_decode_kernel_runs():  # the decode rows over the paged cache (bf16_decode_kernel)
                self._decode(q, kv_cache, indices, out, lse, 0, d)
                calls[0] = (0, 0, None)
            for i, (a, b, keys) in enumerate(calls):
                if a < b:
                    key_slots = self._key_slots(step, i - 1, keys) if keys else None
                    variant, split = self._prefill_split_views(b - a, keys is None, keys or flat.shape[0])
                    sparse_mla_prefill(q[a:b], flat, indices[a:b], self.sm_scale, out=out[a:b], lse=lse[a:b],
                                       variant=variant, scratch=self._prefill_scratch(b - a), split_scratch=split,
                                       key_slots=key_slots, row_scratch=self._row_scratch(keys))
        elif self.path is policy.Path.FP8_MIXED:
            self._decode(q, kv_cache, indices, out, lse, 0, t)
        else:
            self._decode(q, kv_cache, indices, out, lse, 0, host.num_decode_tokens)
            self._gathered_prefill(step, q, kv_cache, indices, out, lse)
        return out

    def _positions_to_kv_rows(self, step: StepMetadata, indices: torch.Tensor, keyed: list[int] = ()) -> None:
        """Indexer positions -> cache slots, or rows of the gathered context for gathered prefills (keyed: the bf16
        path's keys of each gather chunk, keyed_prefill_keys; the rows of a keyed chunk get its keys, the same
        offsets, the other rows slots)."""
        bs = self.limits.block_size
        host = step.host
        if keyed and not all(keyed):  # some chunks keyed, some not: row ranges of each kind
            spans = [(0, host.num_decode_tokens, False)] + [(c.row_start, c.row_end, k > 0)
                                                            for c, k in zip(host.gather_chunks, keyed)]
        else:
            n = host.num_decode_tokens if self.path is policy.Path.FP8_GATHERED or keyed else host.num_tokens
            spans = [(0, n, False), (n, host.num_tokens, True)]
        for a, b, offsets in spans:
            if a >= b:
                continue
            if offsets:
                positions_to_offsets(indices[a:b], step.gather_base[a:b], out=indices[a:b])
            else:
                positions_to_slots(indices[a:b], step.token_req[a:b], step.block_table, bs, out=indices[a:b])

    def _key_slots(self, step: StepMetadata, chunk: int, keys: int) -> torch.Tensor:
        """The slot of each key of a keyed bf16 prefill call (gather chunk `chunk`'s pieces), in the workspace."""
        c, p0 = step.host.gather_chunks[chunk], step.gather_piece_start[chunk]
        p1, gp = p0 + len(c.pieces), step.gather_pieces
        out = self.workspace.view(KEY_SLOTS, (keys,), torch.int32)
        return gather_slots(step.block_table, gp[0, p0:p1], gp[1, p0:p1], gp[2, p0:p1],
                            max(p.num_keys for p in c.pieces), self.limits.block_size, out)

    def _row_scratch(self, keys: int | None, gathered: bool = False) -> list | None:
        """sparse_mla_prefill's row_scratch for a keyed call of `keys` keys (bf16_row_scratch), or for a gathered
        call over `keys` context rows (gathered, gathered_row_scratch), views of the workspace; None for a call that
        is neither or without its knob."""
        if not keys or not (self._gathered_rows_on if gathered else self._rows_on):
            return None
        rows, kmap = prefill_row_spec(keys, self.geometry.d_qk)
        return list(self.workspace.views(ROW_SCRATCH, {"rows": rows, "kmap": kmap}).values())

    def _decode(self, q, kv_cache, indices, out, lse, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        variant, specs = self._decode_scratch(hi - lo)
        scratch = None
        if specs:
            bufs = self.workspace.views(DECODE_SCRATCH, {str(i): s for i, s in enumerate(specs)})
            scratch = list(bufs.values())
        sparse_mla_decode(q[lo:hi], kv_cache, indices[lo:hi], self.sm_scale, out=out[lo:hi], lse=lse[lo:hi],
                          variant=variant, scratch=scratch)

    def _prefill_scratch(self, tokens: int) -> list | None:
        """Views of the workspace for prefill_scratch_spec(tokens, ...) (None when the spec is [])."""
        specs = prefill_scratch_spec(tokens, self.heads, self.width)
        if not specs:
            return None
        return list(self.workspace.views(PREFILL_SCRATCH, {str(i): s for i, s in enumerate(specs)}).values())

    def _prefill_split_views(self, tokens: int, decodes: bool = False,
                             num_slots: int | None = None) -> tuple[str, list | None]:
        """(variant, views of the workspace for its prefill_split_spec, None when the call does not split)."""
        variant, specs = self._prefill_split(tokens, decodes, num_slots)
        if not specs:
            return variant, None
        return variant, list(self.workspace.views(PREFILL_SPLIT, {str(i): s for i, s in enumerate(specs)}).values())

    def _gathered_prefill(self, step, q, kv_cache, indices, out, lse) -> None:
        gp = step.gather_pieces
        for c, p0 in zip(step.host.gather_chunks, step.gather_piece_start):
            p1 = p0 + len(c.pieces)
            context = self.workspace.view(GATHERED, (c.num_keys, self.geometry.d_qk), torch.bfloat16)
            gather_latent(kv_cache, step.block_table, gp[0, p0:p1], gp[1, p0:p1], gp[2, p0:p1],
                          max(p.num_keys for p in c.pieces), context)
            a, b = c.row_start, c.row_end
            variant, split = self._prefill_split_views(b - a, num_slots=c.num_keys)
            sparse_mla_prefill(q[a:b], context, indices[a:b], self.sm_scale, out=out[a:b], lse=lse[a:b],
                               variant=variant, scratch=self._prefill_scratch(b - a), split_scratch=split,
                               row_scratch=self._row_scratch(c.num_keys, gathered=True))
