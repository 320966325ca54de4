"""The plugin system: entry-point loading, filters, duplicates, unknown hooks, documentation."""

from __future__ import annotations

import inspect
from importlib import metadata
from types import ModuleType, SimpleNamespace

import gymnasium
import pytest

from agentgym import EnvSpec, Split, hookimpl, hookspecs
from agentgym.errors import PluginError, UnknownEnvError
from agentgym.hooks import call_each
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


def test_same_plugin_name_from_two_distributions_skips_the_second_and_says_so(monkeypatch):
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)
    eps = [_ep("dup", "agentgym.builtin", "dist-a"), _ep("dup", "agentgym.builtin", "dist-b")]
    registry = PluginRegistry(eps)
    assert registry.pm.has_plugin("dup") and registry._dists["dup"][0] == "dist-a"
    [problem] = registry.problems
    assert (problem.plugin, problem.distribution) == ("dup", "dist-b") and "dist-a" in problem.reason
    with pytest.raises(PluginError, match="dist-a.*dist-b|dist-b.*dist-a"):
        PluginRegistry(eps, strict=True)


def test_same_env_name_from_two_plugins_serves_neither_and_names_both(monkeypatch):
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)
    registry = PluginRegistry([])
    registry.register(EnvPlugin("twin", "solo"), "first", distribution="pkg-one")
    registry.register(EnvPlugin("twin"), "second", distribution="pkg-two")
    assert list(registry.envs()) == ["solo"]  # the rest keeps working
    with pytest.raises(PluginError, match="unavailable.*pkg-one.*pkg-two"):
        registry.env("twin")
    assert {p.distribution for p in registry.all_problems()} == {"pkg-one", "pkg-two"}
    infos = {p.name: p for p in registry.plugins()}
    assert infos["first"].registers["envs"] == ["solo"] and "pkg-two" in infos["first"].problems[0]
    strict = PluginRegistry([], strict=True)
    strict.register(EnvPlugin("twin"), "first", distribution="pkg-one")
    strict.register(EnvPlugin("twin"), "second", distribution="pkg-two")
    with pytest.raises(PluginError, match="pkg-one.*pkg-two"):
        strict.envs()


def test_unknown_hook_is_refused_at_registration_and_skipped_at_load(monkeypatch):
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)

    class Typo:
        @hookimpl
        def agentgym_env(self):  # missing "s": no such hook
            return []

    registry = PluginRegistry([])
    with pytest.raises(PluginError, match="agentgym_env"):
        registry.register(Typo(), "typo")
    assert not registry.pm.has_plugin("typo")
    loaded = PluginRegistry([SimpleNamespace(name="typo", value="x", load=Typo, dist=None)])
    assert not loaded.pm.has_plugin("typo") and "agentgym_env" in loaded.problems[0].reason


