"""agentgym-env-search's shape, read from its source: no import circle, no module over 400 lines,
no function over 60, and the README's Layout lists every module."""

from __future__ import annotations

from pathlib import Path

import agentgym_search

from agentgym.testing import layout

# a namespace package (no ``__init__.py``, so no ``__file__``): its one folder is on ``__path__``
(ROOT,) = (Path(p) for p in agentgym_search.__path__)
MODULES = layout.package_modules(ROOT)


def test_the_package_is_in_shape():
    """No import circle, no module over 400 lines, no function over 60, the README's Layout lists
    every module and no other."""
    assert layout.shape_problems(MODULES, ROOT.parents[1] / "README.md") == {}


def test_the_checks_see_the_package():
    """The checks read every module, and see imports (a wrong root would pass them vacuously)."""
    assert {"agentgym_search.env", "agentgym_search.generate", "agentgym_search.facts"} <= set(MODULES)
    assert {"agentgym_search.facts", "agentgym_search.corpus"} <= layout.imports_of(
        MODULES["agentgym_search.generate"], MODULES
    )
