"""The plugin manager: loads the ``agentgym`` entry-point group and collects what plugins declare.

``AGENTGYM_PLUGINS=babyai,train`` limits loading to those entry-point names (core's own built-ins,
entry point ``core``, always load: they are the reward transforms everyone relies on). Two plugins
with one name, or two envs with one name, are errors that name both distributions. An
implementation of a hook that has no spec fails at load (``check_pending``).
``AGENTGYM_PLUGIN_MODULES=pkg.module,...`` also loads plugin modules that have no entry point.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any

import pluggy

from agentgym import hookspecs
from agentgym.errors import PluginError, UnknownEnvError
from agentgym.spec import EnvSpec

ENTRY_POINT_GROUP = hookspecs.PROJECT
ALWAYS_LOADED = frozenset({"core"})


@dataclass
class PluginInfo:
    name: str
    distribution: str
    version: str
    module: str
    hooks: list[str] = field(default_factory=list)
    registers: dict[str, list[str]] = field(default_factory=dict)


def _extra_modules() -> list[str]:
    """``AGENTGYM_PLUGIN_MODULES=pkg.mod,other``: plugin modules loaded without an entry point
    (a plugin under development, or a test's); inherited by ``serve --workers`` processes."""
    raw = os.environ.get("AGENTGYM_PLUGIN_MODULES", "")
    return [m.strip() for m in raw.split(",") if m.strip()]


def _requested_plugins() -> set[str] | None:
    raw = os.environ.get("AGENTGYM_PLUGINS", "").strip()
    if not raw:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()} | ALWAYS_LOADED


class PluginRegistry:
    """One pluggy manager plus the registries built from its hooks (built lazily, cached)."""

    def __init__(self, entry_points: Iterable[metadata.EntryPoint] | None = None, *, load: bool = True):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._dists: dict[str, tuple[str, str]] = {}  # plugin name -> (distribution, version)
        self._lock = threading.RLock()
        self._envs: dict[str, EnvSpec] | None = None
        if load:
            self._load(entry_points)

    # -- loading ------------------------------------------------------------------------------
    def _load(self, entry_points: Iterable[metadata.EntryPoint] | None) -> None:
        if entry_points is None:
            entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
        wanted = _requested_plugins()
        seen: dict[str, str] = {}
        for ep in entry_points:
            dist = ep.dist.name if ep.dist is not None else "<unknown>"
            if ep.name in seen and seen[ep.name] != dist:
                raise PluginError(
                    f"two plugins are named {ep.name!r}: one from distribution {seen[ep.name]!r}, "
                    f"one from {dist!r}; uninstall one of them"
                )
            seen[ep.name] = dist
            if wanted is not None and ep.name not in wanted:
                continue
            if self.pm.has_plugin(ep.name):
                continue  # the same distribution seen twice on sys.path
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must say who it is
                raise PluginError(f"plugin {ep.name!r} from {dist!r} failed to import: {exc}") from exc
            version = ep.dist.version if ep.dist is not None else ""
            self.register(plugin, ep.name, distribution=dist, version=version)
        if wanted is not None:
            missing = wanted - set(seen)
            if missing:
                raise PluginError(
                    f"AGENTGYM_PLUGINS names plugins that are not installed: {', '.join(sorted(missing))} "
                    f"(installed: {', '.join(sorted(seen)) or 'none'})"
                )
        for module_name in _extra_modules():
            if self.pm.has_plugin(module_name):
                continue
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                raise PluginError(f"AGENTGYM_PLUGIN_MODULES: cannot import {module_name!r}: {exc}") from exc
            self.register(module, module_name, distribution=f"<module {module_name}>")
        self.check()

    def register(self, plugin: Any, name: str, *, distribution: str = "<runtime>", version: str = "") -> None:
        """Register a plugin object (a module or an instance with ``@hookimpl`` methods)."""
        with self._lock:
            if self.pm.has_plugin(name):
                raise PluginError(
                    f"two plugins are named {name!r}: one from distribution {self._dists[name][0]!r}, "
                    f"one from {distribution!r}"
                )
            self.pm.register(plugin, name=name)
            self._dists[name] = (distribution, version)
            self._envs = None
            self.check()

    def unregister(self, name: str) -> None:
        with self._lock:
            self.pm.unregister(name=name)
            self._dists.pop(name, None)
            self._envs = None

    def check(self) -> None:
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"{exc} (known hooks: {', '.join(hook_names())})") from exc

    # -- registries ---------------------------------------------------------------------------
    def _per_plugin(self, hook_name: str) -> list[tuple[str, Any]]:
        """Call one hook plugin by plugin; ``(plugin name, result)`` in registration order."""
        hook = getattr(self.pm.hook, hook_name)
        out = []
        for impl in hook.get_hookimpls():  # registration order
            result = impl.function()
            if result is not None:
                out.append((impl.plugin_name, result))
        return out

    def envs(self) -> dict[str, EnvSpec]:
        with self._lock:
            if self._envs is None:
                envs: dict[str, EnvSpec] = {}
                for plugin_name, specs in self._per_plugin("agentgym_envs"):
                    dist = self._dists.get(plugin_name, ("<runtime>", ""))[0]
                    for spec in specs:
                        if not isinstance(spec, EnvSpec):
                            raise PluginError(
                                f"plugin {plugin_name!r} ({dist}) returned {spec!r}, not an EnvSpec"
                            )
                        if spec.name in envs:
                            other = envs[spec.name]
                            raise PluginError(
                                f"env {spec.name!r} is declared twice: by plugin {other.plugin!r} from "
                                f"distribution {other.distribution!r} and by plugin {plugin_name!r} from {dist!r}"
                            )
                        spec.distribution, spec.plugin = dist, plugin_name
                        envs[spec.name] = spec
                self._envs = envs
                register_gymnasium(envs.values())
            return self._envs

    def env(self, name: str) -> EnvSpec:
        envs = self.envs()
        if name not in envs:
            known = ", ".join(sorted(envs)) or "none installed"
            raise UnknownEnvError(f"unknown env {name!r} (installed: {known})")
        return envs[name]

    def named(self, hook_name: str) -> dict[str, Any]:
        """Merge a hook returning ``{name: object}`` over all plugins; duplicate names are errors."""
        merged: dict[str, Any] = {}
        owner: dict[str, str] = {}
        for plugin_name, mapping in self._per_plugin(hook_name):
            items = mapping.items() if isinstance(mapping, Mapping) else ((m.name, m) for m in mapping)
            for key, value in items:
                if key in merged:
                    raise PluginError(
                        f"{hook_name}: {key!r} is registered by plugin {owner[key]!r} "
                        f"({self._dists.get(owner[key], ('?',))[0]}) and by {plugin_name!r} "
                        f"({self._dists.get(plugin_name, ('?',))[0]})"
                    )
                merged[key], owner[key] = value, plugin_name
        return merged

    def plugins(self) -> list[PluginInfo]:
        infos: dict[str, PluginInfo] = {}
        for name, plugin in self.pm.list_name_plugin():
            dist, version = self._dists.get(name, ("<runtime>", ""))
            module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__qualname__
            infos[name] = PluginInfo(name=name, distribution=dist, version=version, module=module)
        for hook_name in hook_names():
            hook = getattr(self.pm.hook, hook_name)
            for impl in hook.get_hookimpls():
                infos[impl.plugin_name].hooks.append(hook_name)
        for hook_name, label in _REGISTERING_HOOKS.items():
            for plugin_name, result in self._per_plugin(hook_name):
                if isinstance(result, Mapping):
                    names = list(result)
                else:
                    names = [getattr(r, "name", repr(r)) for r in result]
                infos[plugin_name].registers.setdefault(label, []).extend(names)
        return sorted(infos.values(), key=lambda p: p.name)


