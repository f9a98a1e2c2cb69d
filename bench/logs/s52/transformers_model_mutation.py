"""Session 52: does tests/test_transformers_model.py see a wrong key? Every selected position but 0 one lower before
the backend's position -> slot lookup (DSAAttention reads the key beside the one its indexer chose); each CASES run
must fail, and does so on its selection check (the engine maps the slots back to positions); with that check off,
on the logits.

    python bench/logs/s52/transformers_model_mutation.py
"""
import os
import sys

os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests"))
import torch  # noqa: E402

import dsattn.backend.attention as attention  # noqa: E402
import test_transformers_model as T  # noqa: E402

original = attention.positions_to_slots


def one_lower(indices, req, table, bs, out):
    return original(torch.where(indices > 0, indices - 1, indices), req, table, bs, out=out)


attention.positions_to_slots = one_lower
checked = T._selections


def unchecked(engine, off, start, n, topk, step_no, r):  # the selections as they are, not checked
    return [None if s is None else s[off:off + n] for s in engine.selections]


for name, selections in (("the test as it is", checked), ("selection checks off (the logits alone)", unchecked)):
    T._selections = selections
    failed = 0
    for case in T.CASES:
        try:
            T.run_lockstep(*case)
            print(f"{name}: passed (the mutation was missed):", case)
        except AssertionError as e:
            failed += 1
            print(f"{name}: failed:", case, str(e).splitlines()[0][:110])
    print(f"{name}: {failed} of {len(T.CASES)} runs failed")
