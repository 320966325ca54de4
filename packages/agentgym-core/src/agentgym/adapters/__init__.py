"""Adapters: any installed AgentGym env, in-process or on an ``agentgym serve`` URL, in another
library's own environment interface. Each module imports its library only when used, and its
library installs as an extra of ``agentgym-core``:

- ``agentgym.adapters.trl``: an ``environment_factory`` for TRL's ``GRPOTrainer`` (``[trl]``);
- ``agentgym.adapters.verifiers``: ``load_environment(...)`` for verifiers (``[verifiers]``);
- ``agentgym.adapters.openenv``: OpenEnv's protocol, served by ``agentgym serve`` (``[openenv]``);
- ``agentgym.adapters.skyrl``: SkyRL-gym text envs, ``agentgym/<name>`` (``[skyrl]``).

What every adapter keeps: an invalid action is an observation with reward 0 (as in AgentGym); an
env or server failure is an error in the library's own terms, never a zero reward; ``terminated``
and ``truncated`` stay apart where the library has both, and where it has one ``done`` it is
their "or". What does not map is listed in the module that adapts it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from agentgym.env import TextEnv
from agentgym.errors import AgentGymError, UnknownEnvError
from agentgym.spec import EnvSpec


class EnvFailure(AgentGymError):
    """The env (or its server) failed during another library's episode: the episode is an error in
    that library's terms, never a reward of 0."""

    code = "env_failure"


def require(module: str, extra: str) -> ModuleType:
    """``module`` imported, or an ImportError that says which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"agentgym.adapters.{extra} needs {module!r}: pip install 'agentgym-core[{extra}]'",
            name=e.name or module,  # the missing package, as a bare ImportError would say
        ) from e


def open_env(env: str, *, url: str | None = None, **kwargs: Any) -> TextEnv:
    """The env ``env``: served at ``url`` when one is given (``agentgym serve``), else in-process."""
    import agentgym

    if url:
        return agentgym.connect(url, env, **kwargs)  # type: ignore[return-value]
    return agentgym.make(env, **kwargs)


def _served_only(**_: Any) -> Any:
    raise RuntimeError("this env is only served: open it with agentgym.connect")


def spec_of(name: str, *, url: str | None = None, remote: Any = None, token: str | None = None) -> EnvSpec:
    """The env's spec: the installed one, else (an env only the server at ``url`` has) the one the
    server describes, which holds all an adapter reads: parser, prompt, turn cap, reward range.
    ``remote`` is an open client of that server, if there is one."""
    from agentgym.client import RemoteEnv
    from agentgym.plugins import get_env_spec

    try:
        return get_env_spec(name)
    except UnknownEnvError:
        if url is None:
            raise
    client = remote if remote is not None else RemoteEnv(url, "", token=token)
    try:
        served = client.specs()
    finally:
        if remote is None:
            client.close()
    for s in served:
        if s["name"] == name:
            return EnvSpec(
                name=name,
                factory=_served_only,
                description=s.get("description", ""),
                default_max_turns=int(s["default_max_turns"]),
                action_parser=s["action_parser"],
                prompt=s.get("prompt", ""),
                reward_range=tuple(s.get("reward_range", (0.0, 1.0))),
            )
    raise UnknownEnvError(name=name, known=[s["name"] for s in served])
