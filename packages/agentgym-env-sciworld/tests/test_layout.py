"""agentgym-env-sciworld's shape, read from its source: no import circle, no module over 400 lines,
no function over 60, and the README's Layout lists every module."""

from __future__ import annotations

from pathlib import Path

import agentgym_sciworld

from agentgym.testing import layout

ROOT = Path(agentgym_sciworld.__file__).parent
MODULES = layout.package_modules(agentgym_sciworld)


def test_the_package_is_in_shape():
    """No import circle, no module over 400 lines, no function over 60, the README's Layout lists
    every module and no other."""
    assert layout.shape_problems(MODULES, ROOT.parents[1] / "README.md") == {}


def test_the_checks_see_the_package():
    """The checks read every module, and see imports (a wrong root would pass them vacuously)."""
    assert {"agentgym_sciworld.env", "agentgym_sciworld.simulator", "agentgym_sciworld.tasks"} <= set(MODULES)
    assert {"agentgym_sciworld.simulator", "agentgym_sciworld.tasks"} <= layout.imports_of(
        MODULES["agentgym_sciworld.env"], MODULES
    )
