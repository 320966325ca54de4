"""Action parsers: turn a model's raw text into the action sent to the env.

Parsers are about *format* only: they find the action in messy model output (markdown, several
``Action:`` lines, trailing chatter, stray punctuation) and never rewrite the action's words
(``pick up`` vs ``pickup`` is the env's business). Text that does not parse yields
``ParseResult(action=None, error=...)``: the rollout sends the error back to the agent as a
format-error observation instead of stepping the env. :func:`match_available` is the one helper
that reads an env's action list: an opt-in fallback that finds the single available action a
free-text reply names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentgym.errors import lookup


@dataclass(frozen=True)
class ParseResult:
    action: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.action is not None


Parser = Callable[[str], ParseResult]

# Decorations models put around an action: markdown emphasis, inline code, quotes, brackets of
# "<action>" templates. Stripped from both ends only, and only when they wrap the action: a pair, or
# a stray mark whose kind appears nowhere else (``say "hi"`` and ``... name = 'Bob'`` keep their quote).
_WRAPPERS = "*_`\"'“”‘’"
_WRAPPER_KIND = {"“": '"', "”": '"', "‘": "'", "’": "'"}
_TRAILING_PUNCT = ".,;:!?。"


def _kind(c: str) -> str:
    return _WRAPPER_KIND.get(c, c)


def _strip_wrappers(s: str) -> str:
    s = s.strip()
    while s:
        head, tail = s[0], s[-1]
        if len(s) >= 2 and head in _WRAPPERS and _kind(head) == _kind(tail):
            s = s[1:-1].strip()  # "`go to x`", "**go to x**"
        elif head in _WRAPPERS and _kind(head) not in {_kind(c) for c in s.lstrip(head)}:
            s = s.lstrip(head).strip()  # a stray opening mark
        elif tail in _WRAPPERS and _kind(tail) not in {_kind(c) for c in s.rstrip(tail)}:
            s = s.rstrip(tail).strip()  # a stray closing mark
        else:
            return s
    return s


def clean_action(text: str) -> str:
    """Strip markdown, quotes, whitespace and trailing sentence punctuation around an action."""
    s = " ".join(text.split())
    prev = None
    while s != prev:
        prev = s
        s = _strip_wrappers(s)
        if s.endswith(tuple(_TRAILING_PUNCT)) and not s.endswith("..."):
            s = s[:-1]
        if len(s) >= 2 and s[0] == "<" and s[-1] == ">" and "<" not in s[1:-1]:
            s = s[1:-1]  # "<go to door>" from a model copying the template's brackets
    return s


_REACT_INLINE = re.compile(r"(?<=[.!?)\]*_\s])[*_]*Action[*_]*[ \t]*[:：][ \t]*[*_]*(.*)$", re.M)
_REACT_LABEL = re.compile(
    r"^[ \t>*_#-]*(?:\d+[.)][ \t]*)?action[ \t]*[*_]*[ \t]*(?:\d+[ \t]*)?[:：][ \t]*[*_]*(.*)$", re.I | re.M
)
_REACT_STOP = re.compile(r"^[ \t>*_#-]*(thought|observation|action)[ \t]*[*_]*[ \t]*\d*[ \t]*[:：]", re.I)
_FENCE_LINE = re.compile(r"^[ \t]*```[\w+-]*[ \t]*$")  # a code fence's opening or closing line


def parse_react(text: str) -> ParseResult:
    """``Thought: ... Action: <action>``: the first ``Action:`` (any case, markdown allowed).

    The action is the rest of that line, or the next non-empty line when the label stands alone.
    Later ``Action:`` lines are the model hallucinating further turns and are ignored.
    """
    # A label opening a line (any case, list or quote markers allowed) ...
    m = _REACT_LABEL.search(text)
    if m is None:
        # ... else "Thought: ... Action: x" on one line; capitalised, so prose saying "the action:" is not taken
        m = _REACT_INLINE.search(text)
    if m is None:
        return ParseResult(
            None, 'Format error: no "Action:" found. End your reply with a line "Action: <action>".'
        )
    action = "" if _FENCE_LINE.match(m.group(1)) else clean_action(m.group(1))
    if not action:
        for line in text[m.end() :].splitlines():
            if _REACT_STOP.match(line):
                break
            if _FENCE_LINE.match(line):
                continue  # "Action:\n```\ngo to x\n```": the action is inside the block
            action = clean_action(line)
            if action:
                break
    if not action:
        return ParseResult(None, 'Format error: "Action:" is empty. Write the action after "Action:".')
    return ParseResult(action)


def make_tags_parser(tags: Sequence[str] = ("search", "answer")) -> Parser:
    """``<search>q</search>`` / ``<answer>a</answer>``: the first complete tag among ``tags``.

    Returns the canonical ``<tag>content</tag>``. A tag left open at the very end of the text counts
    (generation often stops on the closing tag).
    """
    names = "|".join(re.escape(t) for t in tags)
    closed = re.compile(rf"<\s*({names})\s*>(.*?)<\s*/\s*\1\s*>", re.I | re.S)
    # ... up to the end, less a closing tag cut off mid-way ("<search>q</sea")
    open_at_end = re.compile(
        rf"<\s*({names})\s*>((?:(?!<\s*/?\s*(?:{names})\s*>).)*?)(?:<(?:\s*/[^<>]*)?)?\Z", re.I | re.S
    )
    listing = ", ".join(f"<{t}>...</{t}>" for t in tags)

    def parse_tags(text: str) -> ParseResult:
        m = closed.search(text) or open_at_end.search(text.rstrip())
        if m is None:
            return ParseResult(None, f"Format error: no action tag found. Use one of {listing}.")
        tag, content = m.group(1).lower(), " ".join(m.group(2).split())
        if not content:
            return ParseResult(None, f"Format error: <{tag}> is empty.")
        return ParseResult(f"<{tag}>{content}</{tag}>")

    parse_tags.__doc__ = f"Tags parser over {listing}."
    return parse_tags


parse_tags = make_tags_parser()

_FENCE = re.compile(r"```(.*?)```", re.S)
_LANG_LINE = re.compile(r"^[A-Za-z0-9_+-]*[ \t]*\n")


def parse_fenced(text: str) -> ParseResult:
    """The content of the first triple-backtick block (a leading language tag line is dropped)."""
    m = _FENCE.search(text)
    if m is None:
        return ParseResult(None, "Format error: no action found. Put the action in a ```code block```.")
    body = m.group(1)
    lang = _LANG_LINE.match(body)
    if lang and body[lang.end() :].strip():
        body = body[lang.end() :]
    action = " ".join(body.split())
    if not action:
        return ParseResult(None, "Format error: the ``` block is empty.")
    return ParseResult(action)


def parse_plain(text: str) -> ParseResult:
    """The first non-empty line, cleaned of markdown and trailing punctuation."""
    for line in text.splitlines():
        action = clean_action(line)
        if action:
            return ParseResult(action)
    return ParseResult(None, "Format error: the reply is empty. Reply with one action.")


PARSERS: dict[str, Parser] = {
    "react": parse_react,
    "tags": parse_tags,
    "fenced": parse_fenced,
    "plain": parse_plain,
}


def format_action(name: str, action: str) -> str:
    """A reply that parser ``name`` reads back as ``action`` (scripted policies, demonstrations)."""
    if name == "react":
        return f"Action: {action}"
    if name == "fenced":
        return f"```\n{action}\n```"
    lookup(PARSERS, name, "action parser")
    return action  # tags: the action is already tagged; plain: the line itself


_WORD = re.compile(r"\w+|[^\w\s]")
_ARTICLES = frozenset({"a", "an", "the"})
#: How each parser wants its one action written (in the message for a reply naming several actions).
_ONE_ACTION = {
    "react": 'on one line "Action: <action>"',
    "fenced": "in one ``` code block",
    "tags": "in one tag",
    "plain": "on a line of its own",
}


def _phrase(text: str) -> str:
    """Lower-cased words and marks, single-spaced, articles dropped, padded with spaces: whole-word
    containment of one phrase in another is then substring containment."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _ARTICLES]
    return f" {' '.join(words)} " if words else ""


