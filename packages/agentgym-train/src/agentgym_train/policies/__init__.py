"""Policy backends, registered through the ``agentgym_policies`` hook (ours like any plugin's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentgym.errors import lookup
from agentgym.plugins import get_registry
from agentgym_train.policies.base import (
    BasePolicy,
    Generation,
    Policy,
    Request,
    Sampling,
    check_policy,
    generate,
)

__all__ = [
    "BasePolicy",
    "Generation",
    "Policy",
    "Request",
    "Sampling",
    "check_policy",
    "generate",
    "make_policy",
    "policy_factory",
    "policy_names",
]


def policy_names() -> list[str]:
    return sorted(get_registry().named("agentgym_policies"))


def policy_factory(name: str) -> Callable[..., Policy]:
    """The factory registered for policy backend ``name``."""

    return lookup(get_registry().named("agentgym_policies"), name, "policy", code="unknown_policy")


def make_policy(name: str, **options: Any) -> Policy:
    """Build the policy backend ``name`` (``hf``, ``openai``, ``vllm``, ``scripted``, or a plugin's)."""
    return check_policy(policy_factory(name)(**options), f"policy {name!r}")
