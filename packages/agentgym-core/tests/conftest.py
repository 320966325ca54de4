from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # agentgym_testenvs, for this process and (via PYTHONPATH) server workers


@pytest.fixture
def registry(monkeypatch):
    """A fresh plugin registry with the test envs (``crashy``) loaded next to the installed ones."""
    from agentgym import plugins

    monkeypatch.setenv("AGENTGYM_PLUGIN_MODULES", "agentgym_testenvs")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    plugins.reset_registry()
    yield plugins.get_registry()
    plugins.reset_registry()


@pytest.fixture
def server(registry):
    """Start a real server on loopback: ``url = server(["guess"], workers=2, ...)``."""
    from contextlib import ExitStack

    from agentgym.server.background import serve_in_thread

    with ExitStack() as stack:

        def start(env_names=("guess", "crashy"), **kwargs):
            return stack.enter_context(serve_in_thread(list(env_names), **kwargs))

        yield start
