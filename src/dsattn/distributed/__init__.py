"""Tensor-parallel pieces (SPEC section 8), on top of ``torch.distributed`` (NCCL on GPUs, gloo on CPUs).

- ``row_shard``: the planner, contiguous row slices minimizing the largest slice cost.
- ``cost_model``: what a slice of indexer prefill rows costs (per-row costs over the chunk grid, and a
  launch cost per chunk a slice touches), and plans made with it.
- ``tp_indexer``: the gate, the variable-size row all-gather, and ``sharded_prefill_topk`` (the entry
  point of the backend's indexer driver).
- ``group``: size, rank and usability of a process group; joining the group ``torchrun`` describes.
"""
from .cost_model import KEYS_ONLY, IndexerCostModel, default_cost_model
from .group import group_rank, group_size, init_from_env, usable_group
from .row_shard import cost_balance, plan_row_shards, slice_costs
from .tp_indexer import (DEFAULT_MIN_ROWS_PER_RANK, DEFAULT_STAGING_BYTES, all_gather_rows, sharded_prefill_topk,
                         should_shard, staging_spec)

__all__ = [
    "group_rank", "group_size", "init_from_env", "usable_group",
    "cost_balance", "plan_row_shards", "slice_costs",
    "KEYS_ONLY", "IndexerCostModel", "default_cost_model",
    "DEFAULT_MIN_ROWS_PER_RANK", "DEFAULT_STAGING_BYTES", "all_gather_rows", "sharded_prefill_topk",
    "should_shard", "staging_spec",
]
