"""The pytest plugin behind ``agentgym_conformance = ...`` in a conftest (entry point ``pytest11``).

Imports of agentgym happen lazily, so the plugin costs nothing in test runs that do not use it.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path
from typing import Any

import pytest

VARIABLE = "agentgym_conformance"


def read_config(path: Path) -> Any:
    """The literal assigned to ``agentgym_conformance`` at a conftest's top level, if any."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    if VARIABLE not in text:
        return None
    for node in ast.parse(text, filename=str(path)).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == VARIABLE for t in node.targets
        ):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                raise pytest.UsageError(
                    f"{path}: {VARIABLE} must be a literal (an env name or a dict)"
                ) from None
    return None


class ConformanceModule(pytest.Module):
    """A test module whose functions are the conformance suite for one env."""

    def __init__(self, *args: Any, conformance: Any = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.conformance = conformance
        self.extra_keyword_matches.add("conformance")  # ``pytest -k conformance`` selects the suite

    def _getobj(self) -> types.ModuleType:
        from agentgym.testing.conformance import ConformanceConfig, build_suite

        config = ConformanceConfig.parse(self.conformance)
        module = types.ModuleType(f"agentgym_conformance_{config.env}")
        module.__file__ = str(self.path)
        module.__dict__.update(build_suite(config))
        return module


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name != "conftest.py":
        return None
    config = read_config(file_path)
    if config is None:
        return None
    return ConformanceModule.from_parent(parent, path=file_path, conformance=config)
