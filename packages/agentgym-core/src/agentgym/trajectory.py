"""Episode trajectories: one JSON object per line, schema-versioned.

Also converts to and from the AgentGym conversation format
(``{"item_id": "babyai_3", "conversations": [{"from": "human"|"gpt", "value", "loss"}]}``) so data
sets published for AgentGym load here and ours load there.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA_VERSION = 2  # 2: the termination "stopped"

# "stopped": ended by whoever played it before the env or the turn cap did (`agentgym play`: :quit or
# the end of piped input).
Termination = Literal["success", "failure", "max_turns", "env_truncated", "format_error", "error", "stopped"]
TERMINATIONS: tuple[str, ...] = (
    "success",
    "failure",
    "max_turns",
    "env_truncated",
    "format_error",
    "error",
    "stopped",
)


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant"]
    content: str


class Step(BaseModel):
    """One turn: what the model wrote, what was sent to the env, and what came back."""

    model_config = ConfigDict(extra="allow")
    raw_output: str = ""
    action: str | None = None  # None when the output did not parse (format error)
    observation: str = ""
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)

    @property
    def format_error(self) -> bool:
        return self.action is None

    @property
    def valid_action(self) -> bool:
        return self.action is not None and bool(self.info.get("valid_action", True))


class Tokens(BaseModel):
    """The token sequence a trainer sees: ``loss_mask`` is 1 exactly on sampled tokens;
    ``logprobs`` are the sampling backend's (0 elsewhere); ``reward_index`` is the last sampled
    token, where the episode's reward goes."""

    ids: list[int]
    loss_mask: list[int]
    logprobs: list[float] | None = None
    reward_index: int | None = None


