"""``TextEnv``: the environment protocol, a ``gymnasium.Env`` over strings.

Subclasses implement two methods:

- ``reset_task(task_id) -> (observation, info)``: start the task with that id (same id, same task);
- ``step_action(action) -> (observation, reward, terminated, truncated, info)``: apply one parsed
  action; an invalid action returns an explanatory observation with ``info["valid_action"] = False``.

The base class handles what every env must get right the same way: task-id resolution from
``options``/``seed``, refusing ids that name no task (:class:`~agentgym.errors.UnknownTaskError`,
:meth:`TextEnv.check_task_id`), the ``info`` keys the framework relies on (``task_id``, ``category``,
``instruction`` (on reset), ``valid_action``, ``success``, ``raw_score``), over-long or non-string actions, and
stepping after the episode ended.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

import gymnasium as gym

from agentgym.errors import EpisodeOverError, UnknownTaskError
from agentgym.resets import RESETS
from agentgym.spaces import MAX_ACTION_CHARS, action_space, observation_space


class TaskCatalog(Protocol):
    """What an env reads of its spec (an ``EnvSpec`` is one): its splits and its tasks' categories
    (and, where it has them, ``name`` and ``open_task_ids``: see :meth:`TextEnv.check_task_id`)."""

    splits: Mapping[str, Any]

    def category_of(self, task_id: int) -> str | None: ...


StepReturn = tuple[str, float, bool, bool, dict[str, Any]]


class TextEnv(gym.Env[str, str]):
    """Base class of every AgentGym environment."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array"]}

    #: Set by ``EnvSpec.make``; gives categories and the default task for a bare ``reset()``.
    agentgym_spec: TaskCatalog | None = None

    #: Instance attributes that legitimately keep their value across episodes, or differ between two
    #: instances after the same reset: caches, handles (a JVM, a browser page), a generator seeded
    #: once. Every other attribute must be the same after ``reset`` on a used instance as on a fresh
    #: one (the conformance kit checks it). The names of every class of an env's MRO count, so a
    #: subclass lists only its own. Here: Gymnasium's generator, seeded by ``reset(seed=...)`` alone,
    #: and the category looked up last (a cache, filled by the first step that needs it).
    persistent_attributes: ClassVar[tuple[str, ...]] = ("_np_random", "_np_random_seed", "_category")

    def __init__(self, render_mode: str | None = None):
        self.observation_space = observation_space()
        self.action_space = action_space()
        self.render_mode = render_mode
        self.task_id: int | None = None
        self.instruction: str = ""
        self.episode_over = False
        self.num_steps = 0
        self.rewards: list[float] = []  # this episode's step rewards
        self.last_observation = ""
        self._category: tuple[int | None, str | None] = (None, None)  # (task id, its category)

    # -- to implement -------------------------------------------------------------------------
    def reset_task(self, task_id: int) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def step_action(self, action: str) -> StepReturn:
        raise NotImplementedError

    def check_task_id(self, task_id: int) -> None:
        """Raise :class:`UnknownTaskError` when ``task_id`` (an int >= 0) names no task; ``reset``
        calls it before ``reset_task``, so an env never wraps an id around onto another task.

        By default the tasks are the ids of the spec's splits, unless the spec declares
        ``open_task_ids`` (every id is a task, e.g. a level and a seed) or has no non-empty split.
        Override where an env's tasks come from its own options (a task file given to the factory)."""
        spec = self.agentgym_spec
        if spec is None or getattr(spec, "open_task_ids", False):
            return
        splits = {name: split for name, split in spec.splits.items() if len(split)}
        if not splits or any(task_id in split for split in splits.values()):
            return
        name = getattr(spec, "name", None) or type(self).__name__
        raise UnknownTaskError.among(task_id, name, {n: s.task_ids for n, s in splits.items()})

    def available_actions(self) -> list[str] | None:
        """The actions valid now, where the env has a finite list (else ``None``)."""
        return None

    # -- optional: resets kept in the process's ResetCache (resets.py) --------------------------
    def save_reset(self, observation: str, info: dict[str, Any]) -> Any:
        """Called right after ``reset_task``: what ``load_reset`` needs to put an instance of this
        class back into this state and answer ``(observation, info)`` again, never changed once
        made (it is shared by every instance of the process). None (the default): not cached."""
        return None

    def load_reset(self, saved: Any) -> tuple[str, dict[str, Any]]:
        """Start the episode ``save_reset`` saved, from a copy of it: ``(observation, info)``,
        exactly as ``reset_task`` answered it. Needed only where ``save_reset`` is implemented."""
        raise NotImplementedError

    # -- gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        super().reset(seed=seed)
        task_id = (options or {}).get("task_id")
        if task_id is None:
            task_id = self._default_task(seed)
        if isinstance(task_id, bool) or not isinstance(task_id, int):
            try:
                task_id = int(task_id)
            except (TypeError, ValueError):
                raise ValueError(f"task_id must be an integer, got {task_id!r}") from None
        if task_id < 0:
            raise ValueError(f"task_id must be >= 0, got {task_id}")
        self.check_task_id(task_id)
        self.task_id = task_id
        self.episode_over = False
        self.num_steps = 0
        self.rewards = []
        observation, info = self._reset_task(task_id, seed)
        self.instruction = info.get("instruction", self.instruction)
        info.setdefault("instruction", self.instruction)
        info = self._complete_info(info)
        self.last_observation = observation
        return observation, info

    def step(self, action: Any) -> StepReturn:
        if self.task_id is None:
            raise EpisodeOverError("call reset() before step()")
        if self.episode_over:
            raise EpisodeOverError("the episode has ended; call reset() to start a new one")
        self.num_steps += 1
        problem = self._check_action(action)
        if problem is not None:
            info = self._complete_info({"valid_action": False})
            self.last_observation = self.invalid_action_observation(action, problem)
            return self.last_observation, 0.0, False, False, info
        observation, reward, terminated, truncated, info = self.step_action(action)
        reward = float(reward)
        self.rewards.append(reward)
        self.episode_over = bool(terminated or truncated)
        self.last_observation = observation
        return observation, reward, bool(terminated), bool(truncated), self._complete_info(info)

    @property
    def score(self) -> float:
        """The episode's return so far: the exactly rounded sum (``math.fsum``) of its step rewards,
        computed as ``Episode.return`` is."""
        return math.fsum(self.rewards)

    def reward_to(self, target_return: float) -> float:
        """The step reward that brings this episode's return to ``target_return``: exactly where a
        float can (always for 1.0 from a return in [0, 1], so a solved task's return is exactly 1.0),
        else the nearest not below it.

        For envs that pay partial credit as increments of a running score (ScienceWorld's 0-100): a
        plain difference of two floats can leave the summed return a rounding error off (a solved
        task at 0.9999999999999999)."""
        first = target_return - self.score
        candidates = [first, first + (target_return - math.fsum([*self.rewards, first]))]
        for base in list(candidates):
            up = down = base
            for _ in range(4):  # the exact reward, when there is one, is within a few ulps
                up, down = math.nextafter(up, math.inf), math.nextafter(down, -math.inf)
                candidates += [up, down]
        # the nearest return not below the target (a failure's return of 0 is then 0 or a rounding
        # error above it, never below the env's reward range); below it only if nothing else is near
        best, best_key = first, (True, math.inf)
        for reward in candidates:
            total = math.fsum([*self.rewards, reward])
            key = (total < target_return, abs(total - target_return))
            if key < best_key:
                best, best_key = reward, key
                if key == (False, 0.0):
                    break
        return best

    def invalid_action_observation(self, action: Any, reason: str) -> str:
        """The observation for an action the base class rejects before ``step_action`` (empty,
        over-long or not text). Override to phrase it like the env's own invalid-action messages."""
        actions = self.available_actions()
        listing = f"\nAvailable actions: {json.dumps(actions, ensure_ascii=False)}" if actions else ""
        return f"{reason}{listing}"

    def render(self) -> Any:
        if self.render_mode == "ansi" or self.render_mode is None:
            return self.last_observation
        return None

    # -- helpers ------------------------------------------------------------------------------
    def _reset_task(self, task_id: int, seed: int | None) -> tuple[str, dict[str, Any]]:
        """``reset_task``, or a copy of the same reset from the process's cache where the env can
        save its resets (a GRPO group resets one task n times)."""
        if type(self).save_reset is TextEnv.save_reset:
            return self.reset_task(task_id)
        key = (type(self), task_id, seed)
        saved = RESETS.get(key)
        if saved is not None:
            return self.load_reset(saved)
        observation, info = self.reset_task(task_id)
        if RESETS.wants(key):
            saved = self.save_reset(observation, info)
            if saved is not None:
                RESETS.put(key, saved)
        return observation, info

    def _default_task(self, seed: int | None) -> int:
        """A bare ``reset(seed=s)`` picks a task deterministically from the train split."""
        spec = self.agentgym_spec
        ids = None
        if spec is not None and spec.splits:
            split = spec.splits.get("train") or next(iter(spec.splits.values()))
            ids = split.task_ids
        if not ids:
            return 0 if seed is None else int(seed) % (1 << 31)
        return ids[0 if seed is None else int(seed) % len(ids)]

    def _check_action(self, action: Any) -> str | None:
        if isinstance(action, bytes):
            return "Invalid action: actions are text; got bytes."
        if not isinstance(action, str):
            return f"Invalid action: actions are text; got {type(action).__name__}."
        if len(action) > MAX_ACTION_CHARS:
            return f"Invalid action: {len(action)} characters is too long (at most {MAX_ACTION_CHARS})."
        if not action.strip():
            return "Invalid action: the action is empty."
        return None

    def _complete_info(self, info: dict[str, Any]) -> dict[str, Any]:
        info.setdefault("task_id", self.task_id)
        if "category" not in info and self.agentgym_spec is not None and self.task_id is not None:
            # looked up once per task: a split's lookup may scan its ids, and it ran every step
            cached = getattr(self, "_category", (None, None))  # a subclass may skip __init__
            if cached[0] != self.task_id:
                cached = self._category = (self.task_id, self.agentgym_spec.category_of(self.task_id))
            info["category"] = cached[1]
        info.setdefault("valid_action", True)
        info.setdefault("success", False)
        info.setdefault("raw_score", self.score)
        if "available_actions" not in info:
            actions = self.available_actions()
            if actions is not None:
                info["available_actions"] = actions
        return info


def close_quietly(env: Any) -> None:
    """Close ``env``, ignoring a failure of its ``close``: a broken env's close must not keep a
    session alive, end a rollout or hide the error that is being handled."""
    try:
        env.close()
    except Exception:  # noqa: BLE001 - nothing the caller could do about it
        pass
