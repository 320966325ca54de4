"""``hf``: any local Hugging Face causal LM directory, batched generation with transformers."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
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


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class HFPolicy:
    """Batched sampling from a causal LM: left padding, per-turn ``max_new_tokens``, temperature and
    top-p, stop on the chat template's end-of-turn token; returns the sampled ids and their
    log-probabilities under the model (before temperature and top-p, as vLLM reports them).

    ``model`` is a directory, or an already loaded model (the trainer passes its own) together with
    ``tokenizer``.
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

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> list[Generation]:
        """Requests of similar length go together: each sub-batch is left-padded to its longest
        prompt, so sorting by length and bounding ``rows x longest`` by ``max_batch_tokens``
        (and rows by ``max_batch``) saves the prefill work padding would waste — multi-turn
        prompts of one batch range from one turn to twenty."""
        if sampling.seed is not None:
            import torch

            torch.manual_seed(sampling.seed)
        prompts = [
            r.prompt_ids if r.prompt_ids is not None else self.chat.start(r.messages) for r in requests
        ]
        order = sorted(range(len(requests)), key=lambda i: len(prompts[i]), reverse=True)
        out: list[Generation | None] = [None] * len(requests)
        start = 0
        while start < len(order):
            longest = len(prompts[order[start]]) + sampling.max_new_tokens
            rows = max(1, min(self.max_batch, self.max_batch_tokens // max(longest, 1)))
            group = order[start : start + rows]
            for i, gen in zip(group, self._generate([prompts[i] for i in group], sampling), strict=True):
                out[i] = gen
            start += rows
        return [g for g in out if g is not None]

    def _generate(self, prompts: Sequence[Sequence[int]], sampling: Sampling) -> list[Generation]:
        if self.fast:
            return self._generate_right_padded(prompts, sampling)
        return self._generate_hf(prompts, sampling)

    def _generate_right_padded(
        self, prompts: Sequence[Sequence[int]], sampling: Sampling
    ) -> list[Generation]:
        """Our own sampling loop. The prompts are right-padded and prefilled *without* a mask:
        under causal attention no real token sees the pads after it, so SDPA runs its fused
        causal kernel instead of the masked one (the prefill of long multi-turn prompts is most of
        the time). Each row then decodes from its own position, with the pad slots masked."""
        import torch
        from transformers import DynamicCache

        B = len(prompts)
        lens = torch.tensor([len(p) for p in prompts])
        width = int(lens.max())
        dev = self.device
        ids = torch.full((B, width), self.pad_id, dtype=torch.long)
        for row, p in enumerate(prompts):
            ids[row, : len(p)] = torch.tensor(p, dtype=torch.long)
        attention = (torch.arange(width)[None, :] < lens[:, None]).long().to(dev)
        rows = torch.arange(B, device=dev)
        stops = torch.tensor(self.chat.stop_ids, device=dev)
        decoder, head = self.model.get_decoder(), self.model.get_output_embeddings()
        # transformers 5.2x renamed the argument (``past_key_values`` before)
        key = "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"
        cache = {key: DynamicCache()}
        new_ids, new_lps = [], []
        done = torch.zeros(B, dtype=torch.bool, device=dev)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                hidden = decoder(input_ids=ids.to(dev), use_cache=True, **cache).last_hidden_state
                last = hidden[rows, (lens - 1).to(dev)]  # each row's own last prompt token
                for t in range(sampling.max_new_tokens):
                    logits = head(last).float()
                    token = self._sample(logits, sampling)
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
                        **cache,
                    ).last_hidden_state
                    last = hidden[:, -1]
        finally:
            self.model.train(was_training)
        return self._generations(torch.stack(new_ids, 1).cpu(), torch.stack(new_lps, 1).cpu(), B)

    @staticmethod
    def _sample(logits: Any, sampling: Sampling) -> Any:
        """One token per row: argmax when greedy, else temperature then top-p (nucleus) sampling."""
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
        return torch.multinomial(probs, 1)[:, 0]

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
