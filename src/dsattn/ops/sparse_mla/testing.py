"""Inputs and checks shared by the sparse MLA kernel tests (CPU interpreter and GPU) and the benchmark.

Every case is built so that a kernel reading anything it must not read shows up as NaN in its output:
the cache is a view of a larger buffer whose rows past the end (slots >= N, which indices point at) and
whose rows reached only by entries past topk_length are NaN.
"""
from __future__ import annotations

import dataclasses

import torch

from ...formats import KVLayout, as_layout, pack_latent_rows
from .reference import sparse_mla_paged_reference, sparse_mla_reference

# Issue 3's tolerances against the fp32 reference on the same (dequantized) inputs (SPEC 3 gives none).
OUT_ATOL = 2e-3
OUT_RTOL = 3 / 128
LSE_RTOL = 1e-5


@dataclasses.dataclass
class Case:
    q: torch.Tensor             # [T, H, D_qk] bf16
    cache: torch.Tensor         # [num_blocks, block_size, row] (a view; the buffer behind it has NaN rows past it)
    indices: torch.Tensor       # [T, K] int32 slots
    topk_length: torch.Tensor | None
    sm_scale: float
    layout: KVLayout

    @property
    def flat(self) -> torch.Tensor:
        """[slots, row] view of the cache (what prefill takes for a bf16 cache)."""
        return self.cache.flatten(0, 1)

    def reference(self):
        if self.layout is KVLayout.BF16:
            return sparse_mla_reference(self.q, self.flat, self.indices, self.sm_scale, 512, self.topk_length)
        return sparse_mla_paged_reference(self.q, self.cache, self.indices, self.sm_scale, self.layout, 512,
                                          self.topk_length)


def _nan_rows(n: int, row: int, layout: KVLayout, device) -> torch.Tensor:
    if layout is KVLayout.BF16:
        return torch.full((n, row), float("nan"), dtype=torch.bfloat16, device=device)
    return torch.full((n, row), 0xFF, dtype=torch.uint8, device=device)  # fp8, fp32 and bf16 NaN bytes


