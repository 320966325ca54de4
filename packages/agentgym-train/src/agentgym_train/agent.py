"""Agent prompting: what the model is told, and what it is told back when its reply does not parse.

The system prompt is the env's own (``EnvSpec.prompt``, else the ``instruction`` its reset gives);
the first user turn is the first observation; every later user turn is an observation, or the
parser's explanation of a format error. Nothing here knows a model family: the tokenizer's chat
template renders the messages (see :mod:`agentgym_train.chat`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym.spec import EnvSpec

REFLECTION_PROMPT = (
    "You did not complete the task in that attempt. In two or three sentences, say what went wrong and "
    "what you will do differently next time. Do not write an action."
)


def system_prompt(spec: EnvSpec, info: dict[str, Any], reflections: Sequence[str] = ()) -> str:
    """The env's prompt, followed by reflections from earlier failed trials of the same task."""
    prompt = spec.prompt or str(info.get("instruction", ""))
    if reflections:
        notes = "\n".join(f"- Trial {i + 1}: {r.strip()}" for i, r in enumerate(reflections))
        prompt += f"\n\nYou have tried this task before and failed. Your reflections:\n{notes}"
    return prompt


def format_error_observation(error: str | None) -> str:
    """The user turn sent back for a reply that did not parse (the env is not stepped)."""
    return error or "Format error: no action found in your reply."
