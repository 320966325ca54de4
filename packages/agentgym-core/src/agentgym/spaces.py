"""Text spaces that real observations and actions fit.

Gymnasium's ``Text`` defaults to an alphanumeric charset, which rejects almost every real
observation ("Too low. Try again."). ``TextSpace`` keeps ``Text``'s API (so Gymnasium's checkers and
wrappers accept it) and samples from printable ASCII, but ``contains`` accepts any Unicode string
without surrogates or NUL within the length bounds: observations carry Wikipedia text, web pages and
accessibility trees.
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Text

SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " "

MAX_OBSERVATION_CHARS = 1 << 20
MAX_ACTION_CHARS = 1 << 16


class TextSpace(Text):
    """A ``gymnasium.spaces.Text`` over all of Unicode (sampling from printable ASCII)."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None):
        super().__init__(max_length=max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, str) or not (self.min_length <= len(x) <= self.max_length):
            return False
        if "\x00" in x:
            return False
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates
            return False
        return True

    def __repr__(self) -> str:
        return f"TextSpace({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TextSpace) and (self.min_length, self.max_length) == (
            other.min_length,
            other.max_length,
        )


def observation_space() -> TextSpace:
    return TextSpace(MAX_OBSERVATION_CHARS)


def action_space() -> TextSpace:
    return TextSpace(MAX_ACTION_CHARS)
