"""Fixtures of the interop tests (marker ``interop``, hatch environment ``interop``): the tiny model
and a third-party plugin, the package ``agentgym new-env`` writes, loaded with no code of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

#: The scaffold's env name: a third-party plugin as a plugin author gets it from ``agentgym new-env``.
SCAFFOLD = "interopsort"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model built locally (tokenizer from BabyAI and TextCraft expert text, random weights)."""
    from agentgym_train.tiny import build_tiny

    return build_tiny(
        tmp_path_factory.mktemp("tiny"), envs=("babyai", "textcraft"), tasks_per_env=20, size="micro"
    )


@pytest.fixture(scope="session")
def scaffold_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The env of a package written by ``agentgym new-env``, importable here and in child processes
    (``PYTHONPATH`` and ``AGENTGYM_PLUGIN_MODULES``), as if pip-installed."""
    from agentgym.plugins import reset_registry

    root = tmp_path_factory.mktemp("plugin")
    made = subprocess.run(
        [sys.executable, "-m", "agentgym", "new-env", SCAFFOLD, "--dir", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    src = str(root / f"agentgym-env-{SCAFFOLD}" / "src")
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "AGENTGYM_PLUGIN_MODULES")}
    sys.path.insert(0, src)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, saved["PYTHONPATH"]) if p)
    os.environ["AGENTGYM_PLUGIN_MODULES"] = ",".join(
        p for p in (f"agentgym_{SCAFFOLD}.plugin", saved["AGENTGYM_PLUGIN_MODULES"]) if p
    )
    reset_registry()
    try:
        yield SCAFFOLD
    finally:
        sys.path.remove(src)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        reset_registry()
