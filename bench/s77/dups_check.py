"""Session 77: ptxas's registers / spills of grouping._group_union_dups_kernel for sm_90a on a machine without a GPU
(topk 2048, 16384 slots; num_warps as grouping launches it), at a block of groups a program (BLOCK) as dups_block
picks them. Session 77 read: G 2 234 registers at BLOCK 32 (182 before dups_block, one program a group), no spill; G
4 128 registers and ~200 bytes of spill (the rebuild path only; 56 before).
    PYTHONPATH=src python bench/s77/dups_check.py"""
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from _sm90 import Intercept, ptxas_report  # noqa: E402

from dsattn.ops.sparse_mla import grouping  # noqa: E402


def main():
    for g, block in ((2, 32), (2, 4), (4, 32), (8, 1)):
        t, k, n, groups = 4 * g, 2048, 16384, 4
        idx = torch.zeros(t, k, dtype=torch.int32)
        ent = torch.zeros(groups, g * k, dtype=torch.int32)
        msk, cnt = torch.zeros_like(ent), torch.zeros(groups, dtype=torch.int32)
        gp, kp = grouping.next_pow2(g), grouping.next_pow2(k)
        sink = []
        Intercept(grouping._group_union_dups_kernel, lambda f, c, o: sink.append(c))[(1,)](
            idx, idx.stride(0), idx, n, 0, t, ent, ent.stride(0), msk, msk.stride(0), cnt, k, groups,
            G=g, GP=gp, KP=kp, HAS_LEN=False, WIDE=False, BLOCK=block,
            num_warps=16 if gp * kp >= 8192 else 8 if gp * kp >= 2048 else 4)
        print(f"G {g} BLOCK {block}: {ptxas_report(sink[0].asm['ptx'])} shared={sink[0].metadata.shared}")


if __name__ == "__main__":
    main()
