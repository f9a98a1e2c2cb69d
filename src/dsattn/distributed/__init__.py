"""Tensor-parallel pieces (SPEC section 8), on top of ``torch.distributed`` (NCCL on GPUs, gloo on CPUs).

- ``row_shard``: the planner, contiguous row slices minimizing the largest slice cost.
- ``tp_indexer``: the gate, the variable-size row all-gather, and ``sharded_prefill_topk`` (the entry
  point of the backend's indexer driver).
- ``group``: size, rank and usability of a process group; joining the group ``torchrun`` describes.
"""
from .group import group_rank, group_size, init_from_env, usable_group
from .row_shard import cost_balance, plan_row_shards, slice_costs
from .tp_indexer import (DEFAULT_MIN_ROWS_PER_RANK, DEFAULT_STAGING_BYTES, all_gather_rows, sharded_prefill_topk,
                         should_shard, staging_spec)

__all__ = [
    "group_rank", "group_size", "init_from_env", "usable_group",
    "cost_balance", "plan_row_shards", "slice_costs",
    "DEFAULT_MIN_ROWS_PER_RANK", "DEFAULT_STAGING_BYTES", "all_gather_rows", "sharded_prefill_topk",
    "should_shard", "staging_spec",
]
