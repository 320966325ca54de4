"""Train-task samplers: which tasks each training step plays. ``uniform`` draws every task alike
(AgentGym-RL's draw); ``difficulty`` draws tasks whose estimated pass rate is near a target, where
a GRPO group's samples are most likely to differ and so to teach something. Both track every
task's and category's recent success from the rollouts (:class:`PassRates`), so that a run logs
the drawn tasks' estimated pass rate whichever draws them. A sampler's state (its random stream
and rates) is part of a checkpoint: a resumed run draws the tasks an uninterrupted one would.
Samplers are registered by name through ``agentgym_task_samplers``, like algorithms."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentgym.errors import AgentGymError, lookup
from agentgym.plugins import get_registry
from agentgym_train.rollout.tasks import category_ids, get_split

#: (env, task id, success in [0, 1]) of one played episode
Outcome = tuple[str, int, float]


@dataclass
class TaskPool:
    """The tasks a run trains on: each env's task ids (ascending) and each id's category."""

    ids: dict[str, list[int]]
    category: Callable[[str, int], str]

    @classmethod
    def of_split(
        cls,
        envs: Sequence[str],
        split: str,
        limit: int | None = None,
        categories: Sequence[str] | None = None,
    ) -> TaskPool:
        """The first ``limit`` ids of each env's ``split`` (in ``categories`` only, when given)."""
        splits = {env: get_split(env, split) for env in envs}
        ids = {env: category_ids(env, split, categories, limit) for env in envs}
        for env, found in ids.items():
            if not found:
                raise AgentGymError(f"no train tasks: {env}'s {split!r} split selects none")
        return cls(ids, lambda env, task: splits[env].category_of(task) or "")


