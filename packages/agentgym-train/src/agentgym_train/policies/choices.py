"""Constrained decoding to a set of replies: each row of a batch may be held to its own list of
token sequences (an env's available actions written in its parser's format), token by token.

The ``hf`` policy masks each step's logits with :meth:`Choices.allowed`; a row with no list
samples freely. Greedy decoding then picks the reply the model ranks highest token by token, and
sampling draws from the model's distribution restricted to the replies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Choices:
    """The replies each row may produce (``None`` for a free row), as token ids ending with the
    end-of-turn token, and the tokens each row has produced so far."""

    def __init__(self, rows: Sequence[Sequence[Sequence[int]] | None]):
        self.rows = [None if r is None else [list(o) for o in r if o] for r in rows]
        self.sofar: list[list[int]] = [[] for _ in rows]

    @property
    def any(self) -> bool:
        return any(r for r in self.rows)

    def allowed(self, logits: Any) -> Any:
        """``logits`` with every token no reply of its row continues with set to -inf."""
        import torch

        mask = torch.zeros_like(logits, dtype=torch.bool)
        for i, options in enumerate(self.rows):
            if not options:
                mask[i] = True
                continue
            t, prefix = len(self.sofar[i]), self.sofar[i]
            nexts = {o[t] for o in options if len(o) > t and o[:t] == prefix}
            if nexts:
                mask[i, sorted(nexts)] = True
            else:  # a whole reply already (the row has stopped; its later tokens are padding)
                mask[i] = True
        return logits.masked_fill(~mask, float("-inf"))

    def advance(self, tokens: Sequence[int]) -> None:
        """Record each row's token of this step."""
        for i, token in enumerate(tokens):
            self.sofar[i].append(int(token))
