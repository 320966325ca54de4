"""What a pluggy manager knows of AgentGym's hooks, and the one way to call a hook implementation by
implementation. Which hooks exist is the manager's say: core's specs (``agentgym.hookspecs``) and
those a package adds when its plugin loads (``agentgym_add_hookspecs``)."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

import pluggy

from agentgym.hookspecs import PROJECT


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, except that a package adding its specs (``agentgym_add_hookspecs``) cannot
    fail over another plugin: one registered before it whose implementation of a new hook takes
    arguments the spec does not give is unregistered and recorded in ``rejected`` (plugin name ->
    why) for the registry to report, instead of failing the package's own registration."""

    def __init__(self, project_name: str) -> None:
        super().__init__(project_name)
        self.rejected: dict[str, str] = {}

    def add_hookspecs(self, module_or_class: Any) -> None:
        for name in dir(module_or_class):
            if self.parse_hookspec_opts(module_or_class, name) is None:
                continue
            caller = getattr(self.hook, name, None)
            if caller is None or caller.has_spec():
                continue
            given = inspect.signature(getattr(module_or_class, name)).parameters
            for impl in caller.get_hookimpls():
                extra = sorted(set(impl.argnames) - set(given))
                if extra:
                    self.rejected[impl.plugin_name] = (
                        f"its {name}() takes {', '.join(extra)}, which the hook's spec "
                        f"({module_or_class.__name__}.{name}({', '.join(given)})) does not give"
                    )
                    self.unregister(name=impl.plugin_name)
        super().add_hookspecs(module_or_class)


def hook_names(pm: pluggy.PluginManager) -> list[str]:
    """Every hook ``pm`` has a spec for: core's and those its plugins added."""
    return sorted(n for n, c in vars(pm.hook).items() if not n.startswith("_") and c.has_spec())


def unknown_hooks(pm: pluggy.PluginManager) -> dict[str, str]:
    """Plugin name -> why, for each plugin implementing a hook that no spec declares (pluggy's
    ``check_pending``, every plugin at once)."""
    out: dict[str, str] = {}
    for name, caller in vars(pm.hook).items():
        if name.startswith("_") or caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if not impl.optionalhook and impl.plugin_name not in out:
                out[impl.plugin_name] = (
                    f"unknown hook {name!r} in plugin {impl.plugin!r} (known hooks: "
                    f"{', '.join(hook_names(pm))}; a package's own hooks are known once its plugin loads)"
                )
    return out


def unmarked_hooks(plugin: Any, names: Iterable[str]) -> list[str]:
    """Functions of ``plugin`` named like a hook but not decorated with ``@hookimpl``."""
    marker = f"{PROJECT}_impl"
    out = []
    for name in names:
        func = getattr(plugin, name, None)
        if callable(func) and not hasattr(func, marker):
            out.append(f"{name}()")
    return out


def registering_hooks(pm: pluggy.PluginManager) -> dict[str, str]:
    """Hook name -> label in ``agentgym plugins``: every hook taking no argument declares named
    things (``agentgym_policies`` -> ``policies``), whichever package specifies it."""
    return {
        name: name.removeprefix(f"{PROJECT}_")
        for name in hook_names(pm)
        if not getattr(pm.hook, name).spec.argnames
    }


def call_each(hook: pluggy.HookCaller, **kwargs: Any) -> list[tuple[str, Any, Exception | None]]:
    """Call a hook's implementations one at a time, in registration order: ``(plugin name, result,
    exception or None)`` for each.

    Why not ``pm.hook.<name>(...)``: it stops at the first implementation that raises, losing every
    other plugin's result. Called one by one, a failing plugin is isolated, so that one broken plugin
    does not take the others down; the caller reports it (``agentgym plugins``, a CLI warning)."""
    out: list[tuple[str, Any, Exception | None]] = []
    for impl in hook.get_hookimpls():
        try:  # each implementation gets the arguments it names, as pluggy gives them
            out.append((impl.plugin_name, impl.function(*(kwargs[a] for a in impl.argnames)), None))
        except Exception as exc:
            out.append((impl.plugin_name, None, exc))
    return out


def named_items(result: Any) -> list[tuple[str, Any]] | None:
    """A registering hook's result as ``(name, object)`` pairs: a mapping's items, or objects that
    each carry a string ``name`` (``EnvSpec``, ``AlgorithmSpec``); None for anything else."""
    if isinstance(result, Mapping):
        return list(result.items())
    if isinstance(result, str | bytes) or not isinstance(result, Iterable):
        return None
    items = [(getattr(obj, "name", None), obj) for obj in result]
    return items if all(isinstance(name, str) for name, _ in items) else None
