"""agentgym-viewer's shape, read from its source: no import circle (the pages import the renderer,
never the app), no function over 60 lines (route handlers included), no HTML or CSS in Python
strings, and the README's Layout lists every module."""

from __future__ import annotations

from pathlib import Path

import agentgym_viewer

from agentgym.testing import layout

ROOT = Path(agentgym_viewer.__file__).parent
MODULES = layout.package_modules(agentgym_viewer)


def test_imports_form_no_circle():
    assert layout.import_circle(MODULES) == []


def test_no_function_is_over_the_length_limit():
    assert layout.long_functions(MODULES, limit=60) == []


def test_no_module_is_over_the_length_limit():
    assert layout.long_modules(MODULES, limit=400) == {}


def test_markup_lives_in_templates_not_in_python():
    heavy = {name: n for name, m in MODULES.items() if (n := layout.markup_lines(m)) > 20}
    assert heavy == {}


def test_the_readme_layout_lists_every_module_and_no_other():
    assert layout.readme_differences(ROOT.parents[1] / "README.md", MODULES) == {}


def test_the_checks_see_the_package():
    assert {"agentgym_viewer.app", "agentgym_viewer.pages"} <= set(MODULES)
    assert any(name.startswith("agentgym_viewer.index.") for name in MODULES)
