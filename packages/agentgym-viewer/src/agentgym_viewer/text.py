"""Recorded text made fit to show as text: control characters drawn visibly, and a model output cut
into segments around its parsed action.

Data is shown as text, never as markup: templates autoescape, and :func:`highlight` gives
``(text, is_action)`` segments the template wraps, so no recorded text reaches ``|safe``.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls (but tab and newline), DEL: drawn as their Unicode control pictures, so a model's
# garbage output shows what it holds instead of vanishing (or breaking the page's text).
_CONTROLS = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)} | {0x7F: 0x2421, 0x0D: 0x240D}
_LABEL = re.compile(r"action[ \t]*[*_]*[ \t]*\d*[ \t]*[:：]", re.I)
_TAG = re.compile(r"^<(\w+)>(.*)</\1>$", re.S)


def visible(text: Any) -> str:
    """Text safe to put in a page as text: controls made visible, lone surrogates (from a bad
    decode) replaced so encoding the response cannot fail."""
    s = "" if text is None else str(text)
    return s.translate(_CONTROLS).encode("utf-8", "replace").decode("utf-8")


def _words_pattern(action: str) -> re.Pattern[str] | None:
    words = action.split()
    if not words:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words), re.I)


def find_action(output: str, action: str | None) -> tuple[int, int] | None:
    """Where ``action`` stands in ``output``: the first occurrence after the first ``Action:``
    label (the one parsers read), else the first anywhere. Parsers normalise spacing and case,
    so words match across any whitespace, in any case. A tags action (``<search>q</search>``)
    is found by its content when the tags were written differently."""
    if not action:
        return None
    candidates = [action]
    tag = _TAG.match(action)
    if tag:
        candidates.append(tag.group(2))
    label = _LABEL.search(output)
    after = label.end() if label else 0
    for candidate in candidates:
        pattern = _words_pattern(candidate)
        if pattern is None:
            continue
        matches = list(pattern.finditer(output))
        if matches:
            best = next((m for m in matches if m.start() >= after), matches[0])
            return best.start(), best.end()
    return None


def highlight(output: str, action: str | None) -> list[tuple[str, bool]]:
    """``output`` as ``(text, is_action)`` segments, the action's span marked."""
    span = find_action(output, action)
    if span is None:
        return [(visible(output), False)] if output else []
    start, end = span
    parts = [(output[:start], False), (output[start:end], True), (output[end:], False)]
    return [(visible(text), mark) for text, mark in parts if text]
