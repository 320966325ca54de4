"""Token-in/token-out conversations over any tokenizer's chat template.

The rollout never decodes sampled text and re-encodes it (the reference did, with ChatML pieces
hard-coded, and drifted). It keeps the exact sampled ids and appends only what the chat template
puts *between* turns: the text after the end-of-turn token and the next user turn up to the
generation prompt. That is sound only if the template is append-only (rendering one more turn
never changes what was rendered before); every turn is checked, and a template that rewrites
history (drops old reasoning, numbers turns, moves the system prompt) fails with a clear error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.errors import AgentGymError

_PROBE = "\u2063agentgym-probe\u2063"  # text no real turn contains


class ChatTemplateError(AgentGymError, ValueError):
    """The tokenizer's chat template cannot be used token-in/token-out."""

    code = "chat_template"


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class ChatFormat:
    """Renders conversations with ``tokenizer``'s chat template and builds token sequences turn by turn.

    ``eot_id`` is the token the template puts right after an assistant message (``<|im_end|>``,
    ``<|eot_id|>``...): generation stops on it and it is part of the sampled tokens.
    """

    def __init__(self, tokenizer: Any, *, chat_template: str | None = None):
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        if chat_template is None and not getattr(tokenizer, "chat_template", None):
            raise ChatTemplateError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__} has no chat "
                "template: pass one (a Jinja string) or use an instruct/chat model's tokenizer"
            )
        self.merge_system = False
        try:
            self.render([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], True)
        except Exception as exc:  # templates without a system role (Gemma...) raise from Jinja
            if "system" not in str(exc).lower():
                raise ChatTemplateError(f"the chat template failed to render a conversation: {exc}") from exc
            self.merge_system = True
        self.eot_id, self.eot_text = self._find_eot()
        self.stop_ids = sorted({self.eot_id, *self._eos_ids()})

    # -- rendering ----------------------------------------------------------------------------
    def _prepare(self, messages: Sequence[dict[str, str]]) -> list[dict[str, str]]:
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        if self.merge_system and msgs and msgs[0]["role"] == "system":
            system = msgs.pop(0)["content"]
            if msgs and msgs[0]["role"] == "user":
                msgs[0] = {"role": "user", "content": f"{system}\n\n{msgs[0]['content']}"}
            else:
                msgs.insert(0, {"role": "user", "content": system})
        return msgs

    def render(self, messages: Sequence[dict[str, str]], add_generation_prompt: bool) -> str:
        kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": add_generation_prompt}
        if self.chat_template is not None:
            kwargs["chat_template"] = self.chat_template
        text = self.tokenizer.apply_chat_template(self._prepare(messages), **kwargs)
        if not isinstance(text, str):  # some versions wrap the result
            text = text[0] if isinstance(text, list) else str(text)
        return text

    def encode(self, text: str) -> list[int]:
        """Ids of rendered template text (special tokens in it are recognised, none are added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _eos_ids(self) -> list[int]:
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if eos is None:
            return []
        return list(eos) if isinstance(eos, (list, tuple)) else [int(eos)]

    def _find_eot(self) -> tuple[int, str]:
        text = self.render(
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": _PROBE}], False
        )
        after = text[text.rindex(_PROBE) + len(_PROBE) :]
        ids = self.encode(after) if after else []
        special = set(getattr(self.tokenizer, "all_special_ids", []) or [])
        special |= set(getattr(self.tokenizer, "added_tokens_decoder", {}) or {})
        if ids and ids[0] in special:
            return ids[0], self.tokenizer.decode([ids[0]])
        eos = self._eos_ids()
        if eos:
            return eos[0], self.tokenizer.decode([eos[0]])
        raise ChatTemplateError(
            "cannot tell the end-of-turn token: the chat template puts no special token after an assistant "
            "message and the tokenizer has no eos_token"
        )

    # -- token sequences ----------------------------------------------------------------------
    def start(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Ids of the opening prompt (system and first user message) with the generation prompt."""
        return self.encode(self.render(messages, True))

    def continuation(self, messages: Sequence[dict[str, str]], stopped: bool) -> list[int]:
        """Ids to append after the sampled ids of the assistant message ``messages[-2]`` so that the
        sequence ends with the new user message ``messages[-1]`` and the generation prompt.

        ``stopped`` False means generation hit its token limit before the end-of-turn token, which
        is then appended here (as template, not as a sampled token)."""
        if len(messages) < 2 or messages[-2]["role"] != "assistant" or messages[-1]["role"] != "user":
            raise ValueError(
                "continuation() needs a conversation ending with an assistant and a user message"
            )
        before = self.render(messages[:-1], False)
        after = self.render(messages, True)
        if not after.startswith(before):
            i = _first_difference(before, after)
            raise ChatTemplateError(
                "the chat template is not append-only: adding a user turn changed what was rendered before "
                f"(first difference at character {i}: {before[max(0, i - 30) : i + 30]!r} became "
                f"{after[max(0, i - 30) : i + 30]!r}); token-in/token-out rollouts need a template that only "
                "appends (e.g. one that keeps past reasoning), or pass --chat-template"
            )
        end = before.rfind(self.eot_text)
        if end < 0:
            raise ChatTemplateError(
                f"the chat template did not close the assistant turn with {self.eot_text!r}"
            )
        tail = before[end + len(self.eot_text) :] + after[len(before) :]
        return ([] if stopped else [self.eot_id]) + self.encode(tail)

    def conversation(self, messages: Sequence[dict[str, str]]) -> TokenTrace:
        """Token sequence of a whole conversation (system, user, assistant, user, ...), built the
        way a rollout builds it: each assistant message's own ids plus the end-of-turn token are
        the "sampled" tokens (loss mask 1), everything else template. For SFT and DPO data."""
        msgs = list(messages)
        first = next((i for i, m in enumerate(msgs) if m["role"] == "assistant"), None)
        trace = TokenTrace()
        if first is None:
            raise ValueError("the conversation has no assistant message")
        trace.add_template(self.start(msgs[:first]))
        for i in range(first, len(msgs)):
            if msgs[i]["role"] != "assistant":
                continue
            trace.add_sampled(self.encode(msgs[i]["content"]) + [self.eot_id], None)
            if i + 1 < len(msgs) and msgs[i + 1]["role"] == "user":
                trace.add_template(self.continuation(msgs[: i + 2], stopped=True))
        return trace


@dataclass
class TokenTrace:
    """One episode's token sequence: ids, loss mask (1 on sampled tokens), sampled logprobs."""

    ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    #: Index of the last sampled token (where the episode's reward goes); -1 before any.
    last_sampled: int = -1
    #: True when some sampled ids were re-encoded from text (a backend that returns no ids).
    from_text: bool = False

    @property
    def prompt_len(self) -> int:
        """Tokens before the first sampled one: the opening prompt."""
        return len(self.ids) if self.last_sampled < 0 else self.loss_mask.index(1)

    def add_template(self, ids: Sequence[int]) -> None:
        self.ids.extend(ids)
        self.loss_mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))

    def add_sampled(self, ids: Sequence[int], logprobs: Sequence[float] | None) -> None:
        if not ids:
            return
        self.ids.extend(ids)
        self.loss_mask.extend([1] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.last_sampled = len(self.ids) - 1

    def __len__(self) -> int:
        return len(self.ids)
