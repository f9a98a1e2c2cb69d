"""Session 52 (after a helper's review): do tests/test_transformers_model.py's plain-step (lockstep) k-pool cases see
a wrong pooled key or a wrong k-pool selection? Two mutations of the reference ops, each over the glm5_next CASES:
- member_shift: kpool_update_reference builds a pool from the tail state one index off;
- tail_decode: kpool_expand drops the oldest tail member in steps of at most 3 tokens (decodes).
Every run must fail (before the review's fixes both passed: the pooled keys were checked only in the speculative and
prefix runs, the k-pool selections' structure nowhere).

    python bench/logs/s52/kpool_mutations.py
"""
import inspect
import os
import sys

os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests"))
import torch  # noqa: E402

import dsattn.ops.indexer.reference as R  # noqa: E402
import test_transformers_model as T  # noqa: E402

update, expand = R.kpool_update_reference, R.kpool_expand


def member_shift():
    src = inspect.getsource(update).replace("keys.append(old_tail[slot, m, :d])",
                                            "keys.append(old_tail[slot, (m + 1) % (kpool - 1), :d])")
    ns = dict(vars(R))
    exec(src, ns)
    R.kpool_update_reference = ns["kpool_update_reference"]


def tail_decode():
    def mutated(pool_topk, positions, kpool):
        out = expand(pool_topk, positions, kpool)
        if out.shape[0] <= 3:
            tail = out[:, -(kpool - 1):]
            out[:, -(kpool - 1):] = torch.where(tail == tail[:, :1], -1, tail)
            vis = positions.long() + 1
            keep = vis % kpool == 1
            out[keep, -(kpool - 1)] = (vis[keep] - 1).int()
        return out
    R.kpool_expand = mutated


for name, apply in (("member_shift", member_shift), ("tail_decode", tail_decode)):
    apply()
    for case in [c for c in T.CASES if c[0] == "glm5_next"]:
        try:
            T.run_lockstep(*case)
            print(f"{name}: passed (missed)", case)
        except AssertionError as e:
            print(f"{name}: failed", case, str(e).splitlines()[0][:100])
    R.kpool_update_reference, R.kpool_expand = update, expand