def make_case(t: int, h: int, d_qk: int, num_slots: int, topk: int, layout="bf16", block_size: int = 16,
              invalid: float = 0.1, with_length: bool = False, empty_rows: int = 0, seed: int = 0,
              device="cpu", indices: torch.Tensor | None = None) -> Case:
    """A random case: q and latents ~ N(0, 1) (latents scaled per channel so fp8 groups differ), slots
    drawn uniformly with repeats allowed, a fraction `invalid` of entries -1 / past the cache / huge;
    with_length cuts each row at a random topk_length (the cut-off entries point at NaN rows);
    the first `empty_rows` rows get no valid entry at all. `indices` replaces the random slots."""
    layout = as_layout(layout)
    g = torch.Generator(device="cpu").manual_seed(seed)
    num_blocks = -(-num_slots // block_size)
    slots = num_blocks * block_size
    latent = torch.randn(slots, d_qk, generator=g) * (0.5 + torch.rand(d_qk, generator=g))
    rows = pack_latent_rows(latent, layout) if layout.is_fp8 else latent.to(torch.bfloat16)
    row = rows.shape[1]
    pad = 2 * block_size  # NaN slots past the end of the cache, which some indices point at
    buf = torch.cat([rows, _nan_rows(pad, row, layout, "cpu")])
    if indices is None:
        idx = torch.randint(0, slots, (t, topk), generator=g, dtype=torch.int32)
        r = torch.rand(t, topk, generator=g)
        bad = torch.randint(0, 4, (t, topk), generator=g)
        choices = torch.stack([torch.full_like(idx, -1), slots + torch.randint(0, pad, (t, topk), generator=g,
                                                                                 dtype=torch.int32),
                               torch.full_like(idx, 2**31 - 1), torch.full_like(idx, -2**31)], -1)
        idx = torch.where(r < invalid, choices.gather(-1, bad[..., None].long())[..., 0], idx)
    else:
        idx = indices.to(torch.int32).cpu().clone()
    idx[:empty_rows] = -1
    length = None
    if with_length:
        length = torch.randint(0, topk + 1, (t,), generator=g, dtype=torch.int32)
        length[0] = topk  # one full row, one empty row
        if t > 1:
            length[1] = 0
        # Entries past the cut point at slots whose rows are NaN: a kernel that reads them shows it.
        nan_slots = torch.randint(0, slots, (max(1, slots // 16),), generator=g)
        used = torch.zeros(slots, dtype=torch.bool)
        j = torch.arange(topk)[None, :]
        keep = (j < length[:, None]) & (idx >= 0) & (idx < slots)
        used[idx[keep].long()] = True
        nan_slots = nan_slots[~used[nan_slots]]
        if nan_slots.numel():
            buf[nan_slots] = _nan_rows(nan_slots.numel(), row, layout, "cpu")
            cut = ~(j < length[:, None])
            fill = nan_slots[torch.randint(0, nan_slots.numel(), (t, topk), generator=g)].to(torch.int32)
            idx = torch.where(cut, fill, idx)
    buf = buf.to(device)
    cache = buf[:slots].view(num_blocks, block_size, row)
    q = (torch.randn(t, h, d_qk, generator=g) * 0.5).to(torch.bfloat16).to(device)
    return Case(q=q, cache=cache, indices=idx.to(device), topk_length=None if length is None else length.to(device),
                sm_scale=d_qk ** -0.5 * 1.3, layout=layout)


def widen_latents(case: Case, seed: int = 0, channels: slice = slice(100, 108), scale: float = 1e5) -> None:
    """Put latent values past fp16's range into a bf16 case, in place: the given channels of every row become |x| x
    scale (positive, up to ~4e5 at the default, so out has no cancellation there) and q's part of them +-2^-14 (exact
    in fp16), so that their logits stay small and the softmax is not one-hot. For the kernels that convert V to fp16 x
    2^-8 (finite below 2^24 when they scale before they round)."""
    flat = case.flat
    flat[:, channels] = (flat[:, channels].float().abs() * scale).to(flat.dtype)
    assert flat[:, channels].float().nan_to_num(0).abs().max().item() > 65504
    g = torch.Generator(device="cpu").manual_seed(seed)
    sign = (torch.randint(0, 2, case.q[..., channels].shape, generator=g) * 2 - 1).to(case.q.device)
    case.q[..., channels] = (sign * 2.0 ** -14).to(case.q.dtype)


def poisoned_outputs(t: int, h: int, device="cpu", out_row_pad: int = 0):
    """NaN-filled (out [T, H, 512] bf16, lse [T, H] fp32); out_row_pad > 0 makes the rows strided."""
    base = torch.full((t, h, 512 + out_row_pad), float("nan"), dtype=torch.bfloat16, device=device)
    lse = torch.full((t, h + 1), float("nan"), dtype=torch.float32, device=device)[:, :h]
    return base[..., :512], lse


def check_out_close(out: torch.Tensor, ref_out: torch.Tensor) -> float:
    """Assert issue 3's bound on out alone (every element within OUT_ATOL + OUT_RTOL x |ref|, no NaN), for callers
    that see no lse (the serving backend's output against the reference on the backend's own selection); returns the
    largest error."""
    assert not torch.isnan(out).any(), "out has NaN (unwritten or a forbidden row was read)"
    o = out.float()
    ref_out = ref_out.to(o.device)
    err = (o - ref_out).abs()
    bound = OUT_ATOL + OUT_RTOL * ref_out.abs()
    assert (err <= bound).all(), f"out error {float((err - bound).max()):.3g} over the bound; max err {float(err.max()):.3g}"
    return float(err.max()) if err.numel() else 0.0


def check_close(out: torch.Tensor, lse: torch.Tensor, ref_out: torch.Tensor, ref_lse: torch.Tensor) -> dict:
    """Assert the issue-3 tolerances (every element written, no NaN); returns the worst errors seen."""
    out_err = check_out_close(out, ref_out)
    assert not torch.isnan(lse).any(), "lse has NaN (unwritten or a forbidden row was read)"
    o = out.float()
    ref_lse = ref_lse.to(lse.device)
    inf = torch.isinf(ref_lse)
    assert torch.equal(torch.isinf(lse), inf) and (lse[inf] == ref_lse[inf]).all(), "lse -inf rows differ"
    assert (o[inf] == 0).all(), "a row without a valid entry must give out = 0 exactly (SPEC 3)"
    # Relative to max(|lse|, 1): a row whose lse happens to be near 0 is held to 1e-5 absolute.
    rel = ((lse[~inf] - ref_lse[~inf]).abs() / ref_lse[~inf].abs().clamp_min(1.0))
    worst = float(rel.max()) if rel.numel() else 0.0
    assert worst <= LSE_RTOL, f"lse relative error {worst:.3g} > {LSE_RTOL}"
    return {"out_max_abs_err": out_err, "lse_max_rel_err": worst}
