"""The plugin manager: loads the ``agentgym`` entry-point group and collects what plugins declare.

``AGENTGYM_PLUGINS=babyai,train`` limits loading to those entry-point names (core's own built-ins,
entry point ``core``, always load: they are the reward transforms everyone relies on).
``AGENTGYM_PLUGIN_MODULES=pkg.module,...`` also loads plugin modules that have no entry point.

A broken plugin never takes the others down: one that fails to import, shares its name with another
distribution's, implements a hook that does not exist, declares an env another plugin declares too,
or an env spec that fails validation (``EnvSpec.problems``) is skipped and recorded as a
:class:`PluginProblem`; ``agentgym plugins`` and ``agentgym envs`` show them, and only a command that
needs what it would have provided fails, with that reason. ``AGENTGYM_STRICT_PLUGINS=1`` makes any
problem an error at once (for CI).
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
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PluginProblem:
    """Something wrong with one plugin; what it concerns was skipped (see the module docstring)."""

    plugin: str
    distribution: str
    reason: str
    module: str = ""
    envs: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"plugin {self.plugin!r} from {self.distribution!r}: {self.reason}"


def strict_plugins() -> bool:
    """``AGENTGYM_STRICT_PLUGINS=1``: every plugin problem is an error (for CI)."""
    return os.environ.get("AGENTGYM_STRICT_PLUGINS", "").strip().lower() in ("1", "true", "yes", "on")


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

    def __init__(
        self,
        entry_points: Iterable[metadata.EntryPoint] | None = None,
        *,
        load: bool = True,
        strict: bool | None = None,
    ):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.strict = strict_plugins() if strict is None else strict
        self.problems: list[PluginProblem] = []  # found while loading plugins
        self._dists: dict[str, tuple[str, str]] = {}  # plugin name -> (distribution, version)
        self._lock = threading.RLock()
        self._envs: dict[str, EnvSpec] | None = None
        self._env_problems: list[PluginProblem] = []  # found while collecting env specs
        self._unavailable: dict[str, str] = {}  # env name -> why it is not served
        if load:
            self._load(entry_points)

    # -- loading ------------------------------------------------------------------------------
    def _report(self, problem: PluginProblem, into: list[PluginProblem] | None = None) -> None:
        if self.strict:
            raise PluginError(f"{problem} (AGENTGYM_STRICT_PLUGINS is set)")
        target = self.problems if into is None else into
        if problem not in target:
            target.append(problem)

    def _load(self, entry_points: Iterable[metadata.EntryPoint] | None) -> None:
        if entry_points is None:
            entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
        wanted = _requested_plugins()
        seen: dict[str, str] = {}
        for ep in entry_points:
            dist = ep.dist.name if ep.dist is not None else "<unknown>"
            value = getattr(ep, "value", "")
            if ep.name in seen and seen[ep.name] != dist:
                self._report(
                    PluginProblem(
                        ep.name,
                        dist,
                        f"another plugin named {ep.name!r} comes from distribution {seen[ep.name]!r}; "
                        "this one is skipped: uninstall one of them",
                        value,
                    )
                )
                continue
            seen[ep.name] = dist
            if wanted is not None and ep.name not in wanted:
                continue
            if self.pm.has_plugin(ep.name):
                continue  # the same distribution seen twice on sys.path
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must say who it is, and not stop the others
                reason = f"failed to import {value or 'its module'}: {type(exc).__name__}: {exc}"
                self._report(PluginProblem(ep.name, dist, reason, value))
                continue
            version = ep.dist.version if ep.dist is not None else ""
            try:
                self.register(plugin, ep.name, distribution=dist, version=version)
            except PluginError as exc:
                if self.strict:
                    raise
                self.problems.append(PluginProblem(ep.name, dist, exc.message, value))
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
            dist = f"<module {module_name}>"
            try:
                module = importlib.import_module(module_name)
                self.register(module, module_name, distribution=dist)
            except Exception as exc:
                reason = exc.message if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
                self._report(
                    PluginProblem(module_name, dist, f"AGENTGYM_PLUGIN_MODULES: {reason}", module_name)
                )

    def register(self, plugin: Any, name: str, *, distribution: str = "<runtime>", version: str = "") -> None:
        """Register a plugin object (a module or an instance with ``@hookimpl`` methods).

        Raises :class:`PluginError` for a name already taken or a hook that does not exist (the
        plugin is then not registered); a function named like a hook but without ``@hookimpl`` is
        recorded as a problem."""
        with self._lock:
            if self.pm.has_plugin(name):
                raise PluginError(
                    f"two plugins are named {name!r}: one from distribution {self._dists[name][0]!r}, "
                    f"one from {distribution!r}"
                )
            try:
                self.pm.register(plugin, name=name)
            except (pluggy.PluginValidationError, ValueError) as exc:  # a bad signature, a module twice
                raise PluginError(f"plugin {name!r} from {distribution!r}: {exc}") from None
            try:
                self.check()
            except PluginError as exc:
                self.pm.unregister(name=name)
                raise PluginError(f"plugin {name!r} from {distribution!r}: {exc.message}") from None
            self._dists[name] = (distribution, version)
            self._envs = None
            unmarked = _unmarked_hooks(plugin)
            if unmarked:
                self._report(
                    PluginProblem(
                        name,
                        distribution,
                        f"{', '.join(unmarked)} lack(s) @hookimpl, so nothing of it is registered: "
                        "decorate each with agentgym.hookimpl",
                    )
                )

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
        """Call one hook plugin by plugin; ``(plugin name, result)`` in registration order. A plugin
        whose implementation raises is reported (``problems``) and left out."""
        out = []
        for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
            try:
                result = impl.function()
            except Exception as exc:  # shown by `agentgym plugins`; a command needing it fails
                reason = f"{hook_name}() raised {type(exc).__name__}: {exc}"
                self._report(PluginProblem(impl.plugin_name, self._distribution(impl.plugin_name), reason))
                continue
            if result is not None:
                out.append((impl.plugin_name, result))
        return out

    def _distribution(self, plugin_name: str) -> str:
        return self._dists.get(plugin_name, ("<runtime>", ""))[0]

    def envs(self) -> dict[str, EnvSpec]:
        """The usable env specs by name (specs with a problem are left out; see ``all_problems``)."""
        with self._lock:
            if self._envs is None:
                self._envs = self._collect_envs()
                register_gymnasium(self._envs.values())
            return self._envs

    def _collect_envs(self) -> dict[str, EnvSpec]:
        problems: list[PluginProblem] = []
        self._env_problems, self._unavailable = problems, {}
        declared: dict[str, list[EnvSpec]] = {}
        for plugin_name, specs in self._per_plugin("agentgym_envs"):
            dist = self._distribution(plugin_name)
            if not isinstance(specs, (list, tuple)):
                self._report(
                    PluginProblem(plugin_name, dist, f"returned {specs!r}, not a list of EnvSpec"), problems
                )
                continue
            for spec in specs:
                if not isinstance(spec, EnvSpec):
                    self._report(
                        PluginProblem(plugin_name, dist, f"returned {spec!r}, not an EnvSpec"), problems
                    )
                    continue
                spec.distribution, spec.plugin = dist, plugin_name
                try:
                    errors = spec.problems()
                except Exception as exc:  # noqa: BLE001 - a spec that breaks its own check is broken
                    errors = [f"validating it raised {type(exc).__name__}: {exc}"]
                if errors:
                    reason = f"env {spec.name!r}: {'; '.join(errors)}"
                    self._report(PluginProblem(plugin_name, dist, reason, envs=(spec.name,)), problems)
                    self._unavailable[spec.name] = f"{reason} (plugin {plugin_name!r} from {dist!r})"
                    continue
                declared.setdefault(spec.name, []).append(spec)
        envs: dict[str, EnvSpec] = {}
        for name, specs in declared.items():
            if len(specs) == 1:
                envs[name] = specs[0]
                continue
            # Which one the user meant is unknowable: neither is served until one is uninstalled.
            who = " and ".join(f"plugin {s.plugin!r} from distribution {s.distribution!r}" for s in specs)
            reason = f"env {name!r} is declared by {who}; uninstall one of them"
            for spec in specs:
                self._report(
                    PluginProblem(spec.plugin or "?", spec.distribution or "?", reason, envs=(name,)),
                    problems,
                )
            self._unavailable[name] = reason
        return envs

    def all_problems(self) -> list[PluginProblem]:
        """Every problem found so far, env specs included (collects them if not done yet)."""
        self.envs()
        return [*self.problems, *self._env_problems]

    def env(self, name: str) -> EnvSpec:
        envs = self.envs()
        if name in envs:
            return envs[name]
        if name in self._unavailable:
            raise PluginError(f"env {name!r} is unavailable: {self._unavailable[name]}")
        known = ", ".join(sorted(envs)) or "none installed"
        broken = [p for p in self.problems if not p.envs]
        hint = "; plugins that failed to load: " + "; ".join(str(p) for p in broken) if broken else ""
        raise UnknownEnvError(f"unknown env {name!r} (installed: {known}){hint}", name=name, known=envs)

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
        """Every plugin, loaded or not, with what it registers and its problems."""
        infos: dict[str, PluginInfo] = {}
        for name, plugin in self.pm.list_name_plugin():
            dist, version = self._dists.get(name, ("<runtime>", ""))
            module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__qualname__
            infos[name] = PluginInfo(name=name, distribution=dist, version=version, module=module)
        for hook_name in hook_names():
            hook = getattr(self.pm.hook, hook_name)
            for impl in hook.get_hookimpls():
                infos[impl.plugin_name].hooks.append(hook_name)
        envs = self.envs()
        for hook_name, label in _REGISTERING_HOOKS.items():
            if hook_name == "agentgym_envs":  # the usable specs only
                for spec in envs.values():
                    if spec.plugin in infos:
                        infos[spec.plugin].registers.setdefault(label, []).append(spec.name)
                continue
            for plugin_name, result in self._per_plugin(hook_name):
                if isinstance(result, Mapping):
                    names = list(result)
                else:
                    names = [getattr(r, "name", repr(r)) for r in result]
                infos[plugin_name].registers.setdefault(label, []).extend(names)
        skipped: dict[tuple[str, str], PluginInfo] = {}  # plugins that never loaded
        for problem in self.all_problems():
            info = infos.get(problem.plugin)
            if info is None or info.distribution != problem.distribution:
                key = (problem.plugin, problem.distribution)
                info = skipped.setdefault(
                    key, PluginInfo(problem.plugin, problem.distribution, "", problem.module)
                )
            if problem.reason not in info.problems:
                info.problems.append(problem.reason)
        return sorted([*infos.values(), *skipped.values()], key=lambda p: (p.name, p.distribution))


def _unmarked_hooks(plugin: Any) -> list[str]:
    """Functions of ``plugin`` named like a hook but not decorated with ``@hookimpl``."""
    marker = f"{hookspecs.PROJECT}_impl"
    out = []
    for name in hook_names():
        func = getattr(plugin, name, None)
        if callable(func) and not hasattr(func, marker):
            out.append(f"{name}()")
    return out


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


_registry: PluginRegistry | None = None
_registry_lock = threading.Lock()
_loading = threading.local()


def get_registry() -> PluginRegistry:
    """The process-wide registry, loaded from installed entry points on first use."""
    global _registry
    if getattr(_loading, "active", False):
        # A plugin module asked for the registry while being imported by it: it would wait forever.
        raise PluginError("a plugin module uses the plugin registry at import time; do that in a hook")
    with _registry_lock:
        if _registry is None:
            _loading.active = True
            try:
                _registry = PluginRegistry()
            finally:
                _loading.active = False
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
