"""agentgym-env-webarena's shape, read from its source: no import circle, no module over 400 lines,
no function over 60 lines, no HTML or CSS in Python strings (the sites' pages are templates), no
run of six lines repeated inside the sites, and the README's Layout lists every module."""

from __future__ import annotations

from pathlib import Path

import agentgym_webarena

from agentgym.testing import layout

ROOT = Path(agentgym_webarena.__file__).parent
MODULES = layout.package_modules(agentgym_webarena)
SITE_FILES = sorted(p for p in (ROOT / "sites").rglob("*") if p.suffix in {".py", ".html", ".css", ".js"})


def test_imports_form_no_circle():
    assert layout.import_circle(MODULES) == []


def test_no_module_is_over_the_length_limit():
    assert layout.long_modules(MODULES, limit=400) == {}


def test_no_function_is_over_the_length_limit():
    assert layout.long_functions(MODULES, limit=60) == []


def test_markup_lives_in_templates_not_in_python():
    heavy = {name: n for name, m in MODULES.items() if (n := layout.markup_lines(m)) > 20}
    assert heavy == {}


def test_no_run_of_six_lines_is_repeated_inside_the_sites():
    assert layout.repeated_runs(SITE_FILES, length=6) == []


def test_the_readme_layout_lists_every_module_and_no_other():
    assert layout.readme_differences(ROOT.parents[1] / "README.md", MODULES) == {}


def test_the_checks_see_the_package():
    """The sites' templates and modules are read (a wrong root would pass the checks vacuously)."""
    assert {"agentgym_webarena.env", "agentgym_webarena.sites.shop"} <= set(MODULES)
    assert any(p.suffix == ".html" for p in SITE_FILES) and any(p.suffix == ".py" for p in SITE_FILES)