_REGISTERING_HOOKS = {
    "agentgym_envs": "envs",
    "agentgym_reward_transforms": "reward_transforms",
    "agentgym_algorithms": "algorithms",
    "agentgym_horizon_schedules": "horizon_schedules",
    "agentgym_policies": "policies",
}


def hook_names() -> list[str]:
    return sorted(n for n in dir(hookspecs) if n.startswith("agentgym_"))


def register_gymnasium(specs: Iterable[EnvSpec]) -> None:
    """Register each env as ``agentgym/<Name>-v<version>`` in Gymnasium's registry."""
    import gymnasium

    for spec in specs:
        if spec.gym_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=spec.gym_id,
            entry_point=_gym_entry_point(spec),
            max_episode_steps=spec.default_max_turns,
            disable_env_checker=True,
        )


def _gym_entry_point(spec: EnvSpec) -> Callable[..., Any]:
    def make(**kwargs: Any) -> Any:
        return spec.make(**kwargs)

    return make


_registry: PluginRegistry | None = None
_registry_lock = threading.Lock()


def get_registry() -> PluginRegistry:
    """The process-wide registry, loaded from installed entry points on first use."""
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = PluginRegistry()
        return _registry


def reset_registry() -> None:
    """Forget the loaded plugins (the next ``get_registry()`` reloads; for tests and ``AGENTGYM_PLUGINS``)."""
    global _registry
    with _registry_lock:
        _registry = None


def env_specs() -> dict[str, EnvSpec]:
    return get_registry().envs()


def get_env_spec(name: str) -> EnvSpec:
    return get_registry().env(name)