def test_functions_without_hookimpl_are_reported():
    module = ModuleType("forgot_the_decorator")
    module.agentgym_envs = lambda: [EnvSpec(name="lost", factory="agentgym_guess.env:GuessEnv")]
    registry = PluginRegistry([], strict=False)
    registry.register(module, "forgot", distribution="pkg-forgot")
    assert "lost" not in registry.envs()
    [problem] = registry.problems
    assert problem.distribution == "pkg-forgot" and "agentgym_envs() lack(s) @hookimpl" in problem.reason


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (dict(action_parser="reactt"), "action_parser 'reactt' does not exist"),
        (dict(splits={"train": Split(range(10)), "test": Split(range(8, 12))}), "share task ids (e.g. 8)"),
        (dict(splits={"test": Split([1, 2, 3], {"a": [1, 2]})}), "1 task id(s) have no category (e.g. 3)"),
        (
            dict(splits={"test": Split([1, 2], {"a": [1, 2], "b": [2]})}),
            "task 2 is in categories 'a' and 'b'",
        ),
        (dict(splits={"test": Split([1, 2], {"a": [1, 2, 9]})}), "not in the split (e.g. 9)"),
        (
            dict(splits={"train": Split(range(300_000), {"a": range(1000)}, category_fn=lambda t: "a")}),
            "categories hold 1000 ids, the split 300000",
        ),
    ],
)
def test_invalid_specs_are_skipped_with_the_reason(monkeypatch, spec, reason):
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)

    class Bad:
        @hookimpl
        def agentgym_envs(self):
            return [
                EnvSpec(name="bad", factory="agentgym_guess.env:GuessEnv", **spec),
                EnvSpec(name="fine", factory="agentgym_guess.env:GuessEnv"),
            ]

    registry = PluginRegistry([])
    registry.register(Bad(), "badplugin", distribution="pkg-bad")
    assert list(registry.envs()) == ["fine"]
    with pytest.raises(PluginError) as info:
        registry.env("bad")
    assert reason in info.value.message and "'badplugin' from 'pkg-bad'" in info.value.message
    strict = PluginRegistry([], strict=True)
    strict.register(Bad(), "badplugin", distribution="pkg-bad")
    with pytest.raises(PluginError, match="pkg-bad"):
        strict.envs()


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


def test_plugin_that_fails_to_import_is_skipped_and_named(monkeypatch):
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)
    eps = [
        _ep("broken", "no_such_module_xyz", "pkg-broken"),
        _ep("guess", "agentgym_guess.plugin", "agentgym-env-guess"),
    ]
    registry = PluginRegistry(eps)
    assert list(registry.envs()) == ["guess"]
    infos = {p.name: p for p in registry.plugins()}
    assert infos["broken"].distribution == "pkg-broken"
    assert "ModuleNotFoundError" in infos["broken"].problems[0] and not infos["guess"].problems
    with pytest.raises(UnknownEnvError, match="failed to load.*'broken' from 'pkg-broken'"):
        registry.env("hanoi")
    monkeypatch.setenv("AGENTGYM_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="'broken'.*'pkg-broken'"):
        PluginRegistry(eps)


def test_gymnasium_make_works_right_after_import():
    import subprocess
    import sys

    for code in (
        "import agentgym, gymnasium; print(gymnasium.make('agentgym/Guess-v0').reset(options={'task_id': 3})[0])",
        "import gymnasium; print(gymnasium.make('agentgym:agentgym/Guess-v0').reset(options={'task_id': 3})[0])",
    ):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.startswith("I am thinking of a number"), out


def test_unknown_env_lists_installed_ones():
    reset_registry()
    with pytest.raises(UnknownEnvError, match="guess"):
        get_registry().env("nope")


def test_every_hook_has_a_spec_with_a_docstring_saying_when_and_what():
    reset_registry()
    core = ["agentgym_envs", "agentgym_reward_transforms", "agentgym_cli"]
    core += ["agentgym_episode_end", "agentgym_add_hookspecs"]
    owners = dict.fromkeys(core, "agentgym.hookspecs")
    train = [
        "agentgym_algorithms",
        "agentgym_horizon_schedules",
        "agentgym_policies",
        "agentgym_task_samplers",
    ]
    owners |= dict.fromkeys(train, "agentgym_train.hookspecs")
    owners |= dict.fromkeys(["agentgym_retrievers", "agentgym_datasets"], "agentgym_search.hookspecs")
    assert hook_names() == sorted(owners)
    assert sorted(n for n in dir(hookspecs) if n.startswith("agentgym_")) == sorted(core)
    pm = get_registry().pm
    for name in hook_names():
        spec = getattr(pm.hook, name).spec
        assert spec.namespace.__name__ == owners[name]
        doc = inspect.getdoc(spec.function) or ""
        assert "Called" in doc and ("Returns" in doc or "return" in doc), (
            f"{name}: say when it is called and what it returns"
        )


class PolicyPlugin:
    @hookimpl
    def agentgym_policies(self):
        return {"mine": lambda **options: None}


def _policy_ep():
    return SimpleNamespace(
        name="mypolicy", value="x", load=PolicyPlugin, dist=SimpleNamespace(name="pkg-policy", version="1")
    )


@pytest.mark.parametrize("train_first", [True, False])
def test_a_packages_own_hook_works_whichever_plugin_loads_first(train_first):
    """Entry points load in no set order: a plugin may implement agentgym_policies before
    agentgym-train has added its spec."""
    train = _ep("train", "agentgym_train.plugin", "agentgym-train")
    eps = [train, _policy_ep()] if train_first else [_policy_ep(), train]
    registry = PluginRegistry(eps, strict=True)
    assert {"hf", "scripted", "mine"} <= set(registry.named("agentgym_policies"))
    infos = {p.name: p for p in registry.plugins()}
    assert infos["mypolicy"].registers == {"policies": ["mine"]} and not infos["mypolicy"].problems
    assert infos["train"].registers["horizon_schedules"] == ["fixed", "scaling_inter", "adaptive"]
    assert infos["train"].registers["task_samplers"] == ["uniform", "difficulty"]


@pytest.mark.parametrize("train_first", [True, False])
def test_a_bad_implementation_of_a_packages_hook_does_not_take_the_package_down(monkeypatch, train_first):
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)

    class BadSignature:
        @hookimpl
        def agentgym_policies(self, foo):  # the hook takes no argument
            return {}

    bad = SimpleNamespace(
        name="bad", value="x", load=BadSignature, dist=SimpleNamespace(name="pkg-bad", version="")
    )
    train = _ep("train", "agentgym_train.plugin", "agentgym-train")
    registry = PluginRegistry([train, bad] if train_first else [bad, train])
    assert "scripted" in registry.named("agentgym_policies") and not registry.pm.has_plugin("bad")
    [problem] = registry.problems
    assert problem.distribution == "pkg-bad" and "foo" in problem.reason


