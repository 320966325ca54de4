"""``hf``: any local Hugging Face causal LM directory, batched generation with transformers."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.errors import AgentGymError
from agentgym_train.chat import ChatFormat
from agentgym_train.policies.base import Generation, Request, Sampling


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer of a model directory.

    ``AutoTokenizer`` picks the class from the model's config; a tokenizer trained with the
    ``tokenizers`` library next to a qwen2 config then loads as ``Qwen2Tokenizer`` and yields no
    ids, so an empty encoding falls back to the generic fast tokenizer over ``tokenizer.json``.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = str(path)
    if not Path(path).exists():
        raise AgentGymError(
            f"model path {path!r} does not exist (models are never downloaded; pass a local directory)"
        )
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # noqa: BLE001
        if not (Path(path) / "tokenizer.json").exists():
            raise AgentGymError(f"cannot load a tokenizer from {path}: {exc}") from exc
        tok = None
    if tok is None or not tok("hello world", add_special_tokens=False)["input_ids"]:
        tok = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    return tok


#: Model types whose logits are the output embedding of the decoder's last hidden state, nothing
#: more (no soft-capping or scaling): our right-padded sampling loop is exact for them.
FAST = frozenset({"qwen2", "qwen3", "llama", "mistral"})


@dataclass
class _Kept:
    """An episode's context after a turn: its token ids and, per layer, their keys and values
    (``heads x tokens x head_dim``, the batch row taken out)."""

    tokens: list[int]
    kv: list[tuple[Any, Any]]


@functools.cache
def _buffered_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class BufferedLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys and values are views of preallocated buffers."""

        def __init__(self, capacity: int):
            super().__init__()
            self.capacity, self.length = capacity, 0

        def lazy_initialization(self, key_states: Any, value_states: Any, *_: Any) -> None:
            batch, heads, _, dim = key_states.shape
            self.device = key_states.device
            self.k_buf = key_states.new_empty((batch, heads, self.capacity, dim))
            self.v_buf = value_states.new_empty((batch, heads, self.capacity, value_states.shape[-1]))
            self.is_initialized = True

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            end = self.length + key_states.shape[-2]
            if end > self.capacity:
                raise RuntimeError(f"KV buffer of {self.capacity} slots cannot take {end}")
            self.k_buf[:, :, self.length : end] = key_states
            self.v_buf[:, :, self.length : end] = value_states
            self.length = end
            self.keys, self.values = self.k_buf[:, :, :end], self.v_buf[:, :, :end]
            return self.keys, self.values

        def get_seq_length(self, *_: Any) -> int:
            return self.length

    return BufferedLayer


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class HFPolicy:
    """Batched sampling from a causal LM: left padding, per-turn ``max_new_tokens``, temperature and
    top-p, stop on the chat template's end-of-turn token; returns the sampled ids and their
    log-probabilities under the model (before temperature and top-p, as vLLM reports them).

    ``model`` is a directory, or an already loaded model (the trainer passes its own) together with
    ``tokenizer``. With ``kv_reuse`` (the default) the model types in ``FAST`` keep each live
    episode's keys and values between calls (under ``Request.cache_key``) and run only a turn's
    new tokens; memory is one batch of contexts, dropped as episodes end.
    """

    name = "hf"

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
        import torch
        from transformers import AutoModelForCausalLM

        if model is None:
            raise AgentGymError("the hf policy needs --model PATH (a local Hugging Face model directory)")
        self.device = device or default_device()
        if isinstance(model, (str, Path)):
            self.tokenizer = tokenizer or load_tokenizer(model)
            torch_dtype = (
                getattr(torch, dtype)
                if dtype
                else (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
            )
            try:
                self.model = AutoModelForCausalLM.from_pretrained(
                    str(model), dtype=torch_dtype, local_files_only=True
                )
            except OSError as exc:
                raise AgentGymError(f"cannot load a model from {model}: {exc}") from exc
            self.model.to(self.device)
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
        self.fast = fast and getattr(self.model.config, "model_type", None) in FAST
        # each live episode's KV cache, from the last call (see ``_generate_right_padded``)
        self.kv_reuse = kv_reuse
        self._kept: dict[Hashable, _Kept] = {}

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
        order = sorted(range(len(requests)), key=lambda i: len(prompts[i]), reverse=True)
        out: list[Generation | None] = [None] * len(requests)
        kept: dict[Hashable, _Kept] = {}
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
        kept: dict[Hashable, _Kept],
        seeds: Sequence[int | None],
    ) -> list[Generation]:
        if self.fast:
            return self._generate_right_padded(prompts, sampling, keys, kept, seeds)
        return self._generate_hf(prompts, sampling)  # transformers' generate: the shared stream only

    def _reusable(self, key: Hashable | None, prompt: Sequence[int]) -> tuple[int, _Kept | None]:
        """How many of the prompt's first tokens an earlier turn of the episode has in the KV cache
        (never all: the last prompt token is run to give the first logits)."""
        kept = self._kept.get(key) if self.kv_reuse and key is not None else None
        if kept is None:
            return 0, None
        n = min(len(kept.tokens), len(prompt) - 1)
        if n <= 0 or list(prompt[:n]) != kept.tokens[:n]:
            return 0, None
        return n, kept

    def _generate_right_padded(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: Sampling,
        keys: Sequence[Hashable | None],
        kept: dict[Hashable, _Kept],
        seeds: Sequence[int | None],
    ) -> list[Generation]:
        """Our own sampling loop, with each episode's KV cache carried from turn to turn, and each
        row's tokens drawn from its request's own seeded stream when every request has a seed.

        A row's slots are ``[its cached context | pad | its new prompt tokens | pad | decoded]``:
        earlier turns' keys and values (already rotated for their positions) are copied in, only
        the new prompt tokens are run, each at its own position, and the pad slots are masked. A
        turn's prefill is then its new observation instead of the whole conversation again (the
        conversation grows every turn, so this was most of the time). With nothing cached the
        prefill runs *without* a mask: under causal attention no real token sees the pads after
        it, so SDPA takes its fused causal kernel."""
        import torch

        B, dev = len(prompts), self.device
        reuse = [self._reusable(k, p) for k, p in zip(keys, prompts, strict=True)]
        cached = torch.tensor([n for n, _ in reuse])
        lens = torch.tensor([len(p) for p in prompts])
        new = lens - cached
        C, S = int(cached.max()), int(new.max())
        ids = torch.full((B, S), self.pad_id, dtype=torch.long)
        for row, p in enumerate(prompts):
            ids[row, : int(new[row])] = torch.tensor(p[int(cached[row]) :], dtype=torch.long)
        attention = (
            torch.cat(
                [torch.arange(C)[None, :] < cached[:, None], torch.arange(S)[None, :] < new[:, None]], 1
            )
            .long()
            .to(dev)
        )
        rows = torch.arange(B, device=dev)
        stops = torch.tensor(self.chat.stop_ids, device=dev)
        decoder, head = self.model.get_decoder(), self.model.get_output_embeddings()
        # transformers 5.2x renamed the argument (``past_key_values`` before)
        key = "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"
        cache = self._new_cache(C + S + sampling.max_new_tokens)
        donor = reuse[int(cached.argmax())][1]  # the longest cached row: its shapes and dtype
        if donor is not None:
            for layer, (k0, v0) in enumerate(donor.kv):
                k = k0.new_zeros((B, k0.shape[0], C, k0.shape[2]))
                v = v0.new_zeros((B, v0.shape[0], C, v0.shape[2]))
                for row, (n, entry) in enumerate(reuse):
                    if n:
                        k[row, :, :n], v[row, :, :n] = entry.kv[layer][0][:, :n], entry.kv[layer][1][:, :n]
                cache.update(k.to(dev), v.to(dev), layer)
        uniforms = None  # each row's draws for this reply, from its request's own stream
        if all(seed is not None for seed in seeds) and not sampling.greedy:
            uniforms = torch.stack(
                [
                    torch.rand(
                        sampling.max_new_tokens,
                        generator=torch.Generator().manual_seed(int(seed)),
                        dtype=torch.float64,
                    )  # type: ignore[arg-type]
                    for seed in seeds
                ]
            ).to(dev)
        new_ids, new_lps = [], []
        done = torch.zeros(B, dtype=torch.bool, device=dev)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                hidden = decoder(
                    input_ids=ids.to(dev),
                    attention_mask=attention if C else None,
                    position_ids=(cached[:, None] + torch.arange(S)[None, :]).to(dev),
                    use_cache=True,
                    **{key: cache},
                ).last_hidden_state
                last = hidden[rows, (new - 1).to(dev)]  # each row's own last prompt token
                for t in range(sampling.max_new_tokens):
                    logits = head(last).float()
                    token = self._sample(logits, sampling, None if uniforms is None else uniforms[:, t])
                    token = torch.where(done, torch.full_like(token, self.pad_id), token)
                    new_ids.append(token)
                    new_lps.append(torch.log_softmax(logits, -1).gather(-1, token[:, None])[:, 0])
                    done |= torch.isin(token, stops)
                    if bool(done.all()) or t == sampling.max_new_tokens - 1:
                        break
                    attention = torch.cat([attention, torch.ones(B, 1, dtype=torch.long, device=dev)], 1)
                    hidden = decoder(
                        input_ids=token[:, None],
                        attention_mask=attention,
                        position_ids=(lens.to(dev) + t)[:, None],
                        use_cache=True,
                        **{key: cache},
                    ).last_hidden_state
                    last = hidden[:, -1]
        finally:
            self.model.train(was_training)
        gens = self._generations(torch.stack(new_ids, 1).cpu(), torch.stack(new_lps, 1).cpu(), B)
        if self.kv_reuse:
            for row, (k, p, g) in enumerate(zip(keys, prompts, gens, strict=True)):
                if k is None or not g.token_ids:
                    continue
                # every prompt token and every fed reply token: all but the last sampled one
                fed = len(g.token_ids) - 1
                slots = torch.cat(
                    [
                        torch.arange(int(cached[row])),
                        C + torch.arange(int(new[row])),
                        C + S + torch.arange(fed),
                    ]
                ).to(dev)
                kept[k] = _Kept(
                    tokens=list(p) + g.token_ids[:fed],
                    kv=[
                        (layer.keys[row].index_select(1, slots), layer.values[row].index_select(1, slots))
                        for layer in cache.layers
                    ],
                )
        return gens

    def _new_cache(self, capacity: int) -> Any:
        """A KV cache that writes each step into buffers of ``capacity`` slots allocated once.
        ``DynamicCache`` concatenates instead, copying the whole cache at every decoded token:
        half of a decode step's time here. Models with sliding-window layers keep it."""
        from transformers import DynamicCache

        config = self.model.config
        if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
            return DynamicCache()
        from transformers.cache_utils import Cache

        return Cache(layers=[_buffered_layer_class()(capacity) for _ in range(config.num_hidden_layers)])

    @staticmethod
    def _sample(logits: Any, sampling: Sampling, uniform: Any = None) -> Any:
        """One token per row: argmax when greedy, else temperature then top-p (nucleus) sampling,
        from the shared stream, or by inverse CDF at ``uniform`` (one draw per row from the row's
        own stream), so a row's token depends on nothing but its logits and its stream."""
        import torch

        if sampling.greedy:
            return logits.argmax(-1)
        probs = torch.softmax(logits / sampling.temperature, -1)
        if sampling.top_p < 1.0:
            sorted_p, order = probs.sort(-1, descending=True)
            # drop a token when the more likely ones already cover top_p (the first always stays)
            drop = sorted_p.cumsum(-1) - sorted_p >= sampling.top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        if uniform is None:
            return torch.multinomial(probs, 1)[:, 0]
        cdf = probs.double().cumsum(-1)
        total = cdf[:, -1]
        point = torch.minimum(uniform * total, torch.nextafter(total, torch.zeros_like(total)))
        return torch.searchsorted(cdf, point[:, None], right=True)[:, 0]  # point < total: in range

    def _generate_hf(self, prompts: Sequence[Sequence[int]], sampling: Sampling) -> list[Generation]:
        """``transformers``' ``generate`` on left-padded prompts, for models outside ``FAST``."""
        import torch

        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            input_ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attention[row, width - len(p) :] = 1
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
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                result = self.model.generate(
                    input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device), **kwargs
                )
        finally:
            self.model.train(was_training)
        new = result.sequences[:, width:].cpu()
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
