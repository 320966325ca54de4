"""The train package's shape, read from its source: imports run one way (no cycle, function-level
imports included, nothing below the CLI importing it), no module reaches for another's private
names, every module and function is short enough to hold in one's head, and the README's Layout
lists every module."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import agentgym_train
import pytest

ROOT = Path(agentgym_train.__file__).parent


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(), str(path))
    return out


MODULES = _modules()


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The package's modules an import statement loads."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    return [n for n in names if n in MODULES]


def test_imports_inside_the_package_form_no_cycle():
    graph = {name: set() for name in MODULES}
    for name, tree in MODULES.items():
        for node in _imports(tree):
            graph[name].update(t for t in _targets(node) if t != name)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_nothing_below_the_cli_imports_it():
    """Only the plugin (which registers the commands) and the CLI's own modules import the CLI."""

    def imports_cli(name: str) -> bool:
        targets = {t for node in _imports(MODULES[name]) for t in _targets(node)}
        return any(t == "agentgym_train.cli" or t.startswith("agentgym_train.cli.") for t in targets)

    below = [n for n in MODULES if n != "agentgym_train.plugin" and not n.startswith("agentgym_train.cli")]
    assert [n for n in below if imports_cli(n)] == []
    assert imports_cli("agentgym_train.plugin")  # the check sees imports


def test_no_module_imports_a_private_name_from_another():
    offences = [
        f"{name}: from {node.module} import {a.name}"
        for name, tree in MODULES.items()
        for node in _imports(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentgym")
        for a in node.names
        if a.name.startswith("_") and not a.name.startswith("__") and node.module != name
    ]
    assert not offences


def test_the_checks_see_the_package():
    """The checks above read every module (a wrong root would pass them vacuously)."""
    assert {
        "agentgym_train.rl.trainer",
        "agentgym_train.models.modeling",
        "agentgym_train.rollout.engine",
    } <= set(MODULES)
    edges = {t for node in _imports(MODULES["agentgym_train.rl.trainer"]) for t in _targets(node)}
    assert {"agentgym_train.rl.learner", "agentgym_train.models.checkpoint"} <= edges


def test_the_package_is_in_shape():
    """No import circle (by the layout kit's reading too), no module over 400 lines, no function
    over 60, and the README's Layout lists every module and no other."""
    from agentgym.testing import layout

    modules = layout.package_modules(agentgym_train)
    assert layout.shape_problems(modules, ROOT.parents[1] / "README.md") == {}
