"""AgentGym core: text environments for training LLM agents with multi-turn RL.

>>> import agentgym
>>> env = agentgym.make("guess")                        # in-process
>>> env = agentgym.connect("http://127.0.0.1:36001", "guess")   # the same env, served over HTTP
>>> obs, info = env.reset(options={"task_id": 3})

Importing the package registers every installed env with Gymnasium, so that
``gymnasium.make("agentgym/Guess-v0")`` (or ``"agentgym:agentgym/Guess-v0"``) works at once.

``API_VERSION`` is the version of the plugin API this package implements; a plugin module declares
the one it was built for (``AGENTGYM_API_VERSION = "1"``), checked when it loads (``agentgym.api_version``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from agentgym.api_version import API_VERSION
from agentgym.env import TextEnv
from agentgym.errors import AgentGymError
from agentgym.hookspecs import hookimpl
from agentgym.spec import EnvSpec, InstanceCost, Split

if TYPE_CHECKING:
    from agentgym.client import AsyncEnvPool, RemoteEnv

__version__ = "0.1.0"

__all__ = [
    "API_VERSION",
    "AgentGymError",
    "AsyncEnvPool",
    "EnvSpec",
    "InstanceCost",
    "Split",
    "TextEnv",
    "connect",
    "env_specs",
    "hookimpl",
    "make",
]


def make(name: str, **kwargs: Any) -> TextEnv:
    """An in-process instance of the installed env ``name``."""
    from agentgym.plugins import get_env_spec

    return get_env_spec(name).make(**kwargs)


def connect(url: str, env: str, **kwargs: Any) -> RemoteEnv:
    """A remote env served by ``agentgym serve`` at ``url``, with the same interface as ``make``."""
    from agentgym.client import RemoteEnv

    return RemoteEnv(url, env, **kwargs)


def env_specs() -> dict[str, EnvSpec]:
    """Specs of every installed env, by name (loads plugins and registers them with Gymnasium)."""
    from agentgym.plugins import env_specs as _env_specs

    return _env_specs()


def __getattr__(name: str) -> Any:
    if name == "AsyncEnvPool":
        from agentgym.client import AsyncEnvPool

        return AsyncEnvPool
    raise AttributeError(f"module 'agentgym' has no attribute {name!r}")


def _register_with_gymnasium() -> None:
    """Load the plugins and register their envs with Gymnasium (~50 ms), unless ``agentgym`` is being
    imported by a plugin module (or its package) itself: loading plugins now would register that
    half-imported module with no hooks. The first use of the registry then registers them.
    ``AGENTGYM_PLUGINS`` and friends are read here; ``agentgym.plugins.reset_registry()`` rereads them."""
    from importlib import metadata

    from agentgym.plugins import ENTRY_POINT_GROUP

    loading: set[str] = set()
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        parts = ep.module.split(".")
        loading.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    loading.discard("agentgym")
    for name in loading:
        spec = getattr(sys.modules.get(name), "__spec__", None)
        if getattr(spec, "_initializing", False):
            return
    try:
        env_specs()
    except Exception:  # noqa: BLE001 - importing must not fail: a problem is raised where envs are used
        pass


_register_with_gymnasium()