def test_a_packages_own_hook_without_the_package_is_a_plugin_problem(monkeypatch):
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)
    registry = PluginRegistry([_ep("core", "agentgym.builtin", "agentgym-core"), _policy_ep()])
    assert "agentgym_policies" not in registry.hook_names() and not registry.pm.has_plugin("mypolicy")
    [problem] = registry.problems
    assert problem.distribution == "pkg-policy" and "unknown hook 'agentgym_policies'" in problem.reason
    assert registry.named("agentgym_policies") == {}  # a package's hook nobody specifies: nothing
    with pytest.raises(PluginError, match="unknown hook 'agentgym_policies'"):
        PluginRegistry([_policy_ep()], strict=True)
    with pytest.raises(PluginError, match="unknown hook 'agentgym_policies'"):
        registry.register(PolicyPlugin(), "late")  # at runtime, checked at once


def test_a_failing_hook_implementation_is_isolated(monkeypatch):
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)

    class Broken:
        @hookimpl
        def agentgym_reward_transforms(self):
            raise RuntimeError("boom")

        @hookimpl
        def agentgym_cli(self):  # names none of the hook's arguments: pluggy gives it none
            return "added"

    registry = PluginRegistry([_ep("core", "agentgym.builtin", "agentgym-core")])
    registry.register(Broken(), "broken", distribution="pkg-broken")
    assert "normalize" in registry.named("agentgym_reward_transforms")  # the others' still count
    [problem] = registry.problems
    assert problem.distribution == "pkg-broken" and "raised RuntimeError: boom" in problem.reason
    [(name, result, error)] = call_each(registry.pm.hook.agentgym_cli, cli=None)
    assert (name, result, error) == ("broken", "added", None)


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


