"""``EnvSpec`` and ``Split``: what an env plugin declares about an environment.

Specs are cheap to build: ``factory`` and ``expert`` may be ``"module:attr"`` strings that are
imported only when an env is made, so listing envs never imports minigrid, a JVM or a browser.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentgym.env import TextEnv

NAME_RE = re.compile(r"^[a-z][a-z0-9_-]*$")
_GYM_ID_RE = re.compile(r"^agentgym/[A-Za-z][A-Za-z0-9_-]*-v\d+$")


def resolve(target: Any) -> Any:
    """Import ``"package.module:attr"`` (or return a non-string target unchanged)."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class InstanceCost:
    """What one instance of an env costs, as measured (the env's README gives the figures).

    The framework bounds how many instances it holds at once from these and the machine
    (:func:`agentgym.resources.instance_bound`)."""

    memory_mb: float = 1.0  #: resident memory of one instance, after some use
    #: cores one instance keeps busy outside the caller's thread (a JVM, a browser); 0: none
    cpu: float = 0.0
    startup_s: float = 0.0  #: seconds to make one instance
    #: a reset restores any task exactly, so one instance serves many episodes in turn
    reusable: bool = True
    #: a step is pure Python, never waits on I/O and takes well under a millisecond: a server
    #: steps it on its event loop's thread, without a thread hand-off (``server/inline.py``)
    cheap_step: bool = False


#: Splits up to this size have their categories checked id by id when plugins load.
EXACT_CHECK_IDS = 200_000


def _shared_id(a: Sequence[int], b: Sequence[int]) -> int | None:
    """An id in both sequences, or ``None``; O(smaller) for ranges and sets, else O(a + b)."""
    if isinstance(a, range) and isinstance(b, range) and a.step == b.step == 1:
        low, high = max(a.start, b.start), min(a.stop, b.stop)
        return low if low < high else None
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    lookup = large if isinstance(large, (range, set, frozenset)) else set(large)
    return next((t for t in small if t in lookup), None)


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

    def coverage_problem(self) -> str | None:
        """Why the split's ids repeat or its categories do not partition it (``None`` when neither).

        Splits of up to ``EXACT_CHECK_IDS`` ids are checked id by id; larger ones (ranges with a
        ``category_fn``) by their sizes only, which keeps loading plugins fast."""
        if not isinstance(self.task_ids, range) and len(self.task_ids) <= EXACT_CHECK_IDS:
            if len(set(self.task_ids)) != len(self.task_ids):
                return f"{len(self.task_ids) - len(set(self.task_ids))} task id(s) are listed twice"
        if not self.categories:
            return None
        total = sum(len(ids) for ids in self.categories.values())
        if len(self.task_ids) > EXACT_CHECK_IDS:
            if total != len(self.task_ids):
                return f"its categories hold {total} ids, the split {len(self.task_ids)}"
            return None
        ids = self.task_ids if isinstance(self.task_ids, range) else set(self.task_ids)
        seen: dict[int, str] = {}
        for category, members in self.categories.items():
            for t in members:
                if t in seen:
                    return f"task {t} is in categories {seen[t]!r} and {category!r}"
                seen[t] = category
        outside = [t for t in seen if t not in ids]
        if outside:
            return f"categories hold ids that are not in the split (e.g. {outside[0]})"
        if len(seen) != len(ids):
            missing = next(t for t in ids if t not in seen)
            return f"{len(ids) - len(seen)} task id(s) have no category (e.g. {missing})"
        return None


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
    #: What one instance costs; bounds how many are held at once (``agentgym.resources``).
    cost: InstanceCost = field(default_factory=InstanceCost)
    #: How AgentGym's original server for this env shaped its replies, for the compatible routes:
    #: ``(env, route, reply) -> JSON`` or its ``"module:attr"`` (``agentgym.server.dialects``).
    compat: Callable[..., Any] | str | None = None
    #: Every task id >= 0 names a task (BabyAI's level and seed), not only the splits' ids. When
    #: ``False`` and the splits are not empty, ``reset`` refuses an id in no split
    #: (:class:`agentgym.errors.UnknownTaskError`) rather than the env wrapping it onto another task.
    open_task_ids: bool = False
    #: The state an observation shows, for turn-level credit (GiGPO's anchor states): a callable
    #: ``(observation, info) -> str | None`` or its ``"module:attr"``, called on what a step
    #: returned; observations with equal keys in one task's episodes are the same state. None (or
    #: a None key): the observation text itself. (docs/plugins.md, "State keys")
    state_key: Callable[[str, Mapping[str, Any]], str | None] | str | None = None
    #: Filled in by the plugin manager: the distribution and plugin that declared this spec.
    distribution: str | None = field(default=None, compare=False)
    plugin: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not NAME_RE.match(self.name):
            raise ValueError(f"invalid env name {self.name!r}: use lowercase letters, digits, '-' and '_'")
        self.requires = tuple(self.requires)
        self.reward_range = (float(self.reward_range[0]), float(self.reward_range[1]))

    @property
    def title(self) -> str:
        """The env's display name: ``gym_name``, else ``name`` in CamelCase (``web-arena``: ``WebArena``)."""
        return self.gym_name or "".join(p.capitalize() for p in re.split(r"[-_]", self.name))

    @property
    def gym_id(self) -> str:
        """The id under which the env is registered in Gymnasium's registry."""
        return f"agentgym/{self.title}-v{self.version}"

    def make(self, **kwargs: Any) -> TextEnv:
        env = resolve(self.factory)(**{**self.kwargs, **kwargs})
        env.agentgym_spec = self
        return env

    def make_expert(self, env: TextEnv) -> Callable[[str, dict], str]:
        if self.expert is None:
            raise LookupError(f"env {self.name!r} declares no expert")
        return resolve(self.expert)(env)

    def anchor_of(self, observation: str, info: Mapping[str, Any]) -> str:
        """The state key of an observation (``state_key``), else the observation text."""
        key = resolve(self.state_key)(observation, info) if self.state_key is not None else None
        return observation if key is None else str(key)

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

    def problems(self) -> list[str]:
        """What is wrong with this spec, checked when plugins load (empty when it is sound): the
        action parser exists, splits share no task id, a split's categories cover it exactly."""
        from agentgym.parsers import PARSERS

        out = []
        if self.action_parser not in PARSERS:
            out.append(f"action_parser {self.action_parser!r} does not exist (known: {', '.join(PARSERS)})")
        names = list(self.splits)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                shared = _shared_id(self.splits[a].task_ids, self.splits[b].task_ids)
                if shared is not None:
                    out.append(f"splits {a!r} and {b!r} share task ids (e.g. {shared})")
        for name, split in self.splits.items():
            problem = split.coverage_problem()
            if problem:
                out.append(f"split {name!r}: {problem}")
        if self.cost.memory_mb <= 0 or self.cost.cpu < 0 or self.cost.startup_s < 0:
            out.append(f"cost {self.cost} needs memory_mb > 0, cpu >= 0 and startup_s >= 0")
        if not _GYM_ID_RE.match(self.gym_id):
            out.append(
                f"gym id {self.gym_id!r} is not a valid Gymnasium id (gym_name: letters, digits, - and _)"
            )
        if self.default_max_turns < 1:
            out.append(f"default_max_turns must be >= 1, got {self.default_max_turns}")
        return out

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
            "cost": dataclasses.asdict(self.cost),
            "distribution": self.distribution,
        }
