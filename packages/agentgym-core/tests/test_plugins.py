"""The plugin system: entry-point loading, filters, duplicates, unknown hooks, documentation."""

from __future__ import annotations

import inspect
from importlib import metadata
from types import SimpleNamespace

import gymnasium
import pytest

from agentgym import EnvSpec, hookimpl, hookspecs
from agentgym.errors import PluginError, UnknownEnvError
from agentgym.plugins import PluginRegistry, get_registry, hook_names, reset_registry


class EnvPlugin:
    def __init__(self, *names):
        self.names = names

    @hookimpl
    def agentgym_envs(self):
        return [EnvSpec(name=n, factory="agentgym_guess.env:GuessEnv") for n in self.names]


def _ep(name, value, dist):
    ep = metadata.EntryPoint(name=name, value=value, group="agentgym")
    return SimpleNamespace(name=ep.name, load=ep.load, dist=SimpleNamespace(name=dist, version="9.9"))


def test_installed_plugins_load_with_their_distributions():
    reset_registry()
    registry = get_registry()
    infos = {p.name: p for p in registry.plugins()}
    assert infos["guess"].distribution == "agentgym-env-guess"
    assert infos["guess"].registers["envs"] == ["guess"]
    assert infos["core"].distribution == "agentgym-core"
    assert "normalize" in infos["core"].registers["reward_transforms"]
    spec = registry.env("guess")
    assert (spec.distribution, spec.plugin) == ("agentgym-env-guess", "guess")


def test_every_env_is_in_gymnasiums_registry():
    reset_registry()
    spec = get_registry().env("guess")
    assert spec.gym_id == "agentgym/Guess-v0"
    env = gymnasium.make("agentgym/Guess-v0")
    obs, _ = env.reset(options={"task_id": 4})
    assert "between 1 and" in obs


def test_same_plugin_name_from_two_distributions_is_an_error():
    eps = [_ep("dup", "agentgym.builtin", "dist-a"), _ep("dup", "agentgym.builtin", "dist-b")]
    with pytest.raises(PluginError, match="dist-a.*dist-b"):
        PluginRegistry(eps)


def test_same_env_name_from_two_plugins_is_an_error():
    registry = PluginRegistry([])
    registry.register(EnvPlugin("twin"), "first", distribution="pkg-one")
    registry.register(EnvPlugin("twin"), "second", distribution="pkg-two")
    with pytest.raises(PluginError, match="pkg-one.*pkg-two"):
        registry.envs()


def test_unknown_hook_fails_at_load():
    class Typo:
        @hookimpl
        def agentgym_env(self):  # missing "s": no such hook
            return []

    registry = PluginRegistry([])
    with pytest.raises(PluginError, match="agentgym_env"):
        registry.register(Typo(), "typo")


def test_agentgym_plugins_limits_loading(monkeypatch):
    eps = [
        _ep("core", "agentgym.builtin", "agentgym-core"),
        _ep("guess", "agentgym_guess.plugin", "agentgym-env-guess"),
    ]
    monkeypatch.setenv("AGENTGYM_PLUGINS", "core")
    assert list(PluginRegistry(eps).envs()) == []
    monkeypatch.setenv("AGENTGYM_PLUGINS", "guess")
    assert list(PluginRegistry(eps).envs()) == ["guess"]  # core's built-ins always load too
    monkeypatch.setenv("AGENTGYM_PLUGINS", "guess,nonexistent")
    with pytest.raises(PluginError, match="nonexistent"):
        PluginRegistry(eps)


def test_broken_plugin_names_itself():
    with pytest.raises(PluginError, match="'broken'.*'pkg-broken'"):
        PluginRegistry([_ep("broken", "no_such_module_xyz", "pkg-broken")])


def test_unknown_env_lists_installed_ones():
    reset_registry()
    with pytest.raises(UnknownEnvError, match="guess"):
        get_registry().env("nope")


def test_every_hook_has_a_spec_with_a_docstring_saying_when_and_what():
    assert hook_names() == sorted(
        [
            "agentgym_envs",
            "agentgym_reward_transforms",
            "agentgym_algorithms",
            "agentgym_horizon_schedules",
            "agentgym_policies",
            "agentgym_cli",
            "agentgym_episode_end",
        ]
    )
    for name in hook_names():
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert "Called" in doc and ("Returns" in doc or "return" in doc), (
            f"{name}: say when it is called and what it returns"
        )


def test_plugin_modules_are_cheap_to_import():
    """Listing envs must not import the env's implementation (heavy libraries live there)."""
    import subprocess
    import sys

    code = (
        "import sys, agentgym; agentgym.env_specs(); "
        "print('agentgym_guess.env' in sys.modules, 'torch' in sys.modules, 'fastapi' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False", "False"]


def test_episode_end_hook_is_called_by_play(monkeypatch):
    from agentgym.play import play_episode

    seen = []

    class Sink:
        @hookimpl
        def agentgym_episode_end(self, episode):
            seen.append(episode)

    reset_registry()
    registry = get_registry()
    registry.register(Sink(), "sink")
    try:
        from rich.console import Console

        episode = play_episode(
            registry.env("guess"), 1000, auto=True, console=Console(file=open("/dev/null", "w"))
        )
    finally:
        reset_registry()
    assert seen == [episode] and episode.success
