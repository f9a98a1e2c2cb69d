"""Session 52: the numbers in tests/test_transformers_model.py's comments (CPU). Each run's largest logits error
relative to transformers' largest (per request and step, as the tests compare), and for the lockstep runs how many rows
select the same sets as transformers' own indexer. With no argument the reference ops (CASES, then with MoE layers,
then SPEC_CASES and PREFIX_CASES); with "interpreted" the test's interpreted cases with the Triton kernels under the
interpreter.

    python bench/logs/s52/transformers_model_measure.py [interpreted]
"""
import os
import sys

interpreted = sys.argv[1:] == ["interpreted"]
os.environ["TRITON_INTERPRET"] = "1" if interpreted else "0"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests"))
import _hf_models as hf  # noqa: E402
import test_transformers_model as T  # noqa: E402
from dsattn.ops._triton import allow_runtime_loop_bounds  # noqa: E402

allow_runtime_loop_bounds()
worst = [0.0]


def record(actual, expected, rel):  # in place of the tests' assertion: the largest error seen
    worst[0] = max(worst[0], ((actual.float() - expected.float()).abs().max() / expected.abs().max()).item())


hf.assert_close_rel = record
if interpreted:
    runs = [("interpreted lockstep", lambda c: T.run_lockstep(*c), T.INTERPRETED),
            ("interpreted speculative", lambda c: T.run_speculative(*c), [T.SPEC_INTERPRETED])]
else:
    runs = [("lockstep", lambda c: T.run_lockstep(*c), T.CASES),
            ("lockstep moe", lambda c: T.run_lockstep(*c, moe=True), T.CASES),
            ("speculative", lambda c: T.run_speculative(*c), T.SPEC_CASES),
            ("prefix", lambda c: T.run_prefix(*c), T.PREFIX_CASES)]
if not interpreted:
    runs.append(("generation (tokens exactly transformers' choice of 30, texts equal to its own generation of 3)",
                 lambda c: print("  ", T.run_generation(*c)), [("deepseek_v32", 1), ("glm_moe_dsa", 1),
                                                               ("glm5_next", 4)]))
for name, fn, cases in runs:
    for case in cases:
        worst[0] = 0.0
        st = fn(case)
        agree = f"; selections the same as transformers' own {st['agree']}/{st['rows']} " \
                f"({st['agree'] / st['rows']:.3f})" if st else ""
        err = st["worst_rel"] if st else worst[0]  # the lockstep runs measure it themselves (MoE runs assert nothing)
        print(f"{name} {case}: logits' largest error {err:.2e} of the largest{agree}", flush=True)
