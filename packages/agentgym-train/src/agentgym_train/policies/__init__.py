"""Policy backends, registered through the ``agentgym_policies`` hook (ours like any plugin's)."""

from __future__ import annotations

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
    "policy_names",
]


def policy_names() -> list[str]:
    from agentgym.plugins import get_registry

    return sorted(get_registry().named("agentgym_policies"))


def make_policy(name: str, **options: Any) -> Any:
    """Build the policy backend ``name`` (``hf``, ``openai``, ``vllm``, ``scripted``, or a plugin's)."""
    from agentgym.plugins import get_registry

    factories = get_registry().named("agentgym_policies")
    return lookup(factories, name, "policy", code="unknown_policy")(**options)