def test_more_broken_plugins_are_skipped_not_fatal(monkeypatch, tmp_path):
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)

    class BadSignature:
        @hookimpl
        def agentgym_envs(self, foo):  # the hook takes no argument
            return []

    class DuplicateIds:
        @hookimpl
        def agentgym_envs(self):
            return [
                EnvSpec(name="dups", factory="agentgym_guess.env:GuessEnv", splits={"t": Split([1, 1, 2])})
            ]

    class BadGymName:
        @hookimpl
        def agentgym_envs(self):
            return [EnvSpec(name="spaced", factory="agentgym_guess.env:GuessEnv", gym_name="My Env")]

    eps = [
        SimpleNamespace(name="sig", value="x", load=lambda: BadSignature(), dist=None),
        SimpleNamespace(name="dups", value="x", load=lambda: DuplicateIds(), dist=None),
        SimpleNamespace(name="gymname", value="x", load=lambda: BadGymName(), dist=None),
        _ep("guess", "agentgym_guess.plugin", "agentgym-env-guess"),
        _ep("guess-again", "agentgym_guess.plugin", "agentgym-env-guess-again"),  # one module, two names
    ]
    registry = PluginRegistry(eps)
    assert list(registry.envs()) == ["guess"]
    reasons = {p.plugin: p.reason for p in registry.all_problems()}
    assert "foo" in reasons["sig"]
    assert "listed twice" in reasons["dups"] and "not a valid Gymnasium id" in reasons["gymname"]
    assert "guess-again" in reasons


def test_a_plugin_using_the_registry_while_it_loads_is_reported_not_a_deadlock(tmp_path):
    import subprocess
    import sys

    (tmp_path / "greedy_plugin.py").write_text("import agentgym\nagentgym.env_specs()\n")
    info = tmp_path / "greedy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: greedy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[agentgym]\ngreedy = greedy_plugin\n")
    code = (
        "import agentgym; from agentgym.plugins import get_registry; "
        "print([p.reason for p in get_registry().all_problems() if p.plugin == 'greedy'])"
    )
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "at import time" in out.stdout


# -- the plugin API version ----------------------------------------------------------------------
def _versioned_plugin(version, called):
    """A plugin module declaring ``AGENTGYM_API_VERSION = version`` (left out for ``...``)."""
    module = ModuleType("versioned_plugin")
    if version is not ...:
        module.AGENTGYM_API_VERSION = version

    @hookimpl
    def agentgym_envs():
        called.append(version)
        return [EnvSpec(name="versioned", factory="agentgym_guess.env:GuessEnv")]

    module.agentgym_envs = agentgym_envs
    return module


def _versioned_eps(version, called):
    plugin = _versioned_plugin(version, called)
    dist = SimpleNamespace(name="agentgym-env-versioned", version="2.0")
    return [
        SimpleNamespace(name="versioned", value="versioned_plugin", load=lambda: plugin, dist=dist),
        _ep("guess", "agentgym_guess.plugin", "agentgym-env-guess"),
    ]


@pytest.mark.parametrize(
    ("version", "says"),
    [
        ("2", "built for agentgym plugin API version 2, but this agentgym-core implements version 1"),
        (0, "built for agentgym plugin API version 0"),
        ("one", "AGENTGYM_API_VERSION = 'one' is no API version"),
        (1.0, "AGENTGYM_API_VERSION = 1.0 is no API version"),
    ],
)
def test_a_plugin_built_for_another_api_version_is_skipped_with_one_line(monkeypatch, version, says):
    monkeypatch.delenv("AGENTGYM_STRICT_PLUGINS", raising=False)
    called: list = []
    registry = PluginRegistry(_versioned_eps(version, called))
    assert list(registry.envs()) == ["guess"] and called == []  # none of its hooks ran
    assert not registry.pm.has_plugin("versioned")
    [problem] = registry.all_problems()
    assert (problem.plugin, problem.distribution) == ("versioned", "agentgym-env-versioned")
    assert says in problem.reason and "\n" not in problem.reason
    assert str(problem).count("agentgym-env-versioned") == 1  # the plugin is named once
    infos = {p.name: p for p in registry.plugins()}
    assert infos["versioned"].problems == [problem.reason] and not infos["guess"].problems
    with pytest.raises(PluginError, match="'versioned'.*is no API version|'versioned'.*API version"):
        PluginRegistry(_versioned_eps(version, called), strict=True)
    with pytest.raises(PluginError, match=says.split(",")[0].replace("'", ".")):
        PluginRegistry([], load=False).register(_versioned_plugin(version, called), "at-runtime")
    assert called == []