class Episode(BaseModel):
    """A complete episode (also a partial one whose env failed: ``termination="error"``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_version: int = SCHEMA_VERSION
    env: str
    task_id: int
    split: str | None = None
    category: str | None = None
    policy: str | None = None
    seed: int | None = None
    max_turns: int | None = None
    messages: list[Message] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    return_: float = Field(default=0.0, alias="return")
    success: bool = False
    num_turns: int = 0
    termination: Termination | None = None
    error: str | None = None
    tokens: Tokens | None = None
    #: Which of the n samples of its task this episode is.
    sample: int = 0
    #: Reflexion notes of the task's earlier failed trials, given to this one in its system prompt.
    reflections: list[str] = Field(default_factory=list)
    #: Ended because the context could not hold another reply.
    context_full: bool = False
    #: ``tokens`` holds ids re-encoded from a text-only backend's replies, not the sampled ones.
    tokens_from_text: bool = False
    #: Training: the rollout group (one draw of a task in a step, its n samples compared); else None.
    group: int | None = None

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v > SCHEMA_VERSION:
            raise ValueError(
                f"episode schema version {v} is newer than this agentgym supports ({SCHEMA_VERSION})"
            )
        return v

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.steps]

    @property
    def item_id(self) -> str:
        return f"{self.env}_{self.task_id}"

    def finish(self, termination: Termination | None = None) -> Episode:
        """Fill ``return``, ``num_turns``, ``success`` and ``termination`` from the steps."""
        self.return_ = math.fsum(self.rewards)
        self.num_turns = len(self.steps)
        last = self.steps[-1] if self.steps else None
        if last is not None and "success" in last.info:
            self.success = bool(last.info["success"])
        if termination is None:
            if self.success:
                termination = "success"
            elif last is not None and last.terminated:
                termination = "failure"
            elif last is not None and last.truncated:
                termination = "env_truncated"
            else:
                termination = "max_turns"
        self.termination = termination
        return self

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=False)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        return cls.model_validate(data)

    # -- AgentGym conversation format ---------------------------------------------------------
    def to_agentgym(self) -> dict[str, Any]:
        """Export as AgentGym's ``{"item_id", "conversations"}``; assistant turns carry the loss.

        AgentGym has no system role: a system message becomes a human turn answered by ``OK``, the
        way AgentGym's own data set opens every conversation. An assistant message imported with
        ``loss: false`` (that ``OK``) keeps it.
        """
        convs: list[dict[str, Any]] = []
        for m in self.messages:
            if m.role == "system":
                convs.append({"from": "human", "value": m.content, "loss": False})
                convs.append({"from": "gpt", "value": "OK", "loss": False})
            elif m.role == "user":
                convs.append({"from": "human", "value": m.content, "loss": False})
            else:
                convs.append(
                    {"from": "gpt", "value": m.content, "loss": getattr(m, "loss", None) is not False}
                )
        return {"item_id": self.item_id, "conversations": convs}

    @classmethod
    def from_agentgym(cls, item: dict[str, Any], **fields: Any) -> Episode:
        """Import one AgentGym item; ``env`` and ``task_id`` come from ``item_id`` (``babyai_3``)."""
        item_id = str(item.get("item_id", ""))
        env, _, tid = item_id.rpartition("_")
        if not env or not tid.lstrip("-").isdigit():
            raise ValueError(f"item_id {item_id!r} is not of the form '<env>_<task id>'")
        role = {
            "human": "user",
            "user": "user",
            "gpt": "assistant",
            "assistant": "assistant",
            "system": "system",
        }
        messages = []
        for turn in item.get("conversations", []):
            who = turn.get("from")
            if who not in role:
                raise ValueError(f"{item_id}: unknown speaker {who!r} in conversations")
            message = Message(role=role[who], content=str(turn.get("value", "")))
            if role[who] == "assistant" and turn.get("loss") is False:
                message.loss = False  # e.g. the "OK" answering the instruction: not a training target
            messages.append(message)
        data = {"env": env, "task_id": int(tid), "messages": messages, **fields}
        data.setdefault(
            "num_turns",
            sum(m.role == "assistant" and getattr(m, "loss", True) is not False for m in messages),
        )
        return cls(**data)


def write_episodes(path: str | Path | IO[str], episodes: Iterable[Episode], *, append: bool = False) -> int:
    """Write episodes as JSON Lines; returns how many were written."""
    n = 0
    if hasattr(path, "write"):
        for ep in episodes:
            path.write(ep.to_json() + "\n")  # type: ignore[union-attr]
            n += 1
        return n
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a" if append else "w", encoding="utf-8") as f:
        return write_episodes(f, episodes)


class TornLineWarning(RuntimeWarning):
    """A JSON Lines file written by us ended in a torn line (its writer was killed mid-line)."""


def read_jsonl(path: str | Path, what: str = "record") -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each line of a JSON Lines file that we write as we go (episodes,
    metrics). A torn last line (no newline at its end and not JSON: the writer was killed while
    writing it) is skipped with a :class:`TornLineWarning`; any other bad line raises ``ValueError``
    naming the file and line (a file edited by hand, or one that is not ours)."""
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                if not line.endswith("\n"):  # only the last line can lack its newline
                    warnings.warn(
                        f"{path}:{lineno}: skipping a torn last line (its writer stopped mid-line)",
                        TornLineWarning,
                        stacklevel=2,
                    )
                    return
                raise ValueError(f"{path}:{lineno}: not a valid {what}: {exc}") from exc
            yield lineno, value


def read_episodes(path: str | Path) -> Iterator[Episode]:
    """Read episodes from JSON Lines; a bad line raises ``ValueError`` naming the file and line,
    except a torn last line (see :func:`read_jsonl`), skipped with a :class:`TornLineWarning`."""
    for lineno, value in read_jsonl(path, "episode"):
        try:
            yield Episode.from_dict(value)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{lineno}: not a valid episode: {exc}") from exc


def export_agentgym(episodes: Iterable[Episode], path: str | Path) -> int:
    """Write episodes as an AgentGym conversation data set (one JSON list)."""
    items = [ep.to_agentgym() for ep in episodes]
    Path(path).write_text(json.dumps(items, ensure_ascii=False, indent=1), encoding="utf-8")
    return len(items)


def import_agentgym(path: str | Path) -> list[Episode]:
    """Read an AgentGym conversation data set (a JSON list, or JSON Lines)."""
    text = Path(path).read_text(encoding="utf-8").strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path}: not a JSON list: {exc}") from exc
    else:  # an input data set, not a file we append to: every bad line is an error, the last too
        items = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except ValueError as exc:
                    raise ValueError(f"{path}:{lineno}: not JSON: {exc}") from exc
    return [Episode.from_agentgym(item) for item in items]
