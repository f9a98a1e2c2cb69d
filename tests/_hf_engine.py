"""A small serving engine that runs a whole transformers DSA model through dsattn's DSAAttention.

This is the integration an inference engine makes, written out at toy scale: each decoder layer's attention module
keeps its own projections (q_a / q_b, kv_a, the indexer's wq_b / wk / weights_proj / k-pool gate, kv_b, o_proj), and
only the part between them (cache writes, indexer, top-k, sparse MLA over a paged cache) is replaced by one
``DSAAttention.forward`` call. Everything else of the model (embeddings, norms, MoE, GLM-5.3-Flash's hyper-connections)
is transformers' own code, run once over the step's flat, padding-free token batch.

    model = build_model("glm_moe_dsa", num_layers=3)           # transformers' *Model, random weights, fp32
    engine = Engine(model, kv_layout="bf16", block_size=8, ...)
    logits = engine.step([(req_id, new_tokens), ...])         # decodes first, then prefill chunks

Per step the engine:
1. builds one ``Request`` a request (num_cached, num_scheduled, its block table, its k-pool state row) and calls
   ``DSAAttention.prepare`` once: the metadata every layer shares;
2. runs the transformers model over the step's tokens ([1, T] with each token's own position id): its attention
   modules call ``_attention`` below, which derives q (absorbed into the latent space), the latent rows and the
   indexer inputs from the module's own sub-layers (tests/_hf_models.pieces), calls ``DSAAttention.forward`` for the
   layer (its KV cache, its indexer cache and k-pool state; ``indexer=None`` on GLM-5's shared layers) and maps the
   latent output back through kv_b_proj's value half and o_proj;
3. returns the logits of every token (a random lm_head over the final hidden states), and keeps each layer's
   selection as positions (``selections``), which ``Reference`` can impose on transformers' own run.

The caches start poisoned (NaN latent rows, 0xFF indexer bytes, NaN k-pool state), blocks come from a shuffled free
list, and a finished request's blocks and state row go back to it: a read of a slot the request's steps did not write
shows up, as NaN or as another request's rows.

transformers' modules run on the CPU in fp32; the backend runs on ``device`` (the kernels on a GPU, the reference ops
or the interpreted kernels on a CPU).
"""
from __future__ import annotations

import dataclasses

import torch

import _hf_models as hf
from dsattn.backend.attention import DSAAttention
from dsattn.backend.indexer import IndexerInputs
from dsattn.backend.metadata import Request
from dsattn.backend.synthetic import indices_as_slots
from dsattn.config import from_hf_config
from dsattn.formats import KVLayout, new_indexer_cache, new_kv_cache, pack_latent_rows, unpack_latent_rows


def _model_class(kind):
    if kind == "deepseek_v32":
        from transformers.models.deepseek_v32.modeling_deepseek_v32 import DeepseekV32Model
        return DeepseekV32Model
    if kind == "glm_moe_dsa":
        from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import GlmMoeDsaModel
        return GlmMoeDsaModel
    from transformers.models.glm5_next.modeling_glm5_next import Glm5NextTextModel
    return Glm5NextTextModel


class Model(torch.nn.Module):
    """transformers' decoder stack of a DSA model and a random lm_head (GLM-5.3-Flash's text model has no causal-LM
    class of its own in transformers 5.24.0, so every kind gets its head here)."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder
        self.config = decoder.config
        self.lm_head = torch.nn.Linear(self.config.hidden_size, self.config.vocab_size, bias=False)

    def forward(self, input_ids, position_ids, cache=None):
        kw = {"use_cache": cache is not None, **(hf.cache_kw(cache) if cache is not None else {})}
        h = self.decoder(input_ids=input_ids, position_ids=position_ids, **kw).last_hidden_state
        return self.lm_head(h)[0]


@torch.no_grad()
def build_model(kind: str, *, num_layers: int, seed: int = 0, **config) -> Model:
    """A tiny random model of the kind: tests/_hf_models' tiny attention geometry, num_layers decoder layers."""
    torch.manual_seed(seed)
    if kind == "glm5_next":
        config.setdefault("mlp_layer_types", ["dense"] * min(1, num_layers) + ["sparse"] * max(num_layers - 1, 0))
    cfg = hf.tiny_config(kind, num_layers=num_layers, **config)
    model = Model(_model_class(kind)(cfg)).float().eval()
    hf._randomize_(model)
    return model