@pytest.mark.parametrize("version", ["1", 1, " 1 ", ...])
def test_a_plugin_built_for_this_api_version_or_declaring_none_loads(monkeypatch, version):
    called: list = []
    registry = PluginRegistry(_versioned_eps(version, called), strict=True)
    assert sorted(registry.envs()) == ["guess", "versioned"] and called == [version]


def test_the_scaffold_and_the_example_declare_this_api_version():
    import agentgym
    import agentgym_guess.plugin
    from agentgym.scaffold import render

    declaration = f'\nAGENTGYM_API_VERSION = "{agentgym.API_VERSION}"\n'
    plugin_module = next(text for path, text in render("hanoi").items() if path.name == "plugin.py")
    assert declaration in plugin_module
    assert agentgym_guess.plugin.AGENTGYM_API_VERSION == agentgym.API_VERSION


def test_every_installed_plugin_of_ours_declares_this_api_version():
    """Ours are registered like any third party's, declaration included."""
    import importlib
    from importlib.metadata import entry_points

    import agentgym

    ours = [ep for ep in entry_points(group="agentgym") if ep.value.split(".")[0].startswith("agentgym")]
    assert len(ours) >= 3  # core, at least, and the packages installed beside it
    for ep in ours:
        module = importlib.import_module(ep.value.split(":")[0])
        assert getattr(module, "AGENTGYM_API_VERSION", None) == agentgym.API_VERSION, ep.value


def test_agentgym_plugins_shows_a_planted_mismatch_in_one_line_and_strict_fails_loudly(tmp_path):
    import json
    import subprocess
    import sys

    (tmp_path / "future_plugin.py").write_text(
        "from agentgym import EnvSpec, hookimpl\n"
        'AGENTGYM_API_VERSION = "99"\n'
        "@hookimpl\n"
        "def agentgym_envs():\n"
        '    raise RuntimeError("a hook of a plugin built for another API ran")\n'
    )
    info = tmp_path / "agentgym_env_future-3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agentgym-env-future\nVersion: 3.0\n")
    (info / "entry_points.txt").write_text("[agentgym]\nfuture = future_plugin\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def agentgym(*args, **extra):
        cmd = [sys.executable, "-m", "agentgym", *args]
        return subprocess.run(cmd, env={**env, **extra}, capture_output=True, text=True, timeout=60)

    listed = agentgym("plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    [future] = [p for p in json.loads(listed.stdout) if p["name"] == "future"]
    assert future["distribution"] == "agentgym-env-future" and future["hooks"] == []
    assert future["problems"] == [
        "built for agentgym plugin API version 99, but this agentgym-core implements version 1: "
        "upgrade agentgym-core"
    ]
    envs = agentgym("envs")
    assert envs.returncode == 0 and "guess" in envs.stdout and "API version 99" in envs.stdout
    for out in (listed, envs):
        assert "Traceback" not in out.stdout + out.stderr and "another API ran" not in out.stdout + out.stderr
    strict = agentgym("envs", AGENTGYM_STRICT_PLUGINS="1")
    assert strict.returncode != 0 and "Traceback" not in strict.stderr
    errors = [line for line in strict.stderr.splitlines() if line.startswith("agentgym: error:")]
    assert len(errors) == 1 and "'future'" in errors[0] and "API version 99" in errors[0], strict.stderr
