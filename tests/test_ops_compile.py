"""The public ops run their custom op's body directly in eager mode (no torch.library dispatcher: its host cost) and
the custom op itself where torch.compile traces: a fullgraph compile of each public function gives the eager
results (tiny sizes; kernels interpreted on the CPU)."""
from dsattn.ops._triton import allow_runtime_loop_bounds

allow_runtime_loop_bounds()  # (the interpreted kernels loop to runtime bounds, as in tests/test_topk.py)

import torch  # noqa: E402

from dsattn import formats  # noqa: E402
from dsattn.ops.cache import write_indexer_cache, write_kv_and_indexer_cache, write_kv_cache  # noqa: E402
from dsattn.ops.gather import positions_to_offsets  # noqa: E402
from dsattn.ops.topk import topk  # noqa: E402


def _compiled(fn):
    return torch.compile(fn, fullgraph=True, backend="aot_eager")


def test_topk_traces():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 300, generator=g)
    lengths = torch.tensor([300, 17, 0], dtype=torch.int32)
    ref = topk(logits, lengths, 32)
    got = _compiled(lambda a, b: topk(a, b, 32))(logits, lengths)
    for r, o in zip(ref, got):  # a set per row: compare sorted
        assert torch.equal(r.sort().values, o.sort().values)


def test_cache_writes_trace():
    g = torch.Generator().manual_seed(1)
    slots = torch.tensor([0, 3, -1, 9, 14], dtype=torch.int32)
    for write, values, row in ((write_kv_cache, torch.randn(5, 576, generator=g).bfloat16(), 656),
                               (write_indexer_cache, torch.randn(5, formats.INDEX_DIM, generator=g).bfloat16(),
                                formats.INDEX_ROW_BYTES)):
        eager = torch.zeros(4, 4, row, dtype=torch.uint8)
        write(values, eager, slots)
        traced = torch.zeros_like(eager)

        def fn(v, cache, s, write=write):
            write(v, cache, s)
            return cache

        assert torch.equal(_compiled(fn)(values, traced, slots), eager), write.__name__


def test_write_kv_and_indexer_cache_traces():
    g = torch.Generator().manual_seed(2)
    slots = torch.tensor([0, 3, -1, 9, 14], dtype=torch.int32)
    latent, k = torch.randn(5, 576, generator=g).bfloat16(), torch.randn(5, formats.INDEX_DIM, generator=g).bfloat16()
    kv, ix = torch.zeros(4, 4, 656, dtype=torch.uint8), torch.zeros(4, 4, formats.INDEX_ROW_BYTES, dtype=torch.uint8)
    write_kv_and_indexer_cache(latent, kv, k, ix, slots)

    def fn(a, b, c, d, s):
        write_kv_and_indexer_cache(a, b, c, d, s)
        return b, d

    got = _compiled(fn)(latent, torch.zeros_like(kv), k, torch.zeros_like(ix), slots)
    assert torch.equal(got[0], kv) and torch.equal(got[1], ix)


def test_positions_to_offsets_traces():
    positions = torch.tensor([[0, 1, -1], [5, 2, 7]], dtype=torch.int32)
    row_base = torch.tensor([10, 20], dtype=torch.int32)
    ref = positions_to_offsets(positions, row_base)
    assert torch.equal(_compiled(positions_to_offsets)(positions, row_base), ref)
