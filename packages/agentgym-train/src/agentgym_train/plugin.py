"""The train package's plugin: policy backends, RL algorithms, horizon schedules, task samplers and
CLI commands, registered like any plugin's. It adds the specs of the package's own hooks (policies,
horizon schedules, task samplers: :mod:`agentgym_train.hookspecs`) as it loads.

Import-light: torch and transformers load only when a policy, an algorithm or a command is used.
"""

from __future__ import annotations

from typing import Any

import pluggy

from agentgym import hookimpl

# the plugin API this plugin is written for (agentgym.api_version checks it when it loads)
AGENTGYM_API_VERSION = "1"


@hookimpl
def agentgym_add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    from agentgym_train import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def _hf(**options: Any) -> Any:
    from agentgym_train.policies.hf import HFPolicy

    return HFPolicy(**options)


def _openai(**options: Any) -> Any:
    from agentgym_train.policies.openai import OpenAIPolicy

    return OpenAIPolicy(**options)


def _vllm(
    model: str | None = None,
    *,
    chat_template: str | None = None,
    seed: int = 0,
    base_url: Any = None,
    api_key: Any = None,
    concurrency: Any = None,
    device: Any = None,
    **engine_options: Any,
) -> Any:
    """vLLM's offline engine. The command line's options for other backends (``base_url``,
    ``api_key``, ``concurrency``, ``device``) are not vLLM's and are dropped; any other keyword
    goes to ``vllm.LLM`` (``dtype``, ``max_model_len``...)."""
    from agentgym_train.policies.vllm import VLLMPolicy

    return VLLMPolicy(model, chat_template=chat_template, seed=seed, **engine_options)


def _scripted(**options: Any) -> Any:
    from agentgym_train.policies.scripted import ScriptedPolicy

    return ScriptedPolicy(**options)


@hookimpl
def agentgym_policies():
    """``hf``, ``openai``, ``vllm`` and ``scripted``: each factory takes ``**kwargs``, so it is
    given every option set on the command line (see the hookspec) and ignores those it does not
    use; ``vllm``'s passes the rest to ``vllm.LLM``."""
    return {"hf": _hf, "openai": _openai, "vllm": _vllm, "scripted": _scripted}


@hookimpl
def agentgym_algorithms():
    from agentgym_train.rl.specs import BUILTIN

    return list(BUILTIN)


@hookimpl
def agentgym_horizon_schedules():
    from agentgym_train.rl.horizon import BUILTIN

    return dict(BUILTIN)


@hookimpl
def agentgym_task_samplers():
    from agentgym_train.rollout.task_sampling import BUILTIN

    return dict(BUILTIN)


@hookimpl
def agentgym_cli(cli):
    from agentgym_train.cli import register

    register(cli)
