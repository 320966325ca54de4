"""``agentgym check ENV...``: the conformance kit from the command line, run as a user runs it (a
subprocess; the command runs pytest in its own process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# A plugin with a planted bug: its reset draws the hidden number without the task id's seed.
BROKEN_PLUGIN = textwrap.dedent(
    """
    import random

    from agentgym import EnvSpec, Split, TextEnv, hookimpl


    class Forgetful(TextEnv):
        def reset_task(self, task_id):
            self.target = random.randint(1, 10**9)  # the bug: not seeded by task_id
            return f"Task {task_id}: find {self.target}.", {"instruction": "Say the number."}

        def step_action(self, action):
            if not action.strip().isdigit():
                return "Say a number.", 0.0, False, False, {"valid_action": False}
            done = int(action) == self.target
            return ("right" if done else "wrong"), float(done), done, False, {"success": done}


    @hookimpl
    def agentgym_envs():
        return [EnvSpec(name="forgetful", factory=Forgetful, splits={"test": Split(range(20))})]
    """
)


def agentgym(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentgym", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture
def broken_env(tmp_path: Path) -> dict:
    (tmp_path / "agentgym_forgetful.py").write_text(BROKEN_PLUGIN, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path, "AGENTGYM_PLUGIN_MODULES": "agentgym_forgetful"}


@pytest.mark.slow
def test_check_prints_a_table_of_the_kits_checks_and_exits_0():
    run = agentgym("check", "babyai", "textcraft")
    assert run.returncode == 0, run.stdout + run.stderr
    for env in ("babyai", "textcraft"):
        rows = [line for line in run.stdout.splitlines() if f" {env} " in line]
        assert any("reset_is_deterministic" in r and "passed" in r for r in rows), run.stdout
        assert any("http_matches_in_process" in r and "passed" in r for r in rows), run.stdout
        assert any("expert_solves_sample" in r and "passed" in r for r in rows), run.stdout
        assert f"{env} reset_is_deterministic: passed" in run.stderr  # the progress line, as it ends
    assert "FAILED" not in run.stdout and "failed" not in run.stdout
    assert run.stdout.splitlines()[-1].startswith("ok: ") and "(babyai, textcraft)" in run.stdout


def test_a_planted_bug_fails_the_check_that_names_it(broken_env):
    run = agentgym("check", "forgetful", "--sample", "2", "--no-http", env=broken_env)
    assert run.returncode == 1, run.stdout + run.stderr
    row = next(line for line in run.stdout.splitlines() if "reset_is_deterministic" in line)
    assert "failed" in row and "reset is not deterministic" in row, run.stdout
    assert "To fix:" in run.stdout and "seed random generators" in run.stdout  # what to change
    assert "forgetful reset_is_deterministic: failed" in run.stderr
    assert run.stdout.splitlines()[-1].startswith("FAILED: ")
    assert "http_matches_in_process" not in run.stdout  # --no-http


def test_json_lists_every_check_with_its_outcome(broken_env):
    run = agentgym(
        "check", "forgetful", "guess", "--sample", "2", "--expert-sample", "2", "--json", env=broken_env
    )
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert report["ok"] is False and report["envs"] == ["forgetful", "guess"]
    checks = {(c["env"], c["check"]): c for c in report["checks"]}
    broken = checks[("forgetful", "reset_is_deterministic")]
    assert broken["outcome"] == "failed" and broken["failed"] >= 1 and broken["fix"]
    assert "reset is not deterministic" in broken["message"]
    assert {c["outcome"] for c in report["checks"]} <= {"passed", "failed", "skipped"}
    guess = {name: c for (env, name), c in checks.items() if env == "guess"}
    assert {"reset_is_deterministic", "http_matches_in_process", "expert_solves_sample"} <= set(guess)
    assert all(c["outcome"] != "failed" for c in guess.values())
    assert guess["reset_is_deterministic"]["passed"] == len(guess["reset_is_deterministic"]["cases"]) > 1
    skipped = [c for c in guess.values() if c["outcome"] == "skipped"]
    assert all(c["message"] for c in skipped)  # each skip says why
    assert report["counts"]["failed"] == sum(1 for c in report["checks"] if c["outcome"] == "failed")


def test_an_unknown_env_or_no_kit_is_one_line_error(tmp_path):
    run = agentgym("check", "nope")
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("agentgym: error: unknown env 'nope' (installed: ")
    assert "guess" in run.stderr
    # without pytest (a site directory that hides it): the install hint, one line
    (tmp_path / "pytest.py").write_text("raise ImportError('No module named pytest')\n", encoding="utf-8")
    hidden = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
    }
    run = agentgym("check", "guess", env=hidden)
    assert run.returncode == 1
    assert "pip install 'agentgym-core[testing]'" in run.stderr and "Traceback" not in run.stderr
