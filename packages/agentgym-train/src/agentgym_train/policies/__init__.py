"""Policy backends, registered through the ``agentgym_policies`` hook (ours like any plugin's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentgym.errors import lookup
from agentgym_train.policies.base import AsyncPolicy, Generation, Policy, Request, Sampling, generate

__all__ = [
    "AsyncPolicy",
    "Generation",
    "Policy",
    "Request",
    "Sampling",
    "generate",
    "make_policy",
    "policy_factory",
    "policy_names",
]


def policy_names() -> list[str]:
    from agentgym.plugins import get_registry

    return sorted(get_registry().named("agentgym_policies"))


def policy_factory(name: str) -> Callable[..., Policy | AsyncPolicy]:
    """The factory registered for policy backend ``name``."""
    from agentgym.plugins import get_registry

    return lookup(get_registry().named("agentgym_policies"), name, "policy", code="unknown_policy")


def make_policy(name: str, **options: Any) -> Policy | AsyncPolicy:
    """Build the policy backend ``name`` (``hf``, ``openai``, ``vllm``, ``scripted``, or a plugin's)."""
    return policy_factory(name)(**options)
