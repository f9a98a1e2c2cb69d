"""Session 52: does tests/test_transformers_model.py's speculative test see a stale k-pool state? Two mutations, each
run over SPEC_CASES (reference ops):
- no_restore: the engine rolls back in place even past kpool_update's bound (no saved state row restored);
- old_tail_rule: kpool_update_reference as before session 51 (members of a pool the step completed not kept).
The k-pool cases must fail, the others (kpool 1: nothing to restore) pass.

    python bench/logs/s52/speculative_mutations.py
"""
import inspect
import os
import sys
import textwrap

os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests"))
import _hf_engine as E  # noqa: E402
import test_transformers_model as T  # noqa: E402
import dsattn.ops.indexer.reference as R  # noqa: E402


def no_restore(self, req_id, rejected):
    r = self.requests[req_id]
    r.num_cached -= rejected
    return r.num_cached


def old_tail_rule():
    src = textwrap.dedent(inspect.getsource(R.kpool_update_reference))
    new = src.replace("""        j = i + kpool
        if j < k.shape[0] and int(req[j]) == r and int(pos[j]) == int(pos[i]) + kpool:
            continue
""", """        last = i - m + kpool - 1
        if last < k.shape[0] and int(req[last]) == r and int(pos[last]) == int(pos[i]) - m + kpool - 1:
            continue
""")
    assert new != src
    ns = dict(vars(R))
    exec(new, ns)
    return ns["kpool_update_reference"]


for name in ("no_restore", "old_tail_rule"):
    saved = E.Engine.rollback, R.kpool_update_reference
    if name == "no_restore":
        E.Engine.rollback = no_restore
    else:
        R.kpool_update_reference = old_tail_rule()
    for case in T.SPEC_CASES:
        try:
            T.run_speculative(*case)
            print(f"{name}: passed", case)
        except AssertionError as e:
            print(f"{name}: failed", case, str(e).splitlines()[0][:100])
    E.Engine.rollback, R.kpool_update_reference = saved
