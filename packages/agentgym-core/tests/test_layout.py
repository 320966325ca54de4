"""agentgym-core's shape, read from its source: no import circle (imports for type checking
included), no module over 400 lines, no function over 60, and each server module says its one job
in its docstring."""

from __future__ import annotations

import ast
from pathlib import Path

import agentgym
from agentgym.testing import layout

ROOT = Path(agentgym.__file__).parent
MODULES = layout.package_modules(agentgym)


def test_imports_form_no_circle():
    # ``agentgym`` re-exports the public API lazily; it sits above everything, imported by nothing
    # of the package but through its submodules' names
    assert layout.import_circle(MODULES, above=["agentgym"]) == []


def test_no_module_is_over_the_length_limit():
    assert layout.long_modules(MODULES, limit=400) == {}


def test_no_function_is_over_the_length_limit():
    assert layout.long_functions(MODULES, limit=60) == []


def test_each_server_module_says_its_job():
    for name, module in MODULES.items():
        if name.startswith("agentgym.server."):
            doc = ast.get_docstring(module.tree)
            assert doc and doc.split("\n\n")[0].rstrip().endswith("."), (
                f"{name} has no one-sentence docstring"
            )


def test_the_readme_layout_lists_every_module_and_no_other():
    assert layout.readme_differences(ROOT.parents[1] / "README.md", MODULES) == {}


def test_the_checks_see_the_package():
    """The checks read every module, and see imports (a wrong root would pass them vacuously)."""
    assert {"agentgym.server.sessions", "agentgym.server.shards", "agentgym.protocol"} <= set(MODULES)
    assert {"agentgym.server.shards", "agentgym.server.config"} <= layout.imports_of(
        MODULES["agentgym.server.sessions"], MODULES
    )
