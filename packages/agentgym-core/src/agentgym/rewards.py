"""Reward transforms: map an episode's per-step env rewards to per-step training rewards.

Each transform is ``f(episode, **params) -> list[float]`` (one value per step). Core registers the
built-ins below through its own plugin (``agentgym.builtin``), exactly as a third party would; look
transforms up with :func:`get_reward_transform`, which sees every installed plugin's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentgym.errors import AgentGymError, lookup
from agentgym.trajectory import Episode

RewardTransform = Callable[..., list[float]]


def identity(episode: Episode) -> list[float]:
    """The env's step rewards unchanged."""
    return [s.reward for s in episode.steps]


def normalize(episode: Episode, low: float = 0.0, high: float = 1.0) -> list[float]:
    """Rescale rewards from the env's ``[low, high]`` range to [0, 1] (a 0–100 score becomes 0–1)."""
    if high <= low:
        raise ValueError(f"normalize needs high > low, got [{low}, {high}]")
    scale = high - low
    # Increments are rescaled without the offset so that the return maps return -> (return - low) / scale
    # when the first step carries the offset.
    rewards = [s.reward / scale for s in episode.steps]
    if rewards:
        rewards[0] -= low / scale
    return rewards


def success_only(episode: Episode, value: float = 1.0) -> list[float]:
    """``value`` on the last step if the episode succeeded, 0 everywhere else."""
    rewards = [0.0] * len(episode.steps)
    if rewards and episode.success:
        rewards[-1] = value
    return rewards


def step_penalty(episode: Episode, penalty: float = 0.01) -> list[float]:
    """The env rewards minus ``penalty`` per step: favours shorter solutions."""
    return [s.reward - penalty for s in episode.steps]


def format_penalty(episode: Episode, penalty: float = 0.1) -> list[float]:
    """The env rewards minus ``penalty`` on each step whose output did not parse or was invalid."""
    return [s.reward - (penalty if not s.valid_action else 0.0) for s in episode.steps]


BUILTIN_TRANSFORMS: dict[str, RewardTransform] = {
    "identity": identity,
    "normalize": normalize,
    "success_only": success_only,
    "step_penalty": step_penalty,
    "format_penalty": format_penalty,
}


def reward_transforms() -> dict[str, RewardTransform]:
    from agentgym.plugins import get_registry

    return get_registry().named("agentgym_reward_transforms")


def get_reward_transform(name: str) -> RewardTransform:
    return lookup(reward_transforms(), name, "reward transform")


def apply_reward_transform(name: str, episode: Episode, **params: Any) -> list[float]:
    """Transform ``name``'s rewards for ``episode``: one per step, or a clear error naming it."""
    rewards = get_reward_transform(name)(episode, **params)
    if len(rewards) != len(episode.steps):
        raise AgentGymError(
            f"reward transform {name!r} returned {len(rewards)} rewards for an episode of "
            f"{len(episode.steps)} steps: it must return one per step"
        )
    return rewards
