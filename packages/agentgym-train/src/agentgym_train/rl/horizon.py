"""Horizon (turn-cap) schedules: how many turns an episode may take at each training step.

``scaling_inter`` is ScalingInter-RL's schedule with the reference's semantics: ``rounds=[h1, h2,
h3]`` and ``every=N``: steps 1..N use h1, N+1..2N h2, then h3 to the end. It is a pure function
of the step, so a resumed run picks up the right stage by itself. ``adaptive`` moves to the next
horizon once the truncation rate at the current one falls below a threshold; its stage is state,
saved in checkpoints. Schedules are registered through ``agentgym_horizon_schedules``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym.errors import AgentGymError, lookup
from agentgym.plugins import get_registry


class Fixed:
    """The same horizon at every step."""

    def __init__(self, horizon: int = 20):
        if horizon < 1:
            raise AgentGymError(f"horizon must be >= 1, got {horizon}")
        self.horizon = int(horizon)

    def __call__(self, step: int) -> int:
        return self.horizon

    def update(self, step: int, metrics: dict[str, float]) -> None:
        """Told each step's rollout metrics; a fixed schedule ignores them."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def _rounds(rounds: Sequence[int]) -> list[int]:
    rounds = [int(r) for r in rounds]
    if not rounds or any(r < 1 for r in rounds):
        raise AgentGymError(f"rounds must be a non-empty list of positive turn caps, got {rounds}")
    if rounds != sorted(rounds):
        raise AgentGymError(f"rounds must not decrease (ScalingInter grows the horizon), got {rounds}")
    return rounds


class ScalingInter(Fixed):
    """ScalingInter-RL: ``rounds[k]`` for steps ``k*every+1 .. (k+1)*every`` (1-based), the last
    round to the end. Stage at a step = ``min((step - 1) // every, len(rounds) - 1)``."""

    def __init__(self, rounds: Sequence[int] = (6, 13, 20), every: int = 100):
        self.rounds = _rounds(rounds)
        if every < 1:
            raise AgentGymError(f"every must be >= 1, got {every}")
        self.every = int(every)

    def stage(self, step: int) -> int:
        return min(max(step - 1, 0) // self.every, len(self.rounds) - 1)

    def __call__(self, step: int) -> int:
        return self.rounds[self.stage(step)]


class Adaptive(Fixed):
    """Start at ``rounds[0]``; after a step whose truncation rate (episodes cut by the horizon)
    is below ``threshold``, and at least ``min_steps`` steps at this horizon, move to the next."""

    def __init__(self, rounds: Sequence[int] = (6, 13, 20), threshold: float = 0.2, min_steps: int = 1):
        self.rounds = _rounds(rounds)
        if not 0 <= threshold <= 1:
            raise AgentGymError(f"threshold must be in [0, 1], got {threshold}")
        self.threshold, self.min_steps = float(threshold), int(min_steps)
        self.stage_, self.steps_at_stage = 0, 0

    def __call__(self, step: int) -> int:
        return self.rounds[self.stage_]

    def update(self, step: int, metrics: dict[str, float]) -> None:
        self.steps_at_stage += 1
        if (
            self.stage_ < len(self.rounds) - 1
            and self.steps_at_stage >= self.min_steps
            and metrics.get("truncation_rate", 1.0) < self.threshold
        ):
            self.stage_, self.steps_at_stage = self.stage_ + 1, 0

    def state_dict(self) -> dict[str, Any]:
        return {"stage": self.stage_, "steps_at_stage": self.steps_at_stage}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stage_, self.steps_at_stage = int(state["stage"]), int(state["steps_at_stage"])


BUILTIN = {"fixed": Fixed, "scaling_inter": ScalingInter, "adaptive": Adaptive}


def make_schedule(name: str, **params: Any) -> Fixed:
    """Build a registered schedule by name with its parameters; clear errors for bad ones."""

    factory = lookup(get_registry().named("agentgym_horizon_schedules"), name, "horizon schedule")
    try:
        return factory(**params)
    except TypeError as exc:
        raise AgentGymError(f"horizon schedule {name!r}: {exc}") from None
