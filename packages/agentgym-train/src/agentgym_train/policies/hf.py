"""``hf``: any local Hugging Face causal LM directory, batched generation with transformers."""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agentgym.errors import AgentGymError
from agentgym_train.models.chat import ChatFormat
from agentgym_train.models.device import default_device
from agentgym_train.models.loading import load_model, load_tokenizer
from agentgym_train.models.logprobs import PLAIN_LM_HEAD_TYPES, cache_argument, has_plain_lm_head, pad_rows
from agentgym_train.policies.base import BasePolicy, Generation, Request, Sampling
from agentgym_train.policies.choices import Choices
from agentgym_train.policies.decoding import row_uniforms, sample_tokens
from agentgym_train.policies.kv_cache import Kept, Layout, new_cache


class HFPolicy(BasePolicy):
    """Batched sampling from a causal LM: left padding, per-turn ``max_new_tokens``, temperature and
    top-p, stop on the chat template's end-of-turn token; returns the sampled ids and their
    log-probabilities under the model (before temperature and top-p, as vLLM reports them).

    ``model`` is a directory, or an already loaded model (the trainer passes its own) together with
    ``tokenizer``; ``dtype`` None is ``auto`` (see :func:`~agentgym_train.models.device.resolve_dtype`).
    With ``kv_reuse`` (the default) the model types with a plain LM head
    (:data:`~agentgym_train.models.logprobs.PLAIN_LM_HEAD_TYPES`) keep each live episode's keys and values
    between calls (under ``Request.cache_key``) and run only a turn's new tokens; memory is one
    batch of contexts, dropped as episodes end.
    """

    name = "hf"
    constrains = True  # honours Request.choices (constrained decoding)

    def __init__(
        self,
        model: Any = None,
        *,
        tokenizer: Any = None,
        device: str | None = None,
        dtype: str | None = None,
        chat_template: str | None = None,
        max_batch: int = 64,
        max_batch_tokens: int = 32768,
        fast: bool = True,
        kv_reuse: bool = True,
        **_: Any,
    ):
        if model is None or model == "":
            raise AgentGymError("--policy hf needs --model PATH (a local Hugging Face model directory)")
        self.device = device or default_device()
        if isinstance(model, (str, Path)):
            self.tokenizer = tokenizer or load_tokenizer(model)
            self.model = load_model(model, dtype=dtype, device=self.device)
            self.model_path = str(model)
        else:
            if tokenizer is None:
                raise AgentGymError("HFPolicy with a loaded model needs its tokenizer too")
            self.model, self.tokenizer, self.model_path = model, tokenizer, getattr(model, "name_or_path", "")
        self.chat = ChatFormat(self.tokenizer, chat_template=chat_template)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.chat.eot_id
        self.max_batch = max_batch
        self.max_batch_tokens = max_batch_tokens
        self.fast = fast and has_plain_lm_head(self.model)
        # each live episode's KV cache, from the last call (see ``_generate_right_padded``)
        self.kv_reuse = kv_reuse
        self._kept: dict[Hashable, Kept] = {}

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
        """Requests of similar length go together: each sub-batch is padded to its longest
        prompt, so sorting by length and bounding ``rows x longest`` by ``max_batch_tokens``
        (and rows by ``max_batch``) saves the prefill work padding would waste — multi-turn
        prompts of one batch range from one turn to twenty."""
        if sampling.seed is not None:
            import torch

            torch.manual_seed(sampling.seed)
        prompts = [
            r.prompt_ids if r.prompt_ids is not None else self.chat.start(r.messages) for r in requests
        ]
        keys = [r.cache_key for r in requests]
        seeds = [r.seed for r in requests]
        choices = [self._choice_ids(r.choices) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: len(prompts[i]), reverse=True)
        out: list[Generation | None] = [None] * len(requests)
        kept: dict[Hashable, Kept] = {}
        start = 0
        while start < len(order):
            longest = len(prompts[order[start]]) + sampling.max_new_tokens
            rows = max(1, min(self.max_batch, self.max_batch_tokens // max(longest, 1)))
            group = order[start : start + rows]
            gens = self._generate(
                [prompts[i] for i in group],
                sampling,
                [keys[i] for i in group],
                kept,
                [seeds[i] for i in group],
                Choices([choices[i] for i in group]),
            )
            for i, gen in zip(group, gens, strict=True):
                out[i] = gen
            start += rows
        # Only this call's episodes are kept: an episode not in it has ended (the rollout asks for
        # every live episode each turn), so memory stays one batch of contexts.
        self._kept = kept
        return [g for g in out if g is not None]

    def _generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: Sampling,
        keys: Sequence[Hashable | None],
        kept: dict[Hashable, Kept],
        seeds: Sequence[int | None],
        choices: Choices,
    ) -> list[Generation]:
        if self.fast:
            return self._generate_right_padded(prompts, sampling, keys, kept, seeds, choices)
        if choices.any:
            raise AgentGymError(
                f"constrained decoding needs a model type with a plain LM head ({', '.join(sorted(PLAIN_LM_HEAD_TYPES))})"
            )
        return self._generate_hf(prompts, sampling)  # transformers' generate: the shared stream only

    def _choice_ids(self, choices: Sequence[str] | None) -> list[list[int]] | None:
        """Each allowed reply's ids with the end-of-turn token (generation stops on it)."""
        return None if not choices else [self.chat.encode(c) + [self.chat.eot_id] for c in choices]

    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        """The model in eval mode without autograd, put back in its training mode after."""
        import torch

        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                yield
        finally:
            self.model.train(was_training)

    # -- our sampling loop --------------------------------------------------------------------
    def _generate_right_padded(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: Sampling,
        keys: Sequence[Hashable | None],
        kept: dict[Hashable, Kept],
        seeds: Sequence[int | None],
        choices: Choices,
    ) -> list[Generation]:
        """Our own sampling loop, with each episode's KV cache carried from turn to turn, and each
        row's tokens drawn from its request's own seeded stream when every request has a seed.

        Earlier turns' keys and values (already rotated for their positions) are copied into the
        cache, only the new prompt tokens are run, each at its own position, and the pad slots are
        masked (see :class:`~agentgym_train.policies.kv_cache.Layout`). A turn's prefill is then its new observation instead of the
        whole conversation again, which grows every turn. With nothing cached the prefill runs
        *without* a mask: under causal attention no real token sees the pads after it, so SDPA
        takes its fused causal kernel."""
        layout = self._layout(prompts, keys)
        ids, attention = self._prefill_inputs(prompts, layout)
        cache = self._cache_with_context(layout, layout.C + layout.S + sampling.max_new_tokens)
        uniforms = row_uniforms(seeds, sampling, self.device)
        with self._inference():
            new_ids, new_lps = self._decode(ids, attention, layout, cache, sampling, uniforms, choices)
        gens = self._generations(new_ids.cpu(), new_lps.cpu(), len(prompts))
        if self.kv_reuse:
            self._keep(kept, keys, prompts, gens, layout, cache)
        return gens

    def _reusable(self, key: Hashable | None, prompt: Sequence[int]) -> tuple[int, Kept | None]:
        """How many of the prompt's first tokens an earlier turn of the episode has in the KV cache
        (never all: the last prompt token is run to give the first logits)."""
        kept = self._kept.get(key) if self.kv_reuse and key is not None else None
        if kept is None:
            return 0, None
        n = min(len(kept.tokens), len(prompt) - 1)
        if n <= 0 or list(prompt[:n]) != kept.tokens[:n]:
            return 0, None
        return n, kept

    def _layout(self, prompts: Sequence[Sequence[int]], keys: Sequence[Hashable | None]) -> Layout:
        import torch

        reuse = [self._reusable(k, p) for k, p in zip(keys, prompts, strict=True)]
        cached = torch.tensor([n for n, _ in reuse])
        lens = torch.tensor([len(p) for p in prompts])
        new = lens - cached
        return Layout(reuse, cached, lens, new, int(cached.max()), int(new.max()))

    def _prefill_inputs(self, prompts: Sequence[Sequence[int]], layout: Layout) -> tuple[Any, Any]:
        """The new prompt tokens, right-padded, and the attention mask over all ``C + S`` slots."""
        import torch

        ids, new_mask = pad_rows(
            [p[n:] for p, (n, _) in zip(prompts, layout.reuse, strict=True)], self.pad_id
        )
        context = torch.arange(layout.C)[None, :] < layout.cached[:, None]
        attention = torch.cat([context.long(), new_mask.long()], 1).to(self.device)
        return ids, attention

    def _cache_with_context(self, layout: Layout, capacity: int) -> Any:
        """A new KV cache holding each row's cached keys and values in its first ``C`` slots."""
        cache = new_cache(self.model.config, capacity)
        donor = layout.reuse[int(layout.cached.argmax())][1]  # the longest cached row: shapes, dtype
        if donor is None:
            return cache
        B = len(layout.reuse)
        for layer, (k0, v0) in enumerate(donor.kv):
            k = k0.new_zeros((B, k0.shape[0], layout.C, k0.shape[2]))
            v = v0.new_zeros((B, v0.shape[0], layout.C, v0.shape[2]))
            for row, (n, entry) in enumerate(layout.reuse):
                if n:
                    k[row, :, :n], v[row, :, :n] = entry.kv[layer][0][:, :n], entry.kv[layer][1][:, :n]
            cache.update(k.to(self.device), v.to(self.device), layer)
        return cache

    def _decode(
        self,
        ids: Any,
        attention: Any,
        layout: Layout,
        cache: Any,
        sampling: Sampling,
        uniforms: Any,
        choices: Choices,
    ) -> tuple[Any, Any]:
        """Prefill the new prompt tokens, then sample one token per row per step until every row has
        stopped or ``max_new_tokens``: ``B x T`` sampled ids (``pad_id`` after a row's stop) and
        their log-probabilities under the model (a constrained row draws from the tokens its
        ``choices`` allow)."""
        import torch

        B, dev = ids.shape[0], self.device
        decoder, head = self.model.get_decoder(), self.model.get_output_embeddings()
        cache_kw = {cache_argument(decoder): cache}
        stops = torch.tensor(self.chat.stop_ids, device=dev)
        hidden = decoder(
            input_ids=ids.to(dev),
            attention_mask=attention if layout.C else None,
            position_ids=(layout.cached[:, None] + torch.arange(layout.S)[None, :]).to(dev),
            use_cache=True,
            **cache_kw,
        ).last_hidden_state
        last = hidden[torch.arange(B, device=dev), (layout.new - 1).to(dev)]  # each row's last prompt token
        new_ids, new_lps = [], []
        done = torch.zeros(B, dtype=torch.bool, device=dev)
        for t in range(sampling.max_new_tokens):
            logits = head(last).float()
            allowed = choices.allowed(logits) if choices.any else logits
            token = sample_tokens(allowed, sampling, None if uniforms is None else uniforms[:, t])
            if choices.any:
                choices.advance(token.tolist())
            token = torch.where(done, torch.full_like(token, self.pad_id), token)
            new_ids.append(token)
            new_lps.append(torch.log_softmax(logits, -1).gather(-1, token[:, None])[:, 0])
            done |= torch.isin(token, stops)
            if bool(done.all()) or t == sampling.max_new_tokens - 1:
                break
            attention = torch.cat([attention, torch.ones(B, 1, dtype=torch.long, device=dev)], 1)
            last = decoder(
                input_ids=token[:, None],
                attention_mask=attention,
                position_ids=(layout.lens.to(dev) + t)[:, None],
                use_cache=True,
                **cache_kw,
            ).last_hidden_state[:, -1]
        return torch.stack(new_ids, 1), torch.stack(new_lps, 1)

    def _keep(
        self,
        kept: dict[Hashable, Kept],
        keys: Sequence[Hashable | None],
        prompts: Sequence[Sequence[int]],
        gens: Sequence[Generation],
        layout: Layout,
        cache: Any,
    ) -> None:
        """Keep each row's keys and values for its episode's next turn: every prompt token and every
        fed reply token (all but the last sampled one), the pad slots left out."""
        import torch

        C, S = layout.C, layout.S
        for row, (k, p, g) in enumerate(zip(keys, prompts, gens, strict=True)):
            if k is None or not g.token_ids:
                continue
            fed = len(g.token_ids) - 1
            slots = torch.cat(
                [
                    torch.arange(int(layout.cached[row])),
                    C + torch.arange(int(layout.new[row])),
                    C + S + torch.arange(fed),
                ]
            ).to(self.device)
            kept[k] = Kept(
                tokens=list(p) + g.token_ids[:fed],
                kv=[
                    (layer.keys[row].index_select(1, slots), layer.values[row].index_select(1, slots))
                    for layer in cache.layers
                ],
            )

    # -- transformers' generate ---------------------------------------------------------------
    def _generate_hf(self, prompts: Sequence[Sequence[int]], sampling: Sampling) -> list[Generation]:
        """``transformers``' ``generate`` on left-padded prompts, for models without a plain LM
        head."""
        import torch

        input_ids, attention = pad_rows(prompts, self.pad_id, left=True)
        kwargs: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens,
            "eos_token_id": self.chat.stop_ids,
            "pad_token_id": self.pad_id,
            "return_dict_in_generate": True,
            "output_logits": True,
        }
        if sampling.greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
        with self._inference():
            result = self.model.generate(
                input_ids=input_ids.to(self.device), attention_mask=attention.long().to(self.device), **kwargs
            )
        new = result.sequences[:, input_ids.shape[1] :].cpu()
        logits = torch.stack(result.logits, dim=1).float()  # B x T x V
        logprobs = (
            torch.log_softmax(logits, dim=-1)
            .gather(-1, new.to(logits.device).unsqueeze(-1))
            .squeeze(-1)
            .cpu()
        )
        return self._generations(new, logprobs, len(prompts))

    def _generations(self, new: Any, logprobs: Any, rows: int) -> list[Generation]:
        """Cut each row after its first stop token."""
        stops = set(self.chat.stop_ids)
        gens = []
        for row in range(rows):
            ids = new[row].tolist()
            end = next((k + 1 for k, t in enumerate(ids) if t in stops), None)
            stopped = end is not None
            ids = ids[:end] if stopped else ids
            lps = logprobs[row, : len(ids)].tolist()
            text = self.tokenizer.decode(ids[:-1] if stopped else ids, skip_special_tokens=False)
            gens.append(Generation(text=text, token_ids=ids, logprobs=lps, stopped=stopped))
        return gens
