"""Agent prompting, shared by training, evaluation and the viewer's play page: what a model is told,
and what it is told back when its reply does not parse.

The system prompt is the env's own (``EnvSpec.prompt``, else the ``instruction`` its reset gives);
the first user turn is the first observation; every later user turn is an observation
(:func:`observation_turn`), or the parser's explanation of a format error
(:func:`format_error_observation`). Nothing here knows a model family: a tokenizer's chat template
renders the messages.

``format_hint`` (off by default) is for models that do not follow the env's prompt on their own,
such as small chat models zero-shot: the system prompt ends with an explicit statement of the
reply format of the env's parser and one example reply, and every observation ends with a
one-line reminder of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym.parsers import format_action, get_parser
from agentgym.spec import EnvSpec

REFLECTION_PROMPT = (
    "You did not complete the task in that attempt. In two or three sentences, say what went wrong and "
    "what you will do differently next time. Do not write an action."
)


#: Per action parser: the reply format, stated in full (system prompt) and as a one-line reminder
#: (each observation), the words before the example's action, and a generic example action.
FORMATS: dict[str, tuple[str, str, str, str]] = {
    "react": (
        "Reply with exactly two lines:\nThought: <one short sentence>\nAction: <one action>",
        'Reply with "Thought: <one short sentence>", then a line "Action: <one action>".',
        "Thought: I choose my next step.\n",
        "look around",
    ),
    "tags": (
        "Reply with exactly one tag: <search> query </search> to search, or <answer> answer </answer> "
        "to give the final answer.",
        "Reply with one <search> query </search> or one <answer> answer </answer>.",
        "",
        "<search> the question's main subject </search>",
    ),
    "fenced": (
        "Reply with one short sentence, then exactly one action in a ``` code block.",
        "Reply with one short sentence, then one action in a ``` code block.",
        "I choose my next step.\n",
        "scroll [down]",
    ),
    "plain": (
        "Reply with exactly one line: the action, nothing else.",
        "Reply with the action only.",
        "",
        "wait",
    ),
}


def _format(parser: str) -> tuple[str, str, str, str]:
    shown = format_action(parser, "<action>")
    return FORMATS.get(parser, (f"Reply in this format:\n{shown}", f"Reply as: {shown}", "", "<action>"))


def example_action(parser: str, prompt: str, available_actions: Sequence[str] | None = None) -> str:
    """An action to show in the example reply: the first the env lists now, else the last one the
    env's prompt shows (the last line of it that ``parser`` reads), else the parser's generic one.
    Never the expert's action: that would tell the model the task's first step."""
    if available_actions:
        return available_actions[0]
    parse = get_parser(parser)
    for line in reversed(prompt.splitlines()):
        parsed = parse(line)
        if parsed.action is not None:
            return parsed.action
    return _format(parser)[3]


def format_statement(parser: str, action: str) -> str:
    """The reply format of ``parser``, with an example reply whose action is ``action``: what
    ``format_hint`` adds to the system prompt."""
    statement, _, before, _ = _format(parser)
    return f"{statement}\n\nExample reply:\n{before}{format_action(parser, action)}"


def format_reminder(parser: str) -> str:
    """One line restating the reply format of ``parser``: what ``format_hint`` adds to each
    observation."""
    return _format(parser)[1]


def system_prompt(
    spec: EnvSpec, info: dict[str, Any], reflections: Sequence[str] = (), *, format_hint: bool = False
) -> str:
    """The env's prompt (with the reply format stated under ``format_hint``), followed by
    reflections from earlier failed trials of the same task."""
    prompt = spec.prompt or str(info.get("instruction", ""))
    if format_hint:
        action = example_action(spec.action_parser, prompt, info.get("available_actions"))
        prompt += "\n\n" + format_statement(spec.action_parser, action)
    if reflections:
        notes = "\n".join(f"- Trial {i + 1}: {r.strip()}" for i, r in enumerate(reflections))
        prompt += f"\n\nYou have tried this task before and failed. Your reflections:\n{notes}"
    return prompt


def opening_messages(
    spec: EnvSpec,
    info: dict[str, Any],
    observation: str,
    reflections: Sequence[str] = (),
    *,
    format_hint: bool = False,
) -> list[dict[str, str]]:
    """An episode's first two messages: the system prompt, then the first observation as a user turn."""
    return [
        {"role": "system", "content": system_prompt(spec, info, reflections, format_hint=format_hint)},
        {
            "role": "user",
            "content": observation_turn(spec.action_parser, observation, format_hint=format_hint),
        },
    ]


def format_error_observation(error: str | None) -> str:
    """The user turn sent back for a reply that did not parse (the env is not stepped)."""
    return error or "Format error: no action found in your reply."


def observation_turn(parser: str, observation: str, *, format_hint: bool) -> str:
    """An env observation as the user turn that follows it: under ``format_hint``, with the format
    reminder of ``parser`` below it."""
    if not format_hint:
        return observation
    return f"{observation}\n\n{format_reminder(parser)}"
