"""Session 52: the numbers in tests/test_transformers_model.py's comments (CPU). With no argument the reference ops
(dense MLPs, then MoE layers after the first); with "interpreted" the test's INTERPRETED cases with the Triton kernels
under the interpreter.

    python bench/logs/s52/transformers_model_measure.py [interpreted]
"""
import os
import sys

interpreted = sys.argv[1:] == ["interpreted"]
os.environ["TRITON_INTERPRET"] = "1" if interpreted else "0"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests"))
import test_transformers_model as T  # noqa: E402
from dsattn.ops._triton import allow_runtime_loop_bounds  # noqa: E402

allow_runtime_loop_bounds()
runs = [("interpreted", False, T.INTERPRETED)] if interpreted else [("dense", False, T.CASES), ("moe", True, T.CASES)]
for name, moe, cases in runs:
    for kind, kpool, layout, bs, heads in cases:
        st = T.run_lockstep(kind, kpool, layout, bs, heads, moe=moe)
        print(f"{name} {kind} {layout} bs {bs} heads {heads}: logits' largest error {st['worst_rel']:.2e} of "
              f"the largest; selections the same as transformers' own {st['agree']}/{st['rows']} "
              f"({st['agree'] / st['rows']:.3f})", flush=True)
