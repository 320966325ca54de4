"""``EnvSpec`` and ``Split``: what an env plugin declares about an environment.

Specs are cheap to build: ``factory`` and ``expert`` may be ``"module:attr"`` strings that are
imported only when an env is made, so listing envs never imports minigrid, a JVM or a browser.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentgym.env import TextEnv

_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]*$")


def resolve(target: Any) -> Any:
    """Import ``"package.module:attr"`` (or return a non-string target unchanged)."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


@dataclass
class Split:
    """A named set of task ids, optionally partitioned into categories.

    ``categories`` maps a category name to its task ids; every id of the split should be in one.
    For large splits give ``category_fn(task_id) -> category`` too, so that looking a category up
    does not build an index of every id (``categories`` may then hold ``range`` objects).
    """

    task_ids: Sequence[int]
    categories: Mapping[str, Sequence[int]] = field(default_factory=dict)
    description: str = ""
    category_fn: Callable[[int], str | None] | None = field(default=None, repr=False)
    _category_of: dict[int, str] | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.task_ids)

    def __iter__(self):
        return iter(self.task_ids)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self.task_ids

    def category_of(self, task_id: int) -> str | None:
        if self.category_fn is not None:
            return self.category_fn(task_id) if task_id in self.task_ids else None
        if self._category_of is None:
            self._category_of = {t: c for c, ids in self.categories.items() for t in ids}
        return self._category_of.get(task_id)

    def category_counts(self) -> dict[str, int]:
        return {c: len(ids) for c, ids in self.categories.items()}


@dataclass
class EnvSpec:
    """Everything the framework needs to know about one environment.

    ``factory(**kwargs)`` returns a :class:`agentgym.env.TextEnv`; ``expert(env)`` returns a callable
    ``act(observation, info) -> action`` that solves the env's tasks through its text actions.
    """

    name: str
    factory: Callable[..., TextEnv] | str
    description: str = ""
    splits: Mapping[str, Split] = field(default_factory=dict)
    default_max_turns: int = 20
    action_parser: str = "react"
    prompt: str = ""
    reward_range: tuple[float, float] = (0.0, 1.0)
    requires: tuple[str, ...] = ()
    expert: Callable[[TextEnv], Callable[[str, dict], str]] | str | None = None
    version: int = 0
    gym_name: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: Filled in by the plugin manager: the distribution and plugin that declared this spec.
    distribution: str | None = field(default=None, compare=False)
    plugin: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise ValueError(f"invalid env name {self.name!r}: use lowercase letters, digits, '-' and '_'")
        self.requires = tuple(self.requires)
        self.reward_range = (float(self.reward_range[0]), float(self.reward_range[1]))

    @property
    def gym_id(self) -> str:
        """The id under which the env is registered in Gymnasium's registry."""
        name = self.gym_name or "".join(p.capitalize() for p in re.split(r"[-_]", self.name))
        return f"agentgym/{name}-v{self.version}"

    def make(self, **kwargs: Any) -> TextEnv:
        env = resolve(self.factory)(**{**self.kwargs, **kwargs})
        env.agentgym_spec = self
        return env

    def make_expert(self, env: TextEnv) -> Callable[[str, dict], str]:
        if self.expert is None:
            raise LookupError(f"env {self.name!r} declares no expert")
        return resolve(self.expert)(env)

    def category_of(self, task_id: int) -> str | None:
        for split in self.splits.values():
            category = split.category_of(task_id)
            if category is not None:
                return category
        return None

    def split_of(self, task_id: int) -> str | None:
        for name, split in self.splits.items():
            if task_id in split:
                return name
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gym_id": self.gym_id,
            "description": self.description,
            "splits": {
                name: {
                    "size": len(split),
                    "categories": split.category_counts(),
                    "description": split.description,
                }
                for name, split in self.splits.items()
            },
            "default_max_turns": self.default_max_turns,
            "action_parser": self.action_parser,
            "prompt": self.prompt,
            "reward_range": list(self.reward_range),
            "requires": list(self.requires),
            "has_expert": self.expert is not None,
            "distribution": self.distribution,
        }
