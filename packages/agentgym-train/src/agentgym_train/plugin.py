"""The train package's plugin: policy backends, RL algorithms, horizon schedules and CLI commands,
registered like any plugin's.

Import-light: torch and transformers load only when a policy, an algorithm or a command is used.
"""

from __future__ import annotations

from typing import Any

from agentgym import hookimpl


def _hf(**options: Any) -> Any:
    from agentgym_train.policies.hf import HFPolicy

    return HFPolicy(**options)


def _openai(**options: Any) -> Any:
    from agentgym_train.policies.openai import OpenAIPolicy

    return OpenAIPolicy(**options)


def _vllm(**options: Any) -> Any:
    from agentgym_train.policies.vllm import VLLMPolicy

    return VLLMPolicy(**options)


def _scripted(**options: Any) -> Any:
    from agentgym_train.policies.scripted import ScriptedPolicy

    return ScriptedPolicy(**options)


@hookimpl
def agentgym_policies():
    return {"hf": _hf, "openai": _openai, "vllm": _vllm, "scripted": _scripted}


@hookimpl
def agentgym_algorithms():
    from agentgym_train.specs import BUILTIN

    return list(BUILTIN)


@hookimpl
def agentgym_horizon_schedules():
    from agentgym_train.horizon import BUILTIN

    return dict(BUILTIN)


@hookimpl
def agentgym_cli(cli):
    from agentgym_train.cli import register

    register(cli)
