"""Gymnasium's side of the env registry: every usable env as ``agentgym/<Name>-v<version>``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentgym.spec import EnvSpec


def register_gymnasium(specs: Iterable[EnvSpec]) -> None:
    """Register each env as ``agentgym/<Name>-v<version>`` in Gymnasium's registry."""
    import gymnasium

    for spec in specs:
        if spec.gym_id in gymnasium.registry:
            continue
        try:
            gymnasium.register(
                id=spec.gym_id,
                entry_point=_gym_entry_point(spec),
                max_episode_steps=spec.default_max_turns,
                disable_env_checker=True,
            )
        except gymnasium.error.Error:  # EnvSpec.problems reports a bad id; the others still register
            continue


def _gym_entry_point(spec: EnvSpec) -> Callable[..., Any]:
    def make(**kwargs: Any) -> Any:
        return spec.make(**kwargs)

    return make
