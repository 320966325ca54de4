"""The plugin manager: loads the ``agentgym`` entry-point group and collects what plugins declare.

``AGENTGYM_PLUGINS=babyai,train`` limits loading to those entry-point names (core's own built-ins,
entry point ``core``, always load: they are the reward transforms everyone relies on).
``AGENTGYM_PLUGIN_MODULES=pkg.module,...`` also loads plugin modules that have no entry point.

A broken plugin never takes the others down: one that fails to import, shares its name with another
distribution's, was built for another plugin API version (``agentgym.api_version``), implements a
hook that does not exist, declares an env another plugin declares too, or an env spec that fails
validation (``EnvSpec.problems``) is skipped and recorded as a :class:`PluginProblem`; ``agentgym
plugins`` and ``agentgym envs`` show them, and only a command that needs what it would have provided
fails, with that reason. ``AGENTGYM_STRICT_PLUGINS=1`` makes any problem an error at once (for CI).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Iterable
from importlib import metadata
from types import ModuleType
from typing import Any

from agentgym import api_version, hooks, hookspecs
from agentgym.errors import PluginError, UnknownEnvError
from agentgym.gym_registry import register_gymnasium
from agentgym.plugin_report import PluginInfo, PluginProblem
from agentgym.spec import EnvSpec

ENTRY_POINT_GROUP = hookspecs.PROJECT
ALWAYS_LOADED = frozenset({"core"})


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
        self.pm = hooks.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        # historic: each plugin implementing it is called as it registers, and adds its own specs
        self.pm.hook.agentgym_add_hookspecs.call_historic(kwargs={"pluginmanager": self.pm})
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
        added: list[tuple[str, Any, str, str]] = []  # (name, plugin, distribution, entry point)
        for ep in entry_points:
            dist = ep.dist.name if ep.dist is not None else "<unknown>"
            value = getattr(ep, "value", "")
            if ep.name in seen and seen[ep.name] != dist:
                reason = f"another plugin named {ep.name!r} comes from distribution {seen[ep.name]!r}"
                self._report(
                    PluginProblem(
                        ep.name, dist, f"{reason}; this one is skipped: uninstall one of them", value
                    )
                )
                continue
            seen[ep.name] = dist
            if (wanted is not None and ep.name not in wanted) or self.pm.has_plugin(ep.name):
                continue  # not asked for, or the same distribution seen twice on sys.path
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must say who it is, and not stop the others
                reason = f"failed to import {value or 'its module'}: {type(exc).__name__}: {exc}"
                self._report(PluginProblem(ep.name, dist, reason, value))
                continue
            try:
                self._add(plugin, ep.name, dist, ep.dist.version if ep.dist is not None else "")
            except PluginError as exc:
                if self.strict:
                    raise
                reason = exc.message.removeprefix(f"plugin {ep.name!r} from {dist!r}: ")  # said once
                self.problems.append(PluginProblem(ep.name, dist, reason, value))
                continue
            added.append((ep.name, plugin, dist, value))
        self._check_loaded(added)
        missing = sorted(wanted - set(seen)) if wanted is not None else []
        if missing:
            raise PluginError(
                f"AGENTGYM_PLUGINS names plugins that are not installed: {', '.join(missing)} "
                f"(installed: {', '.join(sorted(seen)) or 'none'})"
            )
        self._load_modules()

    def _check_loaded(self, added: list[tuple[str, Any, str, str]]) -> None:
        """Drop the entry-point plugins that implement unknown hooks. Checked only once all are
        registered: they load in no set order, and a package's own hook specs are added when its
        plugin registers (``agentgym_add_hookspecs``), maybe after a plugin implementing them."""
        unknown = hooks.unknown_hooks(self.pm)
        for name, plugin, dist, value in added:
            reason = self.pm.rejected.pop(name, None) or unknown.get(name)  # rejected: hooks.PluginManager
            if reason is None:
                self._check_marks(plugin, name, dist)
                continue
            self.unregister(name)
            problem = PluginProblem(name, dist, reason, value)  # its str names the plugin once
            if self.strict:
                raise PluginError(str(problem))
            self.problems.append(problem)

    def _load_modules(self) -> None:
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
            self._add(plugin, name, distribution, version)
            unknown = hooks.unknown_hooks(self.pm).get(name)
            if unknown:
                self.unregister(name)
                raise PluginError(f"plugin {name!r} from {distribution!r}: {unknown}")
            self._check_marks(plugin, name, distribution)

    def _add(self, plugin: Any, name: str, distribution: str, version: str) -> None:
        """Register with pluggy, unchecked for unknown hooks; the plugin's ``agentgym_add_hookspecs``
        runs here. A plugin built for another API version is refused before any of its hooks runs."""
        with self._lock:
            if (incompatible := api_version.incompatibility(plugin)) is not None:
                raise PluginError(f"plugin {name!r} from {distribution!r}: {incompatible}")
            if self.pm.has_plugin(name):
                raise PluginError(
                    f"two plugins are named {name!r}: one from distribution {self._dists[name][0]!r}, "
                    f"one from {distribution!r}"
                )
            try:
                self.pm.register(plugin, name=name)
            except Exception as exc:  # a bad signature, a module twice, its agentgym_add_hookspecs failed
                if self.pm.has_plugin(name):
                    self.pm.unregister(name=name)
                raise PluginError(f"plugin {name!r} from {distribution!r}: {exc}") from None
            self._dists[name] = (distribution, version)
            self._envs = None

    def _check_marks(self, plugin: Any, name: str, distribution: str) -> None:
        unmarked = hooks.unmarked_hooks(plugin, self.hook_names())
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
            if self.pm.has_plugin(name):
                self.pm.unregister(name=name)
            self._dists.pop(name, None)
            self._envs = None

    def check(self) -> None:
        """Raise :class:`PluginError` if a registered plugin implements a hook that has no spec."""
        unknown = hooks.unknown_hooks(self.pm)
        if unknown:
            raise PluginError(next(iter(unknown.values())))

    def hook_names(self) -> list[str]:
        """Every hook the manager has a spec for: core's and those its plugins added."""
        return hooks.hook_names(self.pm)

    # -- registries ---------------------------------------------------------------------------
    def _per_plugin(self, hook_name: str) -> list[tuple[str, Any]]:
        """Call one hook plugin by plugin; ``(plugin name, result)`` in registration order. A plugin
        whose implementation raises is reported (``problems``) and left out; a hook no loaded plugin
        specifies (agentgym-train's when it is not loaded) has no results."""
        hook = getattr(self.pm.hook, hook_name, None)
        out = []
        for plugin_name, result, error in hooks.call_each(hook) if hook is not None else []:
            if error is not None:  # shown by `agentgym plugins`; a command needing it fails
                reason = f"{hook_name}() raised {type(error).__name__}: {error}"
                self._report(PluginProblem(plugin_name, self._distribution(plugin_name), reason))
            elif result is not None:
                out.append((plugin_name, result))
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
            items = hooks.named_items(mapping)
            if items is None:  # reported like a hook that raised, and left out
                why = f"{hook_name}() returned {type(mapping).__name__}, not {{name: object}}"
                self._report(PluginProblem(plugin_name, self._distribution(plugin_name), why))
                continue
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
        for hook_name in self.hook_names():
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                infos[impl.plugin_name].hooks.append(hook_name)
        envs = self.envs()
        for hook_name, label in hooks.registering_hooks(self.pm).items():
            if hook_name == "agentgym_envs":  # the usable specs only
                for spec in envs.values():
                    if spec.plugin in infos:
                        infos[spec.plugin].registers.setdefault(label, []).append(spec.name)
                continue
            for plugin_name, result in self._per_plugin(hook_name):
                names = [name for name, _ in hooks.named_items(result) or []]
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


def hook_names() -> list[str]:
    """Every hook the process-wide registry knows: core's and those its plugins added."""
    return get_registry().hook_names()


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
