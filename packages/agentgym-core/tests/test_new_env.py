"""``agentgym new-env NAME``: the package it writes, what it refuses, and (slow) that the package
installs for real and passes the conformance suite as generated."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agentgym.cli import main
from agentgym.scaffold import PackageNames

EXPECTED_FILES = {
    "pyproject.toml",
    "README.md",
    "src/agentgym_hanoi/__init__.py",
    "src/agentgym_hanoi/env.py",
    "src/agentgym_hanoi/expert.py",
    "src/agentgym_hanoi/plugin.py",
    "tests/conftest.py",
}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process as ``agentgym ARGS`` does: (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_new_env_writes_the_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "new-env", "hanoi", "--dir", str(tmp_path))
    assert code == 0, err
    root = tmp_path / "agentgym-env-hanoi"
    assert EXPECTED_FILES <= files_under(root)
    assert str(root) in out and "pip install" in out

    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    assert pyproject["build-system"]["build-backend"] == "hatchling.build"
    assert pyproject["project"]["name"] == "agentgym-env-hanoi"
    assert any(d.startswith("agentgym-core") for d in pyproject["project"]["dependencies"])
    assert pyproject["project"]["entry-points"]["agentgym"] == {"hanoi": "agentgym_hanoi.plugin"}
    assert pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/agentgym_hanoi"]

    readme = (root / "README.md").read_text()
    for section in ("## Install", "## Use", "## Test alone"):
        assert section in readme
    conftest = (root / "tests" / "conftest.py").read_text()
    assert re.search(r"^agentgym_conformance = .*\bhanoi\b", conftest, re.MULTILINE)
    for path in root.rglob("*.py"):
        ast.parse(path.read_text(), filename=str(path))  # every generated module is valid Python
    assert "class HanoiEnv(TextEnv):" in (root / "src" / "agentgym_hanoi" / "env.py").read_text()
    for path in root.rglob("*"):
        if path.is_file():  # every placeholder was filled in
            assert not re.search(r"\$\{?(name|dist|module|class_name|title|core_version)\b", path.read_text())


def test_generated_env_plays_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without installing: import the generated plugin module and let its expert solve tasks."""
    from agentgym.parsers import PARSERS

    assert run_cli(capsys, "new-env", "fast-sort", "--dir", str(tmp_path))[0] == 0
    src = str(tmp_path / "agentgym-env-fast-sort" / "src")
    sys.path.insert(0, src)
    try:
        import agentgym_fast_sort.plugin as plugin

        [spec] = plugin.agentgym_envs()
        assert spec.name == "fast-sort" and spec.action_parser in PARSERS
        assert set(spec.splits) == {"train", "test"}
        assert not set(spec.splits["train"]) & set(spec.splits["test"])
        for split in spec.splits.values():
            assert sorted(t for ids in split.categories.values() for t in ids) == list(split.task_ids)
        env = spec.make()
        for task_id in (0, 1, 2, 1000, 1099):
            obs, info = env.reset(options={"task_id": task_id})
            assert info["category"] in {"short", "medium", "long"}
            act = spec.make_expert(env)
            for _ in range(spec.default_max_turns):
                obs, reward, terminated, truncated, info = env.step(act(obs, info))
                if terminated or truncated:
                    break
            assert info["success"] and env.score == 1.0
        env.reset(options={"task_id": 5})
        obs, reward, terminated, _, info = env.step("dance")
        assert info["valid_action"] is False and not terminated and reward == 0 and "swap" in obs
    finally:
        sys.path.remove(src)
        for name in [m for m in sys.modules if m.startswith("agentgym_fast_sort")]:
            del sys.modules[name]


def test_names_follow_the_env_name() -> None:
    names = PackageNames.from_name("my-cool_env2")
    assert names.dist == "agentgym-env-my-cool_env2"
    assert names.module == "agentgym_my_cool_env2"
    assert names.class_name == "MyCoolEnv2Env"


