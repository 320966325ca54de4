"""Models and tokenizers: loading them, where they run, in what precision, and the forward passes
training reads (log-probabilities of sampled tokens over right-padded rows).

Everything that trains or samples a Hugging Face model goes through here: the RL trainer, SFT,
DPO and the ``hf`` policy. Nothing here knows about envs, episodes or algorithms.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentgym.errors import AgentGymError, lookup

#: Model types whose logits are the output embedding of the decoder's last hidden state and
#: nothing more (no soft-capping, no scaling): for them the forward passes here and the ``hf``
#: policy's sampling loop may run the decoder and the output embedding separately.
PLAIN_LM_HEAD_TYPES = frozenset({"qwen2", "qwen3", "llama", "mistral"})


#: The dtypes a model may be loaded (and trained) in, besides ``auto``.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def has_plain_lm_head(model: Any) -> bool:
    return getattr(model.config, "model_type", None) in PLAIN_LM_HEAD_TYPES


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(name: str | None = "auto", device: str | None = None) -> torch.dtype:
    """``auto`` (or None): bfloat16 on a GPU that has it, else float32; otherwise one of
    ``DTYPES`` by name."""
    if name in (None, "auto"):
        on_gpu = (device or default_device()).startswith("cuda")
        return torch.bfloat16 if on_gpu and torch.cuda.is_bf16_supported() else torch.float32
    return lookup(DTYPES, name, "dtype")


def model_dir(path: str | Path) -> Path:
    """``path`` if it is a Hugging Face model directory (models are never downloaded)."""
    p = Path(path)
    if not (p / "config.json").is_file():
        raise AgentGymError(
            f"model {p}: not a Hugging Face model directory (no config.json; models are never "
            "downloaded, pass a local directory)"
        )
    return p


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


def load_model(path: str | Path, *, dtype: str | None = "auto", device: str | None = None) -> Any:
    """The causal LM of a model directory, on ``device`` (default: :func:`default_device`)."""
    from transformers import AutoModelForCausalLM

    device = device or default_device()
    try:
        model = AutoModelForCausalLM.from_pretrained(
            model_dir(path), dtype=resolve_dtype(dtype, device), local_files_only=True
        )
    except OSError as exc:
        raise AgentGymError(f"cannot load a model from {path}: {exc}") from exc
    return model.to(device)


def pad_rows(
    rows: Sequence[Sequence[int]],
    pad_id: int = 0,
    *,
    masks: Sequence[Sequence[float]] | None = None,
    left: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows as one ``B x T`` id tensor padded with ``pad_id`` (on the right, or the left),
    and a float mask of the same shape: ``masks`` padded with 0, or 1 on every real token."""
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        ids[i, span] = torch.as_tensor(list(row), dtype=torch.long)
        mask[i, span] = torch.as_tensor(list(masks[i]), dtype=torch.float32) if masks is not None else 1.0
    return ids, mask


def micro_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Consecutive groups of rows whose padded size (rows x longest) stays within ``budget``
    tokens; a row longer than the budget gets a group of its own."""
    groups: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i, n in enumerate(lengths):
        if current and (len(current) + 1) * max(longest, n) > budget:
            groups.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, n)
    if current:
        groups.append(current)
    return groups


def token_logprobs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``B x T`` log-probability of each token given the ones before it (0 at position 0)."""
    lp = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.nn.functional.pad(lp, (1, 0))


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of each position's next-token distribution."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def sampled_logprobs(
    model: Any, ids: torch.Tensor, mask: torch.Tensor, *, entropy: bool = False, hidden: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
    """``B x T`` log-probabilities (and entropies) of the tokens of right-padded rows, filled only
    where ``mask`` is 1 (the sampled tokens, all the losses read) and zero elsewhere; and the model
    output, with its hidden states, when ``hidden`` (a critic reads them).

    The forward takes no padding mask: under causal attention no real token sees the pads after
    it, and SDPA then runs its fused causal kernel. The vocabulary projection and softmax run on
    the sampled positions alone, a few per cent of an episode's tokens (the rest are prompt and
    observations), so the ``B x T x vocab`` logits and their gradient are never built. Model types
    without a plain LM head (their logits may be more than the output embedding of the last hidden
    state) and ``hidden`` take the whole forward pass."""
    device = next(model.parameters()).device
    ids = ids.to(device)
    if hidden or not has_plain_lm_head(model):
        out = model(input_ids=ids, output_hidden_states=hidden)
        lp = token_logprobs(out.logits, ids)
        ent = torch.nn.functional.pad(entropy_from_logits(out.logits[:, :-1]), (1, 0)) if entropy else None
        return lp, ent, out
    states = model.get_decoder()(input_ids=ids).last_hidden_state
    predicts = mask[:, 1:].to(device) > 0  # position t - 1 predicts the sampled token t
    logp = torch.log_softmax(model.get_output_embeddings()(states[:, :-1][predicts]).float(), -1)
    picked = logp.gather(-1, ids[:, 1:][predicts][:, None])[:, 0]

    def spread(values: torch.Tensor) -> torch.Tensor:
        full = torch.zeros(predicts.shape, device=device).masked_scatter(predicts, values)
        return torch.nn.functional.pad(full, (1, 0))

    return spread(picked), spread(-(logp.exp() * logp).sum(-1)) if entropy else None, None