class TaskSampler(Protocol):
    """What the trainer calls on a task sampler."""

    def draw(self, k: int) -> list[tuple[str, int]]:
        """``k`` (env, task id) pairs for a step's groups."""

    def observe(self, outcomes: Iterable[Outcome]) -> None:
        """The step's played episodes, to update the pass-rate estimates."""

    def estimate(self, env: str, task_id: int) -> float:
        """A task's estimated pass rate now."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class PassRates:
    """Recent success of each task and each category, as decayed counts: each new observation of a
    key first scales its (successes, trials) by ``decay``, so older rollouts weigh less. A task's
    estimate is its counts shrunk toward its category's rate by ``strength`` pseudo-trials, and a
    category's toward its ``prior`` (0.5, the most uncertain rate, where none is given): a task
    never played is estimated by its category's rollouts."""

    def __init__(self, prior: Mapping[str, float] | None = None, strength: float = 2.0, decay: float = 0.8):
        if not 0 < decay <= 1:
            raise AgentGymError(f"decay must be in (0, 1], got {decay}")
        if strength <= 0:
            raise AgentGymError(f"strength must be > 0, got {strength}")
        if not isinstance(prior or {}, Mapping) or not all(
            isinstance(r, int | float) and 0 <= r <= 1 for r in (prior or {}).values()
        ):
            raise AgentGymError(f"prior must map category names to pass rates in [0, 1], got {prior!r}")
        self.prior, self.strength, self.decay = dict(prior or {}), float(strength), float(decay)
        self.tasks: dict[tuple[str, int], list[float]] = {}
        self.cats: dict[tuple[str, str], list[float]] = {}

    def category_rate(self, env: str, category: str) -> float:
        s, t = self.cats.get((env, category), (0.0, 0.0))
        return (s + self.strength * self.prior.get(category, 0.5)) / (t + self.strength)

    def rate(self, env: str, task_id: int, category: str) -> float:
        s, t = self.tasks.get((env, task_id), (0.0, 0.0))
        return (s + self.strength * self.category_rate(env, category)) / (t + self.strength)

    def add(self, outcomes: Iterable[Outcome], category: Callable[[str, int], str]) -> None:
        by_task: dict[tuple[str, int], list[float]] = {}
        for env, task_id, success in outcomes:
            by_task.setdefault((env, task_id), []).append(float(success))
        by_cat: dict[tuple[str, str], list[float]] = {}
        for (env, task_id), results in by_task.items():
            _decayed_add(self.tasks, (env, task_id), results, self.decay)
            by_cat.setdefault((env, category(env, task_id)), []).extend(results)
        for key, results in by_cat.items():
            _decayed_add(self.cats, key, results, self.decay)

    def state_dict(self) -> dict[str, Any]:
        return {"tasks": dict(self.tasks), "cats": dict(self.cats)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tasks = {k: list(v) for k, v in state["tasks"].items()}
        self.cats = {k: list(v) for k, v in state["cats"].items()}


def _decayed_add(counts: dict[Any, list[float]], key: Any, results: list[float], decay: float) -> None:
    s, t = counts.get(key, (0.0, 0.0))
    counts[key] = [decay * s + sum(results), decay * t + len(results)]


class UniformSampler:
    """Every task alike: an env, then one of its task ids, uniformly (AgentGym-RL's draw). Tracks
    pass rates only to report them."""

    def __init__(self, pool: TaskPool, seed: int, *, decay: float = 0.8):
        self.pool, self.rng = pool, random.Random(seed)
        self.rates = PassRates(decay=decay)
        self.envs = list(pool.ids)

    def draw(self, k: int) -> list[tuple[str, int]]:
        out = []
        for _ in range(k):
            env = self.envs[self.rng.randrange(len(self.envs))]
            ids = self.pool.ids[env]
            out.append((env, ids[self.rng.randrange(len(ids))]))
        return out

    def observe(self, outcomes: Iterable[Outcome]) -> None:
        self.rates.add(outcomes, self.pool.category)

    def estimate(self, env: str, task_id: int) -> float:
        return self.rates.rate(env, task_id, self.pool.category(env, task_id))

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.getstate(), "rates": self.rates.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.setstate(state["rng"])
        self.rates.load_state_dict(state["rates"])


class DifficultySampler(UniformSampler):
    """Tasks near a target pass rate (online difficulty filtering: a task's expected improvement
    is bounded below by the variance of its success, largest at 0.5). Each draw picks an env
    uniformly; then, with probability ``explore``, any of its tasks uniformly, else a task with
    probability proportional to ``exp(-(rate - target)^2 / (2 width^2))`` of its estimated pass
    rate. Tasks never played share their category's estimate, so a large split (BabyAI's 10,000
    seeds a level) is drawn category by category; ``prior`` (category -> rate) is where those
    estimates start (0.5 where not given), ``strength`` how many trials it is worth. A step draws
    distinct tasks while it can."""

    def __init__(
        self,
        pool: TaskPool,
        seed: int,
        *,
        target: float = 0.5,
        width: float = 0.2,
        explore: float = 0.1,
        prior: Mapping[str, float] | None = None,
        strength: float = 2.0,
        decay: float = 0.8,
    ):
        if not 0 <= target <= 1 or width <= 0 or not 0 <= explore <= 1:
            raise AgentGymError(
                f"difficulty sampler: target and explore in [0, 1], width > 0; got {target}, {explore}, {width}"
            )
        super().__init__(pool, seed, decay=decay)
        self.target, self.width, self.explore = float(target), float(width), float(explore)
        self.rates = PassRates(prior, strength, decay)
        self.by_cat: dict[str, dict[str, list[int]]] = {}
        for env, ids in pool.ids.items():
            cats: dict[str, list[int]] = {}
            for t in ids:
                cats.setdefault(pool.category(env, t), []).append(t)
            self.by_cat[env] = cats

    def weight(self, rate: float) -> float:
        return math.exp(-((rate - self.target) ** 2) / (2 * self.width**2))

    def draw(self, k: int) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for _ in range(k):
            env = self.envs[self.rng.randrange(len(self.envs))]
            taken = {t for e, t in out if e == env}
            for _attempt in range(8):  # a repeat within the step is drawn again, a few times
                task = self._one(env)
                if task not in taken:
                    break
            out.append((env, task))
        return out

    def _one(self, env: str) -> int:
        ids = self.pool.ids[env]
        if self.rng.random() < self.explore:
            return ids[self.rng.randrange(len(ids))]
        played = sorted(t for e, t in self.rates.tasks if e == env)
        options: list[tuple[float, Any]] = [(self.weight(self.estimate(env, t)), ("task", t)) for t in played]
        played_in: dict[str, int] = {}
        for t in played:
            cat = self.pool.category(env, t)
            played_in[cat] = played_in.get(cat, 0) + 1
        for cat, members in self.by_cat[env].items():
            unseen = len(members) - played_in.get(cat, 0)
            if unseen > 0:  # the category's unplayed tasks, as one option of their summed weight
                options.append((unseen * self.weight(self.rates.category_rate(env, cat)), ("category", cat)))
        seen = set(played)
        kind, pick = _weighted(self.rng, options)
        if kind == "task":
            return pick
        members = self.by_cat[env][pick]
        while True:  # an unplayed task of the category (one exists: its count was positive)
            t = members[self.rng.randrange(len(members))]
            if t not in seen:
                return t


def _weighted(rng: random.Random, options: Sequence[tuple[float, Any]]) -> Any:
    weights = [w for w, _ in options]
    if sum(weights) <= 0:  # every weight underflowed (a tiny width): no preference left, so uniform
        return options[rng.randrange(len(options))][1]
    return rng.choices([item for _, item in options], weights)[0]


BUILTIN: dict[str, Callable[..., TaskSampler]] = {"uniform": UniformSampler, "difficulty": DifficultySampler}


def _factory(name: str) -> Callable[..., TaskSampler]:
    return lookup(get_registry().named("agentgym_task_samplers"), name, "task sampler")


def check_task_sampler(name: str, params: Mapping[str, Any]) -> None:
    """An unknown sampler, a parameter it does not take or a value it refuses fails here, before
    a model loads: the sampler is built once over a one-task pool."""
    factory = _factory(name)
    try:
        factory(TaskPool({"check": [0]}, lambda env, task: "check"), 0, **params)
    except (TypeError, ValueError) as exc:
        raise AgentGymError(f"task sampler {name!r}: {exc}") from None


def make_task_sampler(name: str, pool: TaskPool, seed: int, **params: Any) -> TaskSampler:
    """The registered sampler ``name`` over ``pool``."""
    return _factory(name)(pool, seed, **params)
