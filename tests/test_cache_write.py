"""Cache-write kernels (ops/cache/write.py) under TRITON_INTERPRET=1: bytes equal to the reference twins."""

from dsattn.ops._triton import allow_runtime_loop_bounds

allow_runtime_loop_bounds()

import pytest
import torch

from dsattn import formats
from dsattn.ops.cache import write_indexer_cache, write_kv_and_indexer_cache, write_kv_cache
from dsattn.ops.cache.reference import write_indexer_cache_reference, write_kv_cache_reference

pytestmark = pytest.mark.interpreted  # the kernels under the interpreter, or skipped (conftest.py)


def _poisoned(cache):
    (cache.view(torch.uint8) if cache.dtype != torch.uint8 else cache).fill_(0xAB)
    return cache


def _values(t, d):
    """Rows across magnitudes (tiny to large scales), one all-zero row (scale 1)."""
    x = torch.randn(t, d) * torch.logspace(-4, 4, t)[:, None]
    x[1] = 0
    return x


@pytest.mark.parametrize("layout, d", [("bf16", 576), ("bf16", 512), ("fp8_ds_mla", 576), ("fp8_ds_mla", 512),
                                       ("fp8_ds_mla_nope", 512)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_write_kv_cache(layout, d, dtype):
    latent = _values(7, d).to(dtype)
    slots = torch.tensor([5, -1, 0, 11, 12, 40, 3], dtype=torch.int64)  # -1 and past the cache are skipped
    got = _poisoned(formats.new_kv_cache(3, 4, layout, d))
    want = got.clone()
    write_kv_cache(latent, got, slots)
    write_kv_cache_reference(latent, want, torch.where(slots < 12, slots, -1), layout)
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


def test_write_kv_cache_flashmla_shape():
    latent = _values(3, 576).bfloat16()
    cache = _poisoned(formats.new_kv_cache(2, 4, "fp8_ds_mla", 576)).unsqueeze(2)  # [blocks, bs, 1, 656]
    want = cache.clone().squeeze(2)
    write_kv_cache(latent, cache, torch.tensor([7, 0, 2], dtype=torch.int32))
    write_kv_cache_reference(latent, want, torch.tensor([7, 0, 2]), "fp8_ds_mla")
    assert torch.equal(cache.squeeze(2), want)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_write_indexer_cache(dtype):
    k = _values(9, 128).to(dtype)
    slots = torch.tensor([4, 17, -3, 0, 8, 100, 1, 15, 9], dtype=torch.int32)
    got = _poisoned(formats.new_indexer_cache(3, 6))
    want = got.clone()
    write_indexer_cache(k, got, slots)
    write_indexer_cache_reference(k, want, torch.where(slots < 18, slots, -1))
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_tiny_groups_take_the_smallest_normal_scale(dtype):
    """amax below 448 * 2 ** -126 (ratio subnormal, or 0 in fp32): the kernel's scale is 2 ** -126, and the
    reference's (formats.group_scales) the same; before session 35 the reference went subnormal (1e-37) or off by
    a power of two (2 ** -140), against the kernel's bit-for-bit claim."""
    # bf16: no subnormal input here (the interpreter converts subnormal bf16 to fp32 wrongly: 0.25 for ~0.04 after
    # scaling; tests/gpu/test_indexer_gpu.py::test_tiny_groups_on_the_gpu holds them on the GPU)
    amax = [1e-37, 448 * 2.0 ** -127 if dtype is torch.bfloat16 else 2.0 ** -140, 448 * 2.0 ** -126, 3e-36]
    x = torch.rand(4, 128) * 0.5 + 0.5
    x = (x / x.amax(1, keepdim=True) * torch.tensor(amax)[:, None]).to(dtype)
    assert (formats.group_scales(x.float()) == 2.0 ** -126).all()
    got = _poisoned(formats.new_indexer_cache(1, 4))
    want = got.clone()
    write_indexer_cache(x, got, torch.arange(4, dtype=torch.int32))
    write_indexer_cache_reference(x, want, torch.arange(4))
    assert torch.equal(got, want)


def test_rejects_leave_cache_untouched():
    cache = _poisoned(formats.new_kv_cache(2, 4, "fp8_ds_mla_nope", 512))
    before = cache.clone()
    with pytest.raises(ValueError, match="512 columns"):
        write_kv_cache(torch.randn(2, 576).bfloat16(), cache, torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="slot_mapping must have dtype"):
        write_kv_cache(torch.randn(2, 512).bfloat16(), cache, torch.zeros(2))
    with pytest.raises(ValueError, match="latent must have dtype"):
        write_kv_cache(torch.randn(2, 512).half(), cache, torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="kv_cache must be"):
        write_kv_cache(torch.randn(2, 512).bfloat16(), torch.empty(2, 4, 600, dtype=torch.uint8),
                       torch.zeros(2, dtype=torch.int32))
    icache = _poisoned(formats.new_indexer_cache(2, 4))
    with pytest.raises(ValueError, match="k must have shape"):
        write_indexer_cache(torch.randn(2, 64), icache, torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="slot_mapping must have shape"):
        write_indexer_cache(torch.randn(2, 128), icache, torch.zeros(3, dtype=torch.int32))
    assert torch.equal(cache, before) and (icache == 0xAB).all()


@pytest.mark.parametrize("layout, d", [("fp8_ds_mla", 576), ("fp8_ds_mla_nope", 512), ("bf16", 576)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_write_kv_and_indexer_cache(layout, d, dtype):
    """The one-launch write (session 45) leaves both poisoned caches byte for byte as the reference writers do, with
    caches of different sizes (a slot inside one and past the other is written in the one only), -1 skipped; and
    bit for bit as the two separate kernels do."""
    latent = _values(7, d).to(dtype)
    k = _values(7, 128).to(dtype).flip(0)
    slots = torch.tensor([5, -1, 0, 13, 12, 40, 3], dtype=torch.int32)  # 12, 13: past the KV cache, in the indexer's
    kv, ix = _poisoned(formats.new_kv_cache(3, 4, layout, d)), _poisoned(formats.new_indexer_cache(4, 4))
    kv_ref, ix_ref = kv.clone(), ix.clone()
    kv_sep, ix_sep = kv.clone(), ix.clone()
    write_kv_and_indexer_cache(latent, kv, k, ix, slots)
    write_kv_cache_reference(latent, kv_ref, torch.where(slots < 12, slots, -1), layout)
    write_indexer_cache_reference(k, ix_ref, torch.where(slots < 16, slots, -1))
    assert torch.equal(kv.view(torch.uint8), kv_ref.view(torch.uint8))
    assert torch.equal(ix, ix_ref)
    write_kv_cache(latent, kv_sep, slots)
    write_indexer_cache(k, ix_sep, slots)
    assert torch.equal(kv.view(torch.uint8), kv_sep.view(torch.uint8))
    assert torch.equal(ix, ix_sep)


def test_write_kv_and_indexer_cache_rejects_before_writing():
    kv, ix = _poisoned(formats.new_kv_cache(2, 4, "fp8_ds_mla", 576)), _poisoned(formats.new_indexer_cache(2, 4))
    latent, k, slots = torch.randn(2, 576).bfloat16(), torch.randn(2, 128).bfloat16(), torch.zeros(2, dtype=torch.int32)
    with pytest.raises(ValueError, match="k must have as many rows as latent"):
        write_kv_and_indexer_cache(latent, kv, k[:1], ix, slots)
    with pytest.raises(ValueError, match="k must have shape"):
        write_kv_and_indexer_cache(latent, kv, torch.randn(2, 64), ix, slots)
    with pytest.raises(ValueError, match="indexer_cache must have shape"):
        write_kv_and_indexer_cache(latent, kv, k, torch.zeros(2, 4, 128, dtype=torch.uint8), slots)
    with pytest.raises(ValueError, match="latent must have 512 or 576 columns"):
        write_kv_and_indexer_cache(torch.randn(2, 600).bfloat16(), kv, k, ix, slots)
    assert (kv == 0xAB).all() and (ix == 0xAB).all()
