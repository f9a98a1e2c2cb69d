"""Triton kernels of the k-pool indexer (GLM-5.3-Flash, SPEC section 5).

``kpool_update`` is two launches because both halves touch a request's tail state: the first builds
the pools this step completes (reading members that arrived in earlier steps from the tail state), the
second stores every token but a pool's last at its index pos % P (the latest of the step per index: the
members of each request's incomplete pool, and of a pool the step completed, which a rejected speculative
token needs again). One program per token in both; a token finds its pool's other members by position,
since a request's tokens are contiguous and consecutive within the step. When no request has more than one token in the step (a decode
step), a token either completes its pool or joins the tail, never both, and no other token of its request
reads or writes that tail: both halves then run in one launch (``_update_kernel``).

``kpool_expand`` turns pool numbers into token positions and appends the visible tail.
"""
from __future__ import annotations

import torch

from .._triton import next_pow2, tl, triton
from ..cache.write import quantize_groups

if triton is not None:

    @triton.jit
    def _member_rows(i, pos_i, req_i, positions, token_req, num_tokens, member, P: tl.constexpr):
        """Step rows of the members of token i's pool (member m at position pos_i - pos_i % P + m) and
        whether each member is in this step."""
        m_i = pos_i % P
        j = i - m_i + member
        ok = (j >= 0) & (j < num_tokens) & (member < P)
        j_safe = tl.where(ok, j, 0)
        ok &= tl.load(token_req + j_safe, mask=ok, other=-1) == req_i
        ok &= tl.load(positions + j_safe, mask=ok, other=-1) == pos_i - m_i + member
        return j_safe, ok

    @triton.jit
    def _pool_token(i, k, stride_k, gate, stride_g, ape, positions, token_req, num_tokens, block_table, stride_bt,
                    pooled_cache, pooled_block_size, tail_state, state_slot, P: tl.constexpr, PP: tl.constexpr):
        """If token i completes its pool: the pool's quantized key into the pooled cache."""
        pos_i = tl.load(positions + i)
        if pos_i % P == P - 1:
            req_i = tl.load(token_req + i)
            member = tl.arange(0, PP)
            c = tl.arange(0, 128)
            j, here = _member_rows(i, pos_i, req_i, positions, token_req, num_tokens, member, P)
            slot = tl.load(state_slot + req_i).to(tl.int64)
            earlier = (~here) & (member < P - 1)  # members from earlier steps live in the tail state
            tail = tail_state + slot * ((P - 1) * 256) + member[:, None] * 256 + c[None, :]
            key = tl.where(here[:, None],
                           tl.load(k + j.to(tl.int64)[:, None] * stride_k + c[None, :], mask=here[:, None],
                                   other=0.0).to(tl.float32),
                           tl.load(tail, mask=earlier[:, None], other=0.0))
            g = tl.where(here[:, None],
                         tl.load(gate + j.to(tl.int64)[:, None] * stride_g + c[None, :], mask=here[:, None],
                                 other=0.0),
                         tl.load(tail + 128, mask=earlier[:, None], other=0.0))
            g = g + tl.load(ape + member[:, None] * 128 + c[None, :], mask=member[:, None] < P, other=0.0)
            g = tl.where(member[:, None] < P, g, float("-inf"))
            # per channel softmax over the members, weighting their keys
            e = tl.exp(g - tl.max(g, axis=0)[None, :])
            pooled = tl.sum(e * key, axis=0) / tl.sum(e, axis=0)
            q, scale = quantize_groups(tl.reshape(pooled, (1, 128)))
            pool = pos_i // P
            blk = tl.load(block_table + req_i.to(tl.int64) * stride_bt + pool // pooled_block_size).to(tl.int64)
            off = pool % pooled_block_size
            base = pooled_cache + blk * pooled_block_size * 132
            tl.store(base + off * 128 + c, tl.reshape(q, (128,)).to(tl.uint8, bitcast=True))
            tl.store((base + pooled_block_size * 128 + off * 4).to(tl.pointer_type(tl.float32)) + tl.arange(0, 1),
                     scale)

    @triton.jit
    def _tail_token(i, k, stride_k, gate, stride_g, positions, token_req, num_tokens, tail_state, state_slot,
                    P: tl.constexpr):
        """Token i into its request's tail state at index pos % P, unless it is its pool's last member or a later
        token of its request in this step (position pos + P, at i + P: a request's tokens are consecutive) takes
        that index. Members of a pool the step completes are kept too: a rejected speculative token that completed
        the pool is scheduled again and pools them once more."""
        pos_i = tl.load(positions + i)
        req_i = tl.load(token_req + i)
        m_i = pos_i % P
        nxt = i + P
        nxt_ok = nxt < num_tokens
        nxt_safe = tl.where(nxt_ok, nxt, i)
        taken = nxt_ok & (tl.load(token_req + nxt_safe) == req_i) & (tl.load(positions + nxt_safe) == pos_i + P)
        if ((m_i < P - 1) & (taken == 0)).to(tl.int32) != 0:
            c = tl.arange(0, 128)
            slot = tl.load(state_slot + req_i).to(tl.int64)
            dst = tail_state + slot * ((P - 1) * 256) + m_i * 256
            i64 = i.to(tl.int64)
            tl.store(dst + c, tl.load(k + i64 * stride_k + c).to(tl.float32))
            tl.store(dst + 128 + c, tl.load(gate + i64 * stride_g + c))

    @triton.jit
    def _pool_kernel(k, stride_k, gate, stride_g, ape, positions, token_req, num_tokens, block_table, stride_bt,
                     pooled_cache, pooled_block_size, tail_state, state_slot,
                     P: tl.constexpr, PP: tl.constexpr):
        """Grid (num_tokens,): the first half of kpool_update (pools this step completes)."""
        _pool_token(tl.program_id(0), k, stride_k, gate, stride_g, ape, positions, token_req, num_tokens, block_table,
                    stride_bt, pooled_cache, pooled_block_size, tail_state, state_slot, P, PP)

    @triton.jit
    def _tail_kernel(k, stride_k, gate, stride_g, positions, token_req, num_tokens, tail_state, state_slot,
                     P: tl.constexpr):
        """Grid (num_tokens,): the second half (members of new incomplete pools into the tail state)."""
        _tail_token(tl.program_id(0), k, stride_k, gate, stride_g, positions, token_req, num_tokens, tail_state,
                    state_slot, P)

    @triton.jit
    def _update_kernel(k, stride_k, gate, stride_g, ape, positions, token_req, num_tokens, block_table, stride_bt,
                       pooled_cache, pooled_block_size, tail_state, state_slot,
                       P: tl.constexpr, PP: tl.constexpr):
        """Grid (num_tokens,): both halves, for steps where no request has more than one token (module docstring)."""
        i = tl.program_id(0)
        _pool_token(i, k, stride_k, gate, stride_g, ape, positions, token_req, num_tokens, block_table, stride_bt,
                    pooled_cache, pooled_block_size, tail_state, state_slot, P, PP)
        _tail_token(i, k, stride_k, gate, stride_g, positions, token_req, num_tokens, tail_state, state_slot, P)

    @triton.jit
    def _expand_kernel(pool_topk, stride_p, positions, out, stride_out, num_pools,
                       P: tl.constexpr, PP: tl.constexpr, BLOCK: tl.constexpr):
        """Grid (rows, cdiv(num_pools, BLOCK) + 1): the last column block writes the tail."""
        t = tl.program_id(0).to(tl.int64)
        b = tl.program_id(1)
        member = tl.arange(0, PP)
        out_row = out + t * stride_out
        if b * BLOCK < num_pools:
            i = b * BLOCK + tl.arange(0, BLOCK)
            pool = tl.load(pool_topk + t * stride_p + i, mask=i < num_pools, other=-1)
            tok = tl.where(pool[:, None] >= 0, pool[:, None] * P + member[None, :], -1)
            dst = i[:, None] * P + member[None, :]
            tl.store(out_row + dst, tok, mask=(i[:, None] < num_pools) & (member[None, :] < P))
        else:
            visible = tl.load(positions + t) + 1
            n_tail = visible % P
            tail = tl.where(member < n_tail, visible - n_tail + member, -1)
            tl.store(out_row + num_pools * P + member, tail, mask=member < P - 1)


def launch_kpool_update(k, gate, ape, positions, token_req, block_table, pooled_cache, tail_state, state_slot,
                        single_token_requests: bool = False):
    t = k.shape[0]
    kpool = ape.shape[0]
    pp = next_pow2(kpool)
    args = (k, k.stride(0), gate, gate.stride(0), ape, positions, token_req, t, block_table, block_table.stride(0),
            pooled_cache, pooled_cache.shape[1], tail_state, state_slot)
    if single_token_requests:
        _update_kernel[(t,)](*args, P=kpool, PP=pp, num_warps=1)
        return
    _pool_kernel[(t,)](*args, P=kpool, PP=pp, num_warps=1)
    _tail_kernel[(t,)](k, k.stride(0), gate, gate.stride(0), positions, token_req, t, tail_state, state_slot,
                       P=kpool, num_warps=1)


def launch_kpool_expand(pool_topk: torch.Tensor, positions: torch.Tensor, kpool: int, out: torch.Tensor) -> None:
    t, kp = pool_topk.shape
    block = min(256, next_pow2(max(kp, 1)))
    grid = (t, triton.cdiv(kp, block) + 1)
    _expand_kernel[grid](pool_topk, pool_topk.stride(0), positions, out, out.stride(0), kp,
                         P=kpool, PP=next_pow2(kpool), BLOCK=block, num_warps=4)
