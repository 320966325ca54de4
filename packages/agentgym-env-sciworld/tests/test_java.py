"""Without Java the env says so, naming what is missing, instead of a py4j traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from agentgym_sciworld.java import JAVA_ENV, JavaNotFoundError, find_java


def test_find_java_reports_what_it_looked_at(monkeypatch, tmp_path):
    monkeypatch.delenv(JAVA_ENV, raising=False)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError) as err:
        find_java()
    message = err.value.message
    assert "ScienceWorld needs Java" in message and "no `java` on PATH" in message
    assert "JAVA_HOME" in message and "default-jre-headless" in message
    assert err.value.code == "java_missing"


def test_explicit_java_wins_and_a_bad_one_is_named(monkeypatch, tmp_path):
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv(JAVA_ENV, str(fake))
    assert find_java() == str(fake)
    monkeypatch.setenv(JAVA_ENV, str(tmp_path / "missing-java"))
    with pytest.raises(JavaNotFoundError, match="missing-java"):
        find_java()


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _without_java(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (JAVA_ENV, "JAVA_HOME")}
    env["PATH"] = str(tmp_path)  # nothing there: no java (the interpreter is called by its full path)
    return env


def test_make_without_java_raises_the_clear_error_in_a_fresh_process(tmp_path):
    result = _run(
        "import agentgym\n"
        "try:\n"
        "    agentgym.make('sciworld')\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n",
        _without_java(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("JavaNotFoundError ScienceWorld needs Java"), result.stdout
    assert "py4j" not in result.stdout + result.stderr and "Traceback" not in result.stderr


def test_cli_without_java_prints_one_line(tmp_path):
    result = _run(
        "from agentgym.cli import main; main(['play', 'sciworld', '--task', '0'])", _without_java(tmp_path)
    )
    assert result.returncode == 1
    assert "agentgym: error: ScienceWorld needs Java" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_java_that_cannot_start_the_simulator_is_reported(tmp_path):
    # A "java" that runs but exits at once (a broken or wrong runtime): an error with its output.
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'Error: this is not a JVM' >&2\nexit 3\n")
    fake.chmod(0o755)
    env = _without_java(tmp_path)
    env[JAVA_ENV] = str(fake)
    result = _run(
        "import agentgym\n"
        "try:\n"
        "    agentgym.make('sciworld')\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n",
        env,
    )
    assert result.stdout.startswith("SimulatorError"), result.stdout + result.stderr
    assert "this is not a JVM" in result.stdout and "exit code 3" in result.stdout
