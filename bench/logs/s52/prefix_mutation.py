"""Session 52: does tests/test_transformers_model.py's prefix-cache test see shared blocks reused too early? The engine
mutated to free every block of a finished request, those another request still shares included: E (step 5) then
takes D's prefix blocks and overwrites them. Every PREFIX_CASES run must fail.

    python bench/logs/s52/prefix_mutation.py
"""
import os
import sys

os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests"))
import _hf_engine as E  # noqa: E402
import test_transformers_model as T  # noqa: E402


def finish_freeing_shared(self, req_id):
    r = self.requests.pop(req_id)
    self.free_blocks[:0] = r.blocks
    self.free_states.insert(0, r.state_slot)


E.Engine.finish = finish_freeing_shared
for case in T.PREFIX_CASES:
    try:
        T.run_prefix(*case)
        print("passed (the mutation was missed):", case)
    except AssertionError as e:
        print("failed:", case, str(e).splitlines()[0][:110])