def test_refuses_an_existing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    existing = tmp_path / "agentgym-env-hanoi"
    existing.mkdir()
    (existing / "mine.txt").write_text("keep me")
    code, out, err = run_cli(capsys, "new-env", "hanoi", "--dir", str(tmp_path))
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentgym: error:") and "already exists" in lines[0]
    assert files_under(existing) == {"mine.txt"}


@pytest.mark.parametrize("name", ["Hanoi", "9lives", "-x", "my env", "hanoi!", "", "core", "guess", "train"])
def test_refuses_a_bad_name(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, out, err = run_cli(capsys, "new-env", name, "--dir", str(tmp_path))
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentgym: error:"), err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


# -- slow: install the generated package for real and run its tests ---------------------------
def python_with_pip() -> str | None:
    """An interpreter that can run pip: this one, else its base installation, else python3 on PATH."""
    base = Path(sys.base_prefix)
    candidates = [
        sys.executable,
        base / "bin" / "python3",
        base / "bin" / "python",
        base / "python.exe",
        shutil.which("python3"),
        shutil.which("python"),
    ]
    for candidate in dict.fromkeys(str(c) for c in candidates if c):
        if not Path(candidate).is_file():
            continue
        probe = subprocess.run(
            [candidate, "-m", "pip", "--version"], capture_output=True, text=True, timeout=60
        )
        if probe.returncode == 0:
            return candidate
    return None


def clean_env(**extra: str) -> dict[str, str]:
    """The environment minus what would redirect pip or limit which plugins load."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "PYTHONPATH",
            "PIP_USER",
            "PIP_TARGET",
            "PIP_PREFIX",
            "PIP_REQUIRE_VIRTUALENV",
            "AGENTGYM_PLUGINS",
            "AGENTGYM_PLUGIN_MODULES",
            "AGENTGYM_STRICT_PLUGINS",
            "PYTEST_ADDOPTS",
        }
    }
    env.update(extra)
    return env


@pytest.mark.slow
def test_generated_package_installs_and_passes_conformance(tmp_path: Path) -> None:
    pip_python = python_with_pip()
    if pip_python is None:
        pytest.skip("no Python with pip found to install the generated package")

    made = subprocess.run(
        [sys.executable, "-m", "agentgym", "new-env", "hanoi"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    package = tmp_path / "agentgym-env-hanoi"

    # A real install (a wheel built by hatchling through pip's build isolation) into a folder that
    # this interpreter then sees on PYTHONPATH: importlib.metadata finds its entry points there.
    site = tmp_path / "site"
    install = subprocess.run(
        [pip_python, "-m", "pip", "install", "--no-deps", "--target", str(site), str(package)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env=clean_env(),
    )
    assert install.returncode == 0, install.stdout + install.stderr
    assert (site / "agentgym_hanoi" / "plugin.py").is_file()
    assert list(site.glob("agentgym_env_hanoi-*.dist-info"))

    env = clean_env(PYTHONPATH=str(site))
    envs = subprocess.run(
        [sys.executable, "-m", "agentgym", "envs", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert envs.returncode == 0, envs.stderr
    assert '"distribution": "agentgym-env-hanoi"' in envs.stdout

    # The package's own pytest config (its pyproject) is the rootdir's, not this repository's.
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", str(package), "-p", "no:cacheprovider", "-v"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    output = tests.stdout + tests.stderr
    assert tests.returncode == 0, output
    passed = re.search(r"(\d+) passed", output)
    assert passed and int(passed.group(1)) > 0, output
    assert "failed" not in output.splitlines()[-1] and "error" not in output.splitlines()[-1], output
    # The conformance suite ran (collected from tests/conftest.py), expert, HTTP parity and the
    # instance's state after a reset included.
    checks = ("test_reset_is_deterministic", "test_http_matches_in_process", "test_expert_solves_sample")
    for test in (*checks, "test_reset_leaves_instance_as_fresh"):
        assert re.search(rf"tests/conftest\.py::{test}\S* PASSED", output), f"{test} did not run:\n{output}"
