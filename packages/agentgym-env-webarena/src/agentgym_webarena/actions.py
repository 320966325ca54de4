"""WebArena's action space, parsed from the text of the first triple-backtick block.

``click [id]``, ``type [id] [text] [0|1]`` (1, the default, presses Enter after typing), ``hover [id]``,
``press [keys]``, ``scroll [up|down]``, ``new_tab``, ``tab_focus [i]``, ``close_tab``, ``goto [url]``,
``go_back``, ``go_forward``, ``stop [answer]``. Square brackets are required around arguments, as in
WebArena's prompt; a trailing period or stray backticks are tolerated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentgym.errors import AgentGymError

USAGE = (
    "click [id], type [id] [text] [0|1], hover [id], press [keys], scroll [up|down], new_tab, "
    "tab_focus [i], close_tab, goto [url], go_back, go_forward, stop [answer]"
)


class ActionError(AgentGymError):
    code = "invalid_action"
    status = 422


@dataclass(frozen=True)
class Action:
    kind: str
    element: int | None = None
    text: str = ""
    enter: bool = True
    index: int | None = None


_ARGS = re.compile(r"\[(.*?)\](?=\s*(?:\[|$))", re.S)


def parse_action(raw: str) -> Action:
    text = raw.strip().strip("`").strip()
    if text.endswith(".") and not text.endswith("].") and "[" not in text:
        text = text[:-1]
    m = re.match(r"^([a-z_]+)\s*(.*)$", text, re.S)
    if not m:
        raise ActionError(f"cannot read the action {raw[:80]!r}; the actions are: {USAGE}")
    kind, rest = m.group(1).lower(), m.group(2).strip().rstrip(".").strip()
    args = _ARGS.findall(rest)
    if kind in ("click", "hover"):
        return Action(kind, element=_id(kind, args))
    if kind == "type":
        if len(args) < 2:
            raise ActionError("type needs an element and a text: type [id] [text] [0|1]")
        enter = True
        if len(args) >= 3:
            if args[2].strip() not in ("0", "1"):
                raise ActionError("type's third argument is 0 (do not press Enter) or 1 (press Enter)")
            enter = args[2].strip() == "1"
        return Action(kind, element=_id(kind, args), text=args[1], enter=enter)
    if kind == "press":
        if not args or not args[0].strip():
            raise ActionError("press needs keys: press [Control+a], press [Enter]")
        return Action(kind, text=args[0].strip())
    if kind == "scroll":
        direction = (args[0] if args else rest).strip().lower()
        if direction not in ("up", "down"):
            raise ActionError("scroll takes [up] or [down]")
        return Action(kind, text=direction)
    if kind == "tab_focus":
        try:
            return Action(kind, index=int(args[0]))
        except (IndexError, ValueError):
            raise ActionError("tab_focus needs a tab number: tab_focus [0]") from None
    if kind == "goto":
        if not args or not args[0].strip():
            raise ActionError("goto needs a URL: goto [http://...]")
        return Action(kind, text=args[0].strip())
    if kind == "stop":
        return Action(kind, text=args[0] if args else rest)
    if kind in ("new_tab", "close_tab", "go_back", "go_forward"):
        return Action(kind)
    raise ActionError(f"unknown action {kind!r}; the actions are: {USAGE}")


def _id(kind: str, args: list[str]) -> int:
    try:
        return int(args[0].strip())
    except (IndexError, ValueError):
        raise ActionError(f"{kind} needs an element id from the observation: {kind} [id]") from None


def playwright_keys(keys: str) -> str:
    """WebArena's key names to Playwright's: ``Ctrl+a`` -> ``Control+a``, ``Cmd`` -> ``Meta``."""
    parts = [p.strip() for p in keys.split("+")]
    names = {
        "ctrl": "Control",
        "control": "Control",
        "cmd": "Meta",
        "meta": "Meta",
        "alt": "Alt",
        "shift": "Shift",
        "enter": "Enter",
        "esc": "Escape",
        "escape": "Escape",
        "tab": "Tab",
        "backspace": "Backspace",
        "delete": "Delete",
        "space": "Space",
    }
    return "+".join(names.get(p.lower(), p) for p in parts)
