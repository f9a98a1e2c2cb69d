"""Reference twin of the indexer top-k (SPEC section 4).

Row t of a logits buffer holds its valid keys in columns [starts[t], ends[t]); the result is the k
columns with the largest logits, as positions ``column - starts[t]``, ties broken toward the lower
position, padded with -1 when fewer than k are valid. Returned sorted by (logit desc, position asc);
callers must treat a row as a set. ``in_column_order`` lists such a set as the kernels do.
"""
from __future__ import annotations

import torch

from ..._checks import FLOAT_DTYPES, INDEX_DTYPES, check_int, check_same_device, check_tensor, check_values


def topk_reference(logits: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, k: int) -> torch.Tensor:
    """logits [T, W] float, starts/ends [T] int (0 <= starts <= ends <= W) -> int32 [T, k]."""
    check_tensor("logits", logits, dtype=FLOAT_DTYPES, ndim=2, last_dim_contiguous=False)
    t, w = logits.shape
    check_tensor("starts", starts, dtype=INDEX_DTYPES, shape=(t,), last_dim_contiguous=False)
    check_tensor("ends", ends, dtype=INDEX_DTYPES, shape=(t,), last_dim_contiguous=False)
    check_int("k", k, lo=1)
    check_same_device(logits=logits, starts=starts, ends=ends)
    check_values("starts", starts, lo=0)
    check_values("ends", ends, hi=w)
    check_values("ends - starts", ends.long() - starts.long(), lo=0)
    col = torch.arange(w, device=logits.device)
    valid = (col[None, :] >= starts[:, None].long()) & (col[None, :] < ends[:, None].long())
    # Sorting by the logit with a stable descending sort keeps equal logits in column order, which is
    # position order, so ties go to the lower position. Invalid columns sort last.
    masked = logits.float().masked_fill(~valid, float("-inf"))
    order = torch.sort(masked, dim=1, descending=True, stable=True).indices
    # -inf logits that are valid must still outrank invalid ones: re-sort by validity, stably.
    order = order.gather(1, torch.sort((~valid).gather(1, order).to(torch.int8), dim=1, stable=True).indices)
    kk = min(k, w)
    top = order[:, :kk]
    ok = valid.gather(1, top)
    pos = torch.where(ok, top - starts[:, None].long(), -1).to(torch.int32)
    if kk < k:
        pos = torch.cat([pos, pos.new_full((t, k - kk), -1)], dim=1)
    return pos


def in_column_order(sel: torch.Tensor) -> torch.Tensor:
    """A top-k result [T, k] listed as the kernels list it: each row's positions ascending, the -1 padding last."""
    big = torch.iinfo(sel.dtype).max
    asc = torch.where(sel < 0, big, sel).sort(dim=1).values
    return asc.masked_fill_(asc == big, -1)
