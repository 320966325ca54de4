"""A trained token sequence as the tokens page shows it: each token decoded on its own, marked when
trained.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from agentgym_viewer.text import visible


@functools.lru_cache(maxsize=4)
def _tokenizer(path: str, mtime: float) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


def token_rows(
    tokens: Any, tokenizer_path: Path | str | None
) -> tuple[list[tuple[str, bool, str]], str | None]:
    """Each token as ``(text, trained, title)``, and a note when texts could not be decoded.

    One ``decode_batch`` call decodes every id on its own, in Rust: thousands of tokens in a few
    milliseconds, where a Python loop of ``decode`` calls would dominate the page."""
    ids = list(tokens.ids)
    mask = list(tokens.loss_mask)
    logprobs = tokens.logprobs
    texts: list[str] | None = None
    note = None
    if tokenizer_path is not None and Path(tokenizer_path).is_file():
        try:
            p = Path(tokenizer_path)
            tok = _tokenizer(str(p), p.stat().st_mtime)
            texts = tok.decode_batch([[i] for i in ids], skip_special_tokens=False)
        except Exception as exc:  # noqa: BLE001 - a bad tokenizer file: show the ids instead
            note = f"The tokenizer could not decode these ids ({type(exc).__name__}: {exc}); ids shown."
    else:
        note = "No tokenizer.json in the run's model folder; ids shown."
    rows = []
    for j, token_id in enumerate(ids):
        trained = bool(mask[j]) if j < len(mask) else False
        text = visible(texts[j]) if texts is not None else f"{token_id} "
        title = f"#{j} id {token_id}"
        if trained and logprobs is not None and j < len(logprobs):
            title += f" logprob {logprobs[j]:.4f}"
        if tokens.reward_index == j:
            title += " (reward)"
        rows.append((text, trained, title))
    return rows, visible(note) if note else None
