"""The serving simulation of tests/test_backend_serving_sim.py with the backend on CUDA and the real kernels (skipped
without CUDA): the same engines (block pool with reuse, chunked prefill, speculative decodes with rollbacks and
tail-state restores, prefix-cache hits, shared layers, graph steps), the same schedules and inputs as the CPU test's
(2-3 of its seeds a configuration), each step checked against the CPU oracle (reference ops, fresh caches rebuilt
from the accepted inputs) in the simulation's tolerance mode (strict=False; its module docstring): selections the
same sets in all of a step's rows but a few near ties, outputs finite and within 2e-2, latent rows and plain indexer
keys byte-equal, pooled keys and the tail state within test_backend_gpu.py's tolerance. Each step is checked on its
own: nothing accumulates.

TRITON_INTERPRET is removed from the environment here (dispatch reads it at call time): on CUDA tensors the ops run
the kernels. test_backend_serving_sim.py::test_tolerance_mode_on_the_cpu runs the same checks on the CPU, and
check_simulation(..., device="cpu") is this test's body on the CPU with the reference ops (a dry run).
"""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: the CPU simulation

from test_backend_serving_sim import GPU_SEEDS, engine_seed, simulate  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = "cuda"
# 2-3 of the CPU test's seeds a configuration (11 simulations of 10-15 steps), covering every engine event, both block
# sizes and both cap choices (test_backend_serving_sim.py::test_gpu_seeds_cover_the_engine_events)
RUNS = [(*cfg, seed) for cfg, seeds in GPU_SEEDS.items() for seed in seeds]


@pytest.fixture(autouse=True)
def one_thread():
    """The oracle's tiny CPU tensors run faster on one intra-op thread (as in the CPU test); restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def check_simulation(name: str, layout: str, heads: int, seed: int, device=DEV):
    """The test's body: one simulation in tolerance mode with the backend on `device` (a dry run on the CPU with the
    reference ops: device="cpu"); returns the engine (stats, tol, worst)."""
    eng = simulate(name, layout, heads, engine_seed(name, layout, heads, seed), device=device, strict=False)
    kind = torch.device(device).type   # (a CUDA tensor's device is cuda:0, not cuda)
    assert {eng.attn.device.type, eng.icache.device.type, eng.kv[0].device.type} == {kind}
    assert eng.stats["rejections"] and eng.stats["prompt_chunks"], eng.stats
    assert eng.tol["rows"] == eng.stats["tokens"], (eng.tol, eng.stats)   # every row of every step checked
    return eng


@pytest.mark.parametrize("name, layout, heads, seed", RUNS)
def test_serving_simulation_on_gpu(name, layout, heads, seed, monkeypatch):
    """Every step of the simulation on the GPU within the tolerance mode's bounds of the CPU oracle."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    eng = check_simulation(name, layout, heads, seed)
    print(f"{name} {layout} h{heads} seed {seed}: {eng.stats['steps']} steps, {dict(eng.tol)}, worst {eng.worst}")