def _names(phrase: list[str], words: list[str]) -> bool:
    """Whether ``words`` say ``phrase`` in order, at most one extra word between two of its words
    ("go straight to red ball 1" says ``go to red ball 1``)."""
    for start in (i for i, w in enumerate(words) if w == phrase[0]):
        at = start
        for word in phrase[1:]:
            nxt = next((j for j in range(at + 1, min(at + 3, len(words))) if words[j] == word), None)
            if nxt is None:
                break
            at = nxt
        else:
            return True
    return False


def match_available(text: str, available_actions: Sequence[str], parser: str = "react") -> ParseResult:
    """The one available action that free ``text`` names, for a reply the env's parser could not read.

    An action is named when its words occur in the text in order, whole words, at most one other
    word between two of them (any case and spacing; articles ignored, so "go straight to the red
    ball 1" names ``go to red ball 1``). A named action whose phrase lies inside another named one's
    (``toggle`` in ``toggle and go through red closed door 1``) gives way to it. Exactly one action
    left: that action, exactly as the env lists it. None: parser ``parser``'s own format error.
    Several: a format error naming them. This reads the env's action list, not a format: the
    rollout uses it only where asked (``match_actions``) and only where the env lists its actions
    (``info["available_actions"]``).
    """
    words = _phrase(text).split()
    named: dict[str, str] = {}
    for action in dict.fromkeys(available_actions):
        phrase = _phrase(action)
        if phrase and _names(phrase.split(), words):
            named[action] = phrase
    kept = [a for a, p in named.items() if not any(q != p and p in q for q in named.values())]
    if len(kept) == 1:
        return ParseResult(kept[0])
    if not kept:
        return ParseResult(None, parse_action(parser, text).error or "Format error: no action found.")
    listing = ", ".join(f'"{a}"' for a in kept[:6]) + (f" and {len(kept) - 6} more" if len(kept) > 6 else "")
    how = _ONE_ACTION.get(parser, "on a line of its own")
    return ParseResult(
        None, f"Format error: your reply names several actions ({listing}). Write exactly one, {how}."
    )


def get_parser(name: str) -> Parser:
    return lookup(PARSERS, name, "action parser")


def parse_action(name: str, text: str) -> ParseResult:
    return get_parser(name)(text)
