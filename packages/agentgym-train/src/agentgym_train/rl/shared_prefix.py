"""Rows that open with the same prompt, run through the prompt once in the update.

The samples of one task (a GRPO group) open with the same prompt: the system prompt and the first
observation, about a third of a BabyAI row's tokens at 8 turns. The update runs such a prompt
through the model once (:class:`SharedPrefix`), keeps every layer's keys and values, and runs
each row from where the prompt ends, reading them as a KV cache. The gradients every row sends
into that cache are carried back through the prompt's forward pass once, after the group's last
row (:meth:`SharedPrefix.backward`): the gradient of the rows run whole, with the prompt's
compute paid once a group instead of once a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from agentgym_train.models.logprobs import cache_argument


def prompt_groups(ids: torch.Tensor, mask: torch.Tensor, rows: Sequence[int]) -> list[tuple[int, list[int]]]:
    """``rows`` grouped by prompt: a row's prompt is its tokens before the one that predicts its
    first sampled token. Rows with the same non-empty prompt, two or more, are one group
    ``(prompt length, rows)``; every other row is in one group ``(0, rows)``, run whole."""
    by_prompt: dict[bytes, tuple[int, list[int]]] = {}
    for i in rows:
        sampled = mask[i].nonzero()
        start = max(int(sampled[0]) - 1, 0) if len(sampled) else 0
        by_prompt.setdefault(ids[i, :start].numpy().tobytes(), (start, []))[1].append(i)
    shared = [(start, members) for start, members in by_prompt.values() if start and len(members) > 1]
    alone = [i for start, members in by_prompt.values() if not start or len(members) == 1 for i in members]
    return shared + ([(0, alone)] if alone else [])


class SharedPrefix:
    """One prompt (``1 x P`` ids) through ``model``'s decoder, with gradient: its keys and values
    per layer, and detached copies of them that the rows read (:meth:`cache`) and that gather
    the rows' gradients."""

    def __init__(self, model: Any, ids: torch.Tensor):
        from transformers import DynamicCache

        decoder, cache = model.get_decoder(), DynamicCache()
        decoder(input_ids=ids, use_cache=True, **{cache_argument(decoder): cache})
        self.kv = [t for layer in cache.layers for t in (layer.keys, layer.values)]
        self.leaves = [t.detach().requires_grad_(torch.is_grad_enabled()) for t in self.kv]
        self.length = ids.shape[1]

    def cache(self, rows: int) -> Any:
        """A KV cache of the prompt for a batch of ``rows`` rows (views: no copy)."""
        from transformers import DynamicCache

        pairs = zip(self.leaves[0::2], self.leaves[1::2], strict=True)
        return DynamicCache(
            ddp_cache_data=[(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in pairs]
        )

    def backward(self) -> None:
        """The gradients the rows sent into the cache, through the prompt's forward pass."""
        sent = [(t, leaf.grad) for t, leaf in zip(self.kv, self.leaves, strict=True) if leaf.grad is not None]
        if sent:
            torch.autograd.backward([t for t, _ in sent], [g for _, g in sent])
