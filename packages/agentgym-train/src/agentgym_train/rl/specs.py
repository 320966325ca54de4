"""The algorithm registry: ``AlgorithmSpec`` and the built-in algorithms.

Torch-free, so listing plugins (``agentgym plugins``) stays fast: an estimator is named as
``"module:function"`` and imported when first used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.errors import lookup
from agentgym.plugins import get_registry
from agentgym.spec import resolve


@dataclass
class AlgorithmSpec:
    """An RL algorithm: how advantages are estimated, whether it needs a critic or groups.

    ``estimate``: a callable or ``"module:function"``, called as ``estimate(batch, **params)`` with
    an :class:`agentgym_train.rl.algorithms.Batch`, returning ``(advantages, returns)``, both ``B x T``.
    ``needs_groups``: the estimator compares samples of one task, so a step needs ``n >= 2``.
    ``params``: the estimator's defaults, overridable from the trainer's config.
    """

    name: str
    estimate: Callable[..., Any] | str
    needs_critic: bool = False
    needs_groups: bool = False
    description: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def estimator(self) -> Callable[..., Any]:
        return resolve(self.estimate)


_M = "agentgym_train.rl.algorithms"
BUILTIN: list[AlgorithmSpec] = [
    AlgorithmSpec(
        "gae",
        f"{_M}:gae",
        needs_critic=True,
        description="PPO with a value head (GAE)",
        params={"gamma": 1.0, "lam": 1.0},
    ),
    AlgorithmSpec(
        "grpo",
        f"{_M}:grpo",
        needs_groups=True,
        description="group-normalised outcome advantage",
        params={"norm_by_std": True},
    ),
    AlgorithmSpec(
        "gigpo",
        f"{_M}:gigpo",
        needs_groups=True,
        description="GRPO plus turn-level credit among equal states (GiGPO)",
        params={"gamma": 0.95, "omega": 1.0, "norm_by_std": True, "step_norm_by_std": False},
    ),
    AlgorithmSpec("rloo", f"{_M}:rloo", needs_groups=True, description="leave-one-out group baseline"),
    AlgorithmSpec(
        "reinforce_pp",
        f"{_M}:reinforce_pp",
        description="REINFORCE++: whitened discounted returns",
        params={"gamma": 1.0},
    ),
    AlgorithmSpec(
        "reinforce_pp_baseline",
        f"{_M}:reinforce_pp_baseline",
        needs_groups=True,
        description="REINFORCE++ with a group-mean baseline",
    ),
]


def algorithms() -> dict[str, AlgorithmSpec]:
    """Every registered algorithm by name (the ``agentgym_algorithms`` hook, read through the
    registry: a failing plugin is reported as for any hook, a name two plugins register is an
    error naming both)."""

    return get_registry().named("agentgym_algorithms")


def get_algorithm(name: str) -> AlgorithmSpec:
    return lookup(algorithms(), name, "algorithm")
