"""Broken third-party plugins, installed for real: one that fails to import and one that declares an
env another distribution declares too. They are real distributions (``*.dist-info`` with entry points
on ``PYTHONPATH``, found by ``importlib.metadata`` as pip's installs are) next to everything else, and
every command runs as a user runs it, in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agentgym.server.background import serve_in_process

PLUGIN = """
from agentgym import EnvSpec, hookimpl


@hookimpl
def agentgym_envs():
    return [EnvSpec(name="textcraft", factory="agentgym_guess.env:GuessEnv")]
"""


def _distribution(site: Path, name: str, entry_points: str) -> None:
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[agentgym]\n{entry_points}\n")


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("site")
    _distribution(site, "agentgym-env-broken", "broken = agentgym_broken_xyz.plugin")
    _distribution(site, "agentgym-env-twin", "twin = agentgym_twin_plugin")
    (site / "agentgym_twin_plugin.py").write_text(PLUGIN)
    environ = {
        k: v for k, v in os.environ.items() if k not in ("AGENTGYM_STRICT_PLUGINS", "AGENTGYM_PLUGINS")
    }
    environ["PYTHONPATH"] = os.pathsep.join([str(site), environ.get("PYTHONPATH", "")])
    return environ


def agentgym(env: dict[str, str], *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentgym", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,
    )


def test_envs_and_plugins_keep_working_and_show_the_reasons(env):
    listed = agentgym(env, "envs", "--json")
    assert listed.returncode == 0, listed.stderr
    names = {e["name"] for e in json.loads(listed.stdout)}
    assert {"guess", "babyai"} <= names and "textcraft" not in names  # the clash serves neither
    table = agentgym(env, "envs")
    assert table.returncode == 0 and "plugin problem(s)" in table.stdout
    plugins = agentgym(env, "plugins", "--json")
    assert plugins.returncode == 0, plugins.stderr
    infos = {(p["name"], p["distribution"]): p for p in json.loads(plugins.stdout)}
    assert "ModuleNotFoundError" in infos["broken", "agentgym-env-broken"]["problems"][0]
    clash = infos["twin", "agentgym-env-twin"]["problems"][0]
    assert "'textcraft'" in clash and "agentgym-env-textcraft" in clash and "agentgym-env-twin" in clash
    assert not infos["guess", "agentgym-env-guess"]["problems"]
    assert "agentgym-env-broken" in plugins.stderr  # every command warns, on stderr


def test_serve_of_another_env_works(env):
    with serve_in_process(["guess"], env=env) as served:
        health = httpx.get(f"{served.url}/health").json()
        assert health["status"] == "ok" and health["envs"] == ["guess"]
        created = httpx.post(f"{served.url}/v1/sessions", json={"env": "guess", "task_id": 3})
        assert created.status_code == 200


def test_eval_works_and_a_command_needing_the_broken_env_fails_with_the_reason(env, tmp_path):
    report = tmp_path / "r.json"
    ok = agentgym(env, "eval", "--env", "guess", "--policy", "scripted", "--limit", "3", "-o", str(report))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(report.read_text())
    bad = agentgym(env, "eval", "--env", "textcraft", "--policy", "scripted", "--limit", "1")
    assert bad.returncode != 0
    [line] = [x for x in bad.stderr.splitlines() if x.startswith("agentgym: error:")]
    assert "unavailable" in line and "agentgym-env-twin" in line


def test_strict_plugins_fails_fast(env):
    strict = agentgym({**env, "AGENTGYM_STRICT_PLUGINS": "1"}, "envs")
    assert strict.returncode != 0
    assert "agentgym: error:" in strict.stderr and "agentgym-env-broken" in strict.stderr
