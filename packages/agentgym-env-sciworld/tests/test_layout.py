"""agentgym-env-sciworld's shape, read from its source: no import circle, no module over 400 lines,
no function over 60, and the README's Layout lists every module."""

from __future__ import annotations

from pathlib import Path

import agentgym_sciworld

from agentgym.testing import layout

ROOT = Path(agentgym_sciworld.__file__).parent
MODULES = layout.package_modules(agentgym_sciworld)


def test_imports_form_no_circle():
    assert layout.import_circle(MODULES) == []


def test_no_module_is_over_the_length_limit():
    assert layout.long_modules(MODULES, limit=400) == {}


def test_no_function_is_over_the_length_limit():
    assert layout.long_functions(MODULES, limit=60) == []


def test_the_readme_layout_lists_every_module_and_no_other():
    assert layout.readme_differences(ROOT.parents[1] / "README.md", MODULES) == {}


def test_the_checks_see_the_package():
    """The checks read every module, and see imports (a wrong root would pass them vacuously)."""
    assert {"agentgym_sciworld.env", "agentgym_sciworld.simulator", "agentgym_sciworld.tasks"} <= set(MODULES)
    assert {"agentgym_sciworld.simulator", "agentgym_sciworld.tasks"} <= layout.imports_of(
        MODULES["agentgym_sciworld.env"], MODULES
    )
