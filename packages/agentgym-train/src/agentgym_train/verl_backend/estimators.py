"""Our algorithms in verl's advantage-estimator registry.

The built-in ones are verl's own estimators under verl's names (:data:`translate.ESTIMATORS`;
the parity tests check they compute what ours do). An algorithm a third party registers through
``agentgym_algorithms`` is bridged: registered with verl as ``agentgym_<name>``, called with verl's
token rewards, response mask and group ids, so the same plugin trains on both backends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentgym_train.specs import AlgorithmSpec, algorithms
from agentgym_train.verl_backend.translate import ESTIMATORS, estimator_name


def bridge(spec: AlgorithmSpec) -> Callable[..., Any]:
    """A verl estimator (``token_level_rewards, response_mask, index, config``) running ``spec``'s."""

    def estimator(
        token_level_rewards: Any, response_mask: Any, index: Any = None, config: Any = None, **_: Any
    ):
        from agentgym_train.algorithms import Batch

        rows = token_level_rewards.shape[0]
        groups = list(index) if index is not None else list(range(rows))
        params = dict(spec.params)
        extra = config.get("agentgym_params") if config is not None and hasattr(config, "get") else None
        params.update(dict(extra or {}))
        return spec.estimator()(Batch(token_level_rewards, response_mask.float(), groups), **params)

    estimator.__name__ = f"agentgym_{spec.name}"
    return estimator


def register() -> list[str]:
    """Register every installed plugin algorithm with verl (idempotent); returns verl's names."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    names = []
    for spec in algorithms().values():
        if spec.name in ESTIMATORS or spec.needs_critic:
            continue
        name = estimator_name(spec.name)
        if name not in ADV_ESTIMATOR_REGISTRY:
            register_adv_est(name)(bridge(spec))
        names.append(name)
    return names
