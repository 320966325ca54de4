"""agentgym-core's shape, read from its source: no import circle (imports for type checking
included), no module over 400 lines, no function over 60, and each server module says its one job
in its docstring."""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

import pytest

import agentgym

ROOT = Path(agentgym.__file__).parent
LONGEST_FUNCTION = 60  # lines, the ``def`` line to the last line of the body
LONGEST_MODULE = 400


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = (path, ast.parse(path.read_text(), str(path)))
    return out


MODULES = _modules()


def _targets(tree: ast.Module) -> set[str]:
    """The package's modules a module imports, at any depth. A package's ``__init__`` that only
    hands names on is looked through: importing ``agentgym.server.x`` runs it, but ties nothing."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                found.add(full if full in MODULES else node.module)
    return {name for name in found if name in MODULES}


def test_imports_form_no_circle():
    graph = {name: _targets(tree) - {name} for name, (_, tree) in MODULES.items()}
    # ``agentgym`` re-exports the public API lazily; it sits above everything, imported by nothing
    # of the package but through its submodules' names
    graph = {name: {t for t in targets if t != "agentgym"} for name, targets in graph.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


def test_no_module_is_over_the_length_limit():
    long = {
        name: n
        for name, (path, _) in MODULES.items()
        if (n := len(path.read_text().splitlines())) > LONGEST_MODULE
    }
    assert long == {}


def test_no_function_is_over_the_length_limit():
    long = [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for name, (_, tree) in MODULES.items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > LONGEST_FUNCTION
    ]
    assert long == []


def test_each_server_module_says_its_job():
    for name, (_, tree) in MODULES.items():
        if name.startswith("agentgym.server."):
            doc = ast.get_docstring(tree)
            assert doc and doc.split("\n\n")[0].rstrip().endswith("."), (
                f"{name} has no one-sentence docstring"
            )


def test_the_readme_layout_lists_every_module_and_no_other():
    readme = (ROOT.parents[1] / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([\w/]+\.py)` \|", layout, re.M)
    on_disk = sorted(path.relative_to(ROOT).as_posix() for path, _ in MODULES.values())
    assert sorted(listed) == on_disk
    assert len(listed) == len(set(listed))


def test_the_checks_see_the_package():
    """The checks read every module, and see imports (a wrong root would pass them vacuously)."""
    assert {"agentgym.server.sessions", "agentgym.server.shards", "agentgym.protocol"} <= set(MODULES)
    assert {"agentgym.server.shards", "agentgym.server.config"} <= _targets(
        MODULES["agentgym.server.sessions"][1]
    )