@torch.no_grad()
def reference_generate(model: Model, prompt: list[int], new_tokens: int) -> tuple[list[int], torch.Tensor]:
    """transformers' greedy continuation of one prompt (its own cache, one token a step): (prompt + new_tokens
    tokens, the logits at each of them)."""
    cache = hf.new_hf_cache(model.config)
    tokens = list(prompt)
    logits = [model(torch.tensor(prompt)[None], torch.arange(len(prompt))[None], cache=cache)]
    for _ in range(new_tokens):
        tokens.append(int(logits[-1][-1].argmax()))
        p = len(tokens) - 1
        logits.append(model(torch.tensor([[tokens[-1]]]), torch.tensor([[p]]), cache=cache))
    return tokens, torch.cat(logits)


@dataclasses.dataclass
class _Req:
    blocks: list[int]
    state_slot: int
    num_cached: int = 0


class Engine:
    """Serves `model` through one DSAAttention (see the module docstring)."""

    def __init__(self, model: Model, *, kv_layout: str, block_size: int, num_blocks: int, max_num_tokens: int,
                 max_num_reqs: int, max_model_len: int, decode_threshold: int = 1, device="cpu", seed: int = 0):
        self.model, self.cfg = model, model.config
        self.geometry = from_hf_config(self.cfg.to_dict())
        self.kind = hf.kind_of(self.cfg)
        self.layout = KVLayout(kv_layout)
        self.dev = torch.device(device)
        self.block_size, self.kpool = block_size, self.geometry.kpool
        self.backend = DSAAttention(self.geometry, tp=1, kv_layout=self.layout, block_size=block_size,
                                    max_num_tokens=max_num_tokens, max_num_reqs=max_num_reqs,
                                    max_model_len=max_model_len, decode_threshold=decode_threshold, device=self.dev)
        layers = self.model.decoder.layers
        self.full = [not self.geometry.is_shared_layer(i) for i in range(len(layers))]
        self.kv = [self._poisoned_kv(num_blocks) for _ in layers]
        self.icache = [new_indexer_cache(num_blocks, block_size // self.kpool, self.dev).fill_(255) if f else None
                       for f in self.full]
        self.tail = [torch.full((max_num_reqs, self.kpool - 1, 256), float("nan"), device=self.dev)
                     if f and self.kpool > 1 else None for f in self.full]
        gen = torch.Generator().manual_seed(seed)
        self.free_blocks = torch.randperm(num_blocks, generator=gen).tolist()
        self.block_refs = [0] * num_blocks  # requests holding each block (prefix-cache hits share blocks)
        self.free_states = list(range(max_num_reqs))
        self.requests: dict[object, _Req] = {}
        self._step_start: dict[object, int] = {}  # the last step's first position of each of its requests
        self._saved_tail: dict[object, list[torch.Tensor]] = {}  # their k-pool state rows before that step
        self._step = self._positions = self._selected = None
        self._slot_pos: list[dict[int, int]] = []  # per step token: its request's cache slots -> positions
        self.selections: list[torch.Tensor | None] = [None] * len(layers)  # the step's top-k of each layer

    def _poisoned_kv(self, num_blocks):
        c = new_kv_cache(num_blocks, self.block_size, self.layout, self.geometry.d_qk, self.dev)
        return c.fill_(float("nan")) if self.layout is KVLayout.BF16 else c.fill_(255)

    def finish(self, req_id) -> None:
        """A finished request's state row and the blocks no other request holds go back to the free lists (front:
        reused first)."""
        r = self.requests.pop(req_id)
        for b in r.blocks:
            self.block_refs[b] -= 1
        self.free_blocks[:0] = [b for b in r.blocks if not self.block_refs[b]]
        self.free_states.insert(0, r.state_slot)
        for t in self.tail:  # a reused state row holds the previous request's pool members: poison it
            if t is not None:
                t[r.state_slot] = float("nan")

    def share_prefix(self, req_id, parent_id, num_tokens: int) -> None:
        """A prefix-cache hit: a new request whose first num_tokens (whole blocks) are the running request parent_id's.
        It holds the parent's blocks of them and starts with num_tokens cached; its k-pool state row stays poisoned
        (block_size is a multiple of P: no incomplete pool to read)."""
        assert num_tokens % self.block_size == 0 and req_id not in self.requests
        blocks = self.requests[parent_id].blocks[:num_tokens // self.block_size]
        for b in blocks:
            self.block_refs[b] += 1
        self.requests[req_id] = _Req(blocks=list(blocks), state_slot=self.free_states.pop(0), num_cached=num_tokens)

    @torch.no_grad()
    def step(self, scheduled: list[tuple[object, list[int]]]) -> torch.Tensor:
        """One step over [(request id, its tokens scheduled now), ...] (decodes first; a new id starts a request).
        Returns the logits of every scheduled token [T, vocab], in order."""
        requests, ids, positions = [], [], []
        for req_id, toks in scheduled:
            r = self.requests.get(req_id)
            if r is None:
                r = self.requests[req_id] = _Req(blocks=[], state_slot=self.free_states.pop(0))
            end = r.num_cached + len(toks)
            while len(r.blocks) * self.block_size < end:
                r.blocks.append(self.free_blocks.pop(0))
                self.block_refs[r.blocks[-1]] += 1
            requests.append(Request(r.num_cached, len(toks), torch.tensor(r.blocks, dtype=torch.int32),
                                    state_slot=r.state_slot))
            self._step_start[req_id] = r.num_cached
            self._saved_tail[req_id] = [t[r.state_slot].clone() for t in self.tail if t is not None]
            ids.extend(toks)
            positions.extend(range(r.num_cached, end))
        self._step = self.backend.prepare(requests)
        self._positions = torch.tensor(positions)
        bs = self.block_size
        lookup = {rid: {b * bs + o: j * bs + o for j, b in enumerate(self.requests[rid].blocks) for o in range(bs)}
                  for rid, _ in scheduled}  # each request's cache slots -> its positions
        self._slot_pos = [lookup[rid] for rid, toks in scheduled for _ in toks]
        modules = [layer.self_attn for layer in self.model.decoder.layers]
        for i, m in enumerate(modules):  # for this step only: the model stays transformers' own outside it
            m.forward = (lambda i, m: lambda hidden_states, *a, **kw: self._attention(i, m, hidden_states))(i, m)
        try:
            logits = self.model(torch.tensor(ids)[None], self._positions[None])
        finally:
            for m in modules:
                del m.forward
        for (req_id, toks) in scheduled:
            self.requests[req_id].num_cached += len(toks)
        return logits

    def rollback(self, req_id, rejected: int) -> int:
        """The last `rejected` tokens the request's last step scheduled were rejected (speculative drafts): the
        request goes back to its first rejected position, which it is scheduled from again (its rows there are
        rewritten). With a k-pool indexer, a rollback deeper than kpool_update's tail state keeps right (more than
        P - f % P tokens, f the first rejected position) restores the state row saved before the step and goes back
        to the step's first position: the step's accepted tokens are scheduled again. Returns the position the
        request continues from."""
        r = self.requests[req_id]
        first, start, p = r.num_cached - rejected, self._step_start[req_id], self.kpool
        assert start <= first, "only the last step's tokens can be rejected"
        if p > 1 and rejected > p - first % p:
            for t, saved in zip([t for t in self.tail if t is not None], self._saved_tail[req_id]):
                t[r.state_slot] = saved
            first = start
        r.num_cached = first
        return first

    def _selection_positions(self) -> torch.Tensor:
        """The backend's top-k of the step's tokens as positions in each token's request [T, width], -1 padded."""
        slots = indices_as_slots(self.backend, self._step, self.backend.indices(self._step)).cpu()
        return torch.tensor([[lookup[s] if s >= 0 else -1 for s in row] for row, lookup in
                             zip(slots.tolist(), self._slot_pos)], dtype=torch.int64)

    def _attention(self, i, module, hidden_states):
        """Layer i's attention for the step's T tokens: hidden_states [1, T, hidden] -> [1, T, hidden]."""
        p = hf.pieces(module, hidden_states, self._positions)
        dev = self.dev
        ix = None
        if self.full[i]:
            kp = self.kpool > 1
            ix = IndexerInputs(q=p.iq.bfloat16().to(dev), weights=p.iw.float().contiguous().to(dev), k=p.ik.to(dev),
                               cache=self.icache[i], gate=p.gate.float().contiguous().to(dev) if kp else None,
                               ape=module.indexer.index_kpool_compress_ape.detach().float().contiguous().to(dev)
                               if kp else None, tail_state=self.tail[i])
        q = p.q_latent.bfloat16().to(dev)
        out = torch.full((q.shape[0], q.shape[1], 512), float("nan"), dtype=torch.bfloat16, device=dev)
        self.backend.forward(self._step, q, p.latent.to(dev), self.kv[i], ix, layer=i, out=out)
        if self.full[i]:
            self._selected = self._selection_positions()
        self.selections[i] = self._selected
        y = hf.project_output(module, out.float().cpu())[None]
        # what the model's decoder layer unpacks: (output, weights) or, where the layer passes its top-k on to a
        # shared layer, (output, weights, top-k); the backend keeps its own indices for the shared layers
        return (y, None) if self.kind == "deepseek_v32" else (y, None, None)


class Reference:
    """transformers alone, stepped beside the engine: each request its own DynamicCache, batch 1.

    With ``forced`` selections (the engine's, one [S, width] position tensor a layer for the request's S tokens of
    the step) each full layer's indexer output is replaced by them, so that the model attends to the keys the engine
    attended to; what the indexer chose itself is kept in ``own`` (a layer's [S, width], transformers' format), and
    the first attention layer's input rows of each request in ``first_inputs``. ``rollback`` drops a request's
    rejected tokens by rebuilding its cache from the accepted ones (on their recorded selections), which depends on
    nothing of the cache classes' own crop support."""

    def __init__(self, model: Model, kv_layout: str | None = None):
        self.model = model
        self.layout = None if kv_layout is None else KVLayout(kv_layout)
        self.caches: dict[object, object] = {}
        # per request: its tokens so far, and per layer the selection each of them was run with (forced runs)
        self.history: dict[object, tuple[list[int], list[list[torch.Tensor]]]] = {}
        self.forced: list[torch.Tensor] | None = None
        layers = model.decoder.layers
        self.own: list[torch.Tensor | None] = [None] * len(layers)
        self.first_inputs: dict[object, torch.Tensor] = {}  # per request: the first attention layer's input rows
        self._req = None
        layers[0].self_attn.register_forward_pre_hook(self._first_input, with_kwargs=True)
        for layer in layers:
            layer.self_attn.kv_a_layernorm.register_forward_hook(self._stored_latent)
        for i, layer in enumerate(layers):
            if getattr(layer.self_attn, "indexer", None) is not None:
                layer.self_attn.indexer.register_forward_hook((lambda i: lambda mod, args, out: self._hook(i, out))(i))

    def _first_input(self, module, args, kwargs):
        if self._req is None:  # the model run by the engine (its hooks fire too)
            return
        x = (args[0] if args else kwargs["hidden_states"])[0]
        prev = self.first_inputs.get(self._req, x[:0])
        self.first_inputs[self._req] = torch.cat([prev, x])

    def _stored_latent(self, module, args, out):
        """With kv_layout: the latent rows' first 512 channels (kv_a_layernorm's output) as the cache stores them,
        rounded to the layout (bf16, or fp8 with the group scales of dsattn.formats) and read back: transformers then
        attends over what the engine's cache holds, and only q's bf16 rounding and the RoPE channels stay apart."""
        if self._req is None or self.layout is None:  # the engine's own run (pieces of the unrounded rows)
            return None
        rows = out.reshape(-1, out.shape[-1]).float()
        back = unpack_latent_rows(pack_latent_rows(rows, self.layout), self.layout)[:, :rows.shape[-1]]
        return back.reshape(out.shape).to(out.dtype)

    def _hook(self, i, out):
        self.own[i] = out[0]
        if self.forced is None:
            return None
        sel = self.forced[i]
        # -1 padding as duplicates of the row's first entry: transformers scatters the entries into a mask
        sel = torch.where(sel >= 0, sel, sel[:, :1])
        return sel[None].to(out.dtype)

    @torch.no_grad()
    def run(self, req_id, tokens: list[int], start: int, forced: list[torch.Tensor] | None = None) -> torch.Tensor:
        """The request's tokens at positions start.. (its cache holds the earlier ones) -> their logits."""
        cache = self.caches.setdefault(req_id, hf.new_hf_cache(self.model.config))
        toks, rows = self.history.setdefault(req_id, ([], [[] for _ in self.own]))
        assert start == len(toks), f"request {req_id}: {len(toks)} tokens cached, not {start}"
        # a request's runs are all forced or none (rollback and share_prefix replay the recorded selections)
        assert all(len(rw) == (len(toks) if forced is not None and forced[i] is not None else 0)
                   for i, rw in enumerate(rows)), f"request {req_id}: forced and unforced runs mixed"
        toks.extend(tokens)
        for i, sel in enumerate(forced or []):
            if sel is not None:
                rows[i].extend(sel)
        self.forced, self._req = forced, req_id
        try:
            return self.model(torch.tensor(tokens)[None], torch.arange(start, start + len(tokens))[None], cache=cache)
        finally:
            self.forced = self._req = None

    @torch.no_grad()
    def share_prefix(self, req_id, parent_id, num_tokens: int) -> None:
        """A new request starting with the parent's first num_tokens: its own cache, built from them in one chunk on
        the parent's recorded selections."""
        toks, rows = self.history[parent_id]
        forced = [torch.stack(r[:num_tokens]) if r else None for r in rows]
        self.run(req_id, toks[:num_tokens], 0, forced if any(f is not None for f in forced) else None)

    @torch.no_grad()
    def rollback(self, req_id, keep: int) -> None:
        """The request keeps its first `keep` tokens: its cache is rebuilt from them in one chunk, each on the
        selections it was run with (so the rebuilt cache holds what the step-by-step runs wrote)."""
        toks, rows = self.history.pop(req_id)
        self.caches.pop(req_id)
        self.first_inputs.pop(req_id)
        forced = [torch.stack(r[:keep]) if r else None for r in rows]
        if keep:
            self.run(req_id, toks[:keep], 0, forced if any(f is not None for f in forced) else None)
