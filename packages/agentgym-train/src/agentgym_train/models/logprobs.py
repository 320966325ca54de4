"""The forward passes training reads: log-probabilities (and entropies) of the sampled tokens of
right-padded rows, micro-batches bounded by a token budget, and the widths they run at."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

#: Model types whose logits are the output embedding of the decoder's last hidden state and
#: nothing more (no soft-capping, no scaling): for them the forward passes here and the ``hf``
#: policy's sampling loop may run the decoder and the output embedding separately.
PLAIN_LM_HEAD_TYPES = frozenset({"qwen2", "qwen3", "llama", "mistral"})


def has_plain_lm_head(model: Any) -> bool:
    return getattr(model.config, "model_type", None) in PLAIN_LM_HEAD_TYPES


def cache_argument(decoder: Any) -> str:
    """The name under which the decoder's forward takes the KV cache."""
    import inspect

    # transformers 5.2x renamed the argument (``past_key_values`` before)
    return "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"


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
    model: Any,
    ids: torch.Tensor,
    mask: torch.Tensor,
    *,
    entropy: bool = False,
    hidden: bool = False,
    prefix: Any = None,
) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
    """``B x T`` log-probabilities (and entropies) of the tokens of right-padded rows, filled only
    where ``mask`` is 1 (the sampled tokens, all the losses read) and zero elsewhere; and the model
    output, with its hidden states, when ``hidden`` (a critic reads them).

    The forward takes no padding mask: under causal attention no real token sees the pads after
    it, and SDPA then runs its fused causal kernel. The vocabulary projection and softmax run on
    the sampled positions alone, a few per cent of an episode's tokens (the rest are prompt and
    observations), so the ``B x T x vocab`` logits and their gradient are never built. Model types
    without a plain LM head (their logits may be more than the output embedding of the last hidden
    state) and ``hidden`` take the whole forward pass. With ``prefix`` (an
    :class:`agentgym_train.rl.shared_prefix.SharedPrefix`), ``ids`` and ``mask`` are the rows after
    that prompt, which they read as a KV cache."""
    device = next(model.parameters()).device
    ids = ids.to(device)
    if hidden or not has_plain_lm_head(model):  # the caller reads every position's output: no pads
        out = model(input_ids=ids, output_hidden_states=hidden)
        lp = token_logprobs(out.logits, ids)
        ent = torch.nn.functional.pad(entropy_from_logits(out.logits[:, :-1]), (1, 0)) if entropy else None
        return lp, ent, out
    decoder = model.get_decoder()
    past = (
        {cache_argument(decoder): prefix.cache(ids.shape[0])} if prefix is not None else {"use_cache": False}
    )
    width = ids.shape[1]
    # pads on the right, which no real token attends to under causal attention
    states = decoder(input_ids=pad_width(ids), **past).last_hidden_state[:, :width]
    predicts = mask[:, 1:].to(device) > 0  # position t - 1 predicts the sampled token t
    picked, ent = head_logprobs(
        model.get_output_embeddings(), states[:, :-1][predicts], ids[:, 1:][predicts], entropy=entropy
    )

    def spread(values: torch.Tensor) -> torch.Tensor:
        full = torch.zeros(predicts.shape, device=device, dtype=values.dtype).masked_scatter(predicts, values)
        return torch.nn.functional.pad(full, (1, 0))

    return spread(picked), spread(ent) if entropy else None, None


#: Forward and backward passes run on widths (and output-layer rows) rounded up to a multiple of
#: this. oneDNN, which runs bfloat16 matrix products on CPU, builds and caches a kernel for every
#: new shape: over 40 micro-batches of a real run (SmolLM2's update, 39 widths) the process grew
#: 0.59 GB as they came and 0.09 GB rounded, and ran 0.92x the time (bench/results/shape_multiple.md).
SHAPE_MULTIPLE = 64


def pad_width(ids: torch.Tensor) -> torch.Tensor:
    """``ids`` (``B x T``) with pad ids appended to each row up to a width that is a multiple of
    :data:`SHAPE_MULTIPLE` (the id does not matter: callers drop those positions)."""
    return torch.nn.functional.pad(ids, (0, -ids.shape[1] % SHAPE_MULTIPLE))


#: Positions whose vocabulary logits exist at once in :func:`head_logprobs` (49,152-token
#: vocabulary: 200 MB of float32 logits a chunk; a multiple of :data:`SHAPE_MULTIPLE`).
HEAD_CHUNK = 1024


def head_logprobs(
    head: Any, states: torch.Tensor, targets: torch.Tensor, *, entropy: bool = False, chunk: int = HEAD_CHUNK
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probability of ``targets`` (``N``) under the output layer ``head`` applied to ``states``
    (``N x hidden``), and the entropies, ``chunk`` positions at a time. With gradient, each chunk's
    logits are recomputed in backward instead of kept: memory holds one chunk's logits, not ``N``'s."""
    from torch.utils.checkpoint import checkpoint

    def part(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logp = torch.log_softmax(head(x).float(), -1)
        ent = -(logp.exp() * logp).sum(-1) if entropy else logp.new_zeros(len(x))
        return logp.gather(-1, y[:, None])[:, 0], ent

    n, extra = len(states), -len(states) % SHAPE_MULTIPLE  # rows of zeros to a multiple, dropped after
    if extra:
        states = torch.cat([states, states.new_zeros(extra, states.shape[1])])
        targets = torch.cat([targets, targets.new_zeros(extra)])
    grad = torch.is_grad_enabled() and states.requires_grad
    outs = [
        checkpoint(part, states[i : i + chunk], targets[i : i + chunk], use_reentrant=False)
        if grad and len(states) > chunk
        else part(states[i : i + chunk], targets[i : i + chunk])
        for i in range(0, max(len(states), 1), chunk)
    ]
    picked = torch.cat([o[0] for o in outs])[:n]
    return picked, torch.cat([o[1] for o in outs])[:n] if entropy else None
