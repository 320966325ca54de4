"""``agentgym check NAME`` and ``pytest -k conformance`` run one suite with one set of settings: on
planted bugs, every check has the same outcome in both (the expert's turn cap included), and a
failing HTTP-parity check names the fix its actual cause needs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from planted_counter import COUNTER, IMPORTS, SHOWS_MOVES

ENVS = (
    IMPORTS
    + COUNTER
    + SHOWS_MOVES
    + textwrap.dedent("""

    class Long(Counter):  # 31 to 38 incs: more than the expert's 30 x 1 turns
        def incs(self, task_id):
            return task_id + 31

    class Overpays(Counter):  # a success paid on top of partial credit
        def pay(self, done):
            return 0.5 + (1.0 if done else 0.0)

    def expert(env):
        return lambda obs, info: "inc"

    def spec(name, factory, turns=10):
        return EnvSpec(name=name, factory=factory, expert=expert, default_max_turns=turns,
                       splits={"test": Split(range(8), {"all": list(range(8))})})

    @hookimpl
    def agentgym_envs():
        # smallcap: up to 8 incs, more than a turn cap of 1 allows, within the expert's 30 x 1
        return [spec("smallcap", Counter, turns=1), spec("longcap", Long, turns=1),
                spec("overpays", Overpays), spec("showsmoves", ShowsMoves)]
""")
)


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "agentgym_planted.py").write_text(ENVS, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONPATH": path, "AGENTGYM_PLUGIN_MODULES": "agentgym_planted"}
    env.pop("PYTEST_ADDOPTS", None)
    return env


def check_outcomes(env_name: str, env: dict[str, str], *args: str) -> dict[str, dict]:
    """``agentgym check ENV --json ARGS``: check name -> its JSON (outcome, message, fix)."""
    run = subprocess.run(
        [sys.executable, "-m", "agentgym", "check", env_name, "--json", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert run.returncode in (0, 1), run.stderr
    return {c["check"]: c for c in json.loads(run.stdout)["checks"]}


def pytest_outcomes(env_name: str, env: dict[str, str], folder: Path, **options) -> dict[str, str]:
    """``pytest -k conformance`` on a conftest naming the env (as a plugin's tests do): check name ->
    outcome, each check failed if a case failed, skipped if all were."""
    folder.mkdir()
    config = {"env": env_name, **options}
    (folder / "conftest.py").write_text(f"agentgym_conformance = {config!r}\n", encoding="utf-8")
    report = folder / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-k", "conformance", "-p", "no:randomly",
         "-p", "no:cacheprovider", "-p", "no:xdist", f"--junitxml={report}", "-q"],
        capture_output=True, text=True, timeout=600, env=env, cwd=folder,
    )  # fmt: skip
    cases: dict[str, set[str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = re.sub(r"\[.*$", "", case.get("name", "")).removeprefix("test_")
        outcome = next((o for o in ("failure", "error", "skipped") if case.find(o) is not None), "passed")
        cases.setdefault(name, set()).add({"failure": "failed", "error": "failed"}.get(outcome, outcome))
    return {
        n: "failed" if "failed" in o else "passed" if "passed" in o else "skipped" for n, o in cases.items()
    }


@pytest.mark.parametrize(("env_name", "expert_verdict"), [("smallcap", "passed"), ("longcap", "failed")])
def test_a_turn_cap_too_small_for_the_expert_gets_one_verdict(plugin_env, tmp_path, env_name, expert_verdict):
    # the same options in both front-ends: --sample 2 --no-http is {"sample": 2, "http": False}
    cli = check_outcomes(env_name, plugin_env, "--sample", "2", "--no-http")
    kit = pytest_outcomes(env_name, plugin_env, tmp_path / "kit", sample=2, http=False)
    assert {name: c["outcome"] for name, c in cli.items()} == kit
    assert kit["expert_solves_sample"] == expert_verdict
    if expert_verdict == "failed":  # the expert's turns are 30 x the turn cap in both: 30 here
        assert "still going after expert_max_turns=30 turns" in cli["expert_solves_sample"]["message"]


def test_the_cli_help_shows_the_kits_defaults():
    from agentgym.check import check
    from agentgym.testing.config import EXPERT_TURNS_FACTOR, ConformanceConfig

    helps = {p.name: p.help or "" for p in check.params}
    defaults = ConformanceConfig(env="x")
    assert f"[kit's: {defaults.sample}]" in helps["sample"]
    assert f"[kit's: {defaults.expert_sample}]" in helps["expert_sample"]
    assert f"[kit's: {EXPERT_TURNS_FACTOR} x the env's turn cap" in helps["expert_max_turns"]


def test_http_parity_names_the_fix_of_its_cause(plugin_env):
    # a return above the range: the fix is the range, not serialising
    check = check_outcomes("overpays", plugin_env, "--sample", "2", "--expert-sample", "2")[
        "http_matches_in_process"
    ]
    assert check["outcome"] == "failed"
    assert "above the declared reward_range (0, 1)" in check["message"]
    assert "To fix: keep the return within EnvSpec.reward_range" in check["message"]
    assert "JSON" not in check["message"] and check["fix"] == ""
    # state kept over a reset (the kit's instance played before, the served one did not)
    check = check_outcomes("showsmoves", plugin_env, "--sample", "2", "--expert-sample", "2")[
        "http_matches_in_process"
    ]
    assert check["outcome"] == "failed"
    assert (
        "To fix: the in-process instance, which played other episodes first, answers unlike a fresh one"
        in (check["message"])
    )
    assert "JSON" not in check["message"] and check["fix"] == ""
