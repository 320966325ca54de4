"""A package's shape, read from its source: import circles, long modules and functions, markup kept
in Python strings, repeated runs of lines, and the README's list of modules.

Each function returns what it found (empty when the package is in shape), so a test asserts the
finding equals nothing and its failure message names every offender::

    from agentgym.testing import layout

    modules = layout.package_modules(my_package)
    assert layout.import_circle(modules) == []
    assert layout.long_functions(modules, limit=60) == []
"""

from __future__ import annotations

import ast
import graphlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

#: An HTML tag (opening, closing or self-closing), a CSS rule's opening or a CSS declaration.
MARKUP = re.compile(
    r"</?[a-zA-Z][\w-]*(\s[^<>]*)?/?>"
    r"|^\s*[\w.#:\[\]=\"'*>, -]+\{\s*$"
    r"|^\s*[a-z-]+\s*:\s*[^;{}]+;\s*(\}\s*)?$"
)


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. ``agentgym.server.app``
    path: Path
    tree: ast.Module

    @property
    def lines(self) -> int:
        return len(self.path.read_text(encoding="utf-8").splitlines())


def package_modules(package: ModuleType | Path) -> dict[str, Module]:
    """Every module of ``package`` (an imported package, or its folder), by dotted name."""
    root = package if isinstance(package, Path) else Path(package.__file__).parent  # type: ignore[arg-type]
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = Module(name, path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return out


def imports_of(module: Module, modules: dict[str, Module]) -> set[str]:
    """The modules of ``modules`` that ``module`` imports, anywhere in it (inside functions and under
    ``TYPE_CHECKING`` too: a circle through them is still a circle for a reader)."""
    found: set[str] = set()
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: ``from .db import x`` inside agentgym_webarena.sites
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                full = f"{base}.{a.name}"
                found.add(full if full in modules else base)
    return {name for name in found if name in modules and name != module.name}


def import_circle(modules: dict[str, Module], *, above: Iterable[str] = ()) -> list[str]:
    """One import circle as ``[a, b, ..., a]``, or ``[]`` when there is none. Modules in ``above``
    (a package's ``__init__`` that re-exports lazily) are left out of the graph."""
    skip = set(above)
    graph = {name: imports_of(module, modules) - skip for name, module in modules.items() if name not in skip}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def long_modules(modules: dict[str, Module], limit: int = 400) -> dict[str, int]:
    """Modules over ``limit`` lines, with their length."""
    return {name: m.lines for name, m in modules.items() if m.lines > limit}


def long_functions(modules: dict[str, Module], limit: int = 60) -> list[str]:
    """``module.function: N lines`` for each function over ``limit`` lines (``def`` to its last)."""
    return [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"  # type: ignore[operator]
        for name, m in modules.items()
        for node in ast.walk(m.tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > limit  # type: ignore[operator]
    ]


def _docstrings(tree: ast.Module) -> set[int]:
    owners = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    return {
        id(owner.body[0].value)
        for owner in owners
        if owner.body
        and isinstance(owner.body[0], ast.Expr)
        and isinstance(owner.body[0].value, ast.Constant)
    }


def markup_lines(module: Module) -> int:
    """Lines of HTML or CSS inside the module's string literals (f-strings included; docstrings
    not: a ``<placeholder>`` there documents, it renders nothing)."""
    skip = _docstrings(module.tree)
    count = 0
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            count += sum(1 for line in node.value.splitlines() if MARKUP.search(line))
    return count


def repeated_runs(paths: Iterable[Path], length: int = 6) -> list[str]:
    """Runs of ``length`` non-blank lines (compared stripped) that occur twice or more, within a
    file or across files, as ``path:line, path:line``. A longer repeat is reported once, at its
    start; occurrences of one run that overlap count once."""
    where: dict[tuple[str, ...], list[tuple[Path, int, int]]] = {}
    for path in paths:
        text = path.read_text(encoding="utf-8").splitlines()
        numbered = [(i, s) for i, line in enumerate(text, 1) if (s := line.strip())]
        for k in range(len(numbered) - length + 1):
            run = tuple(s for _, s in numbered[k : k + length])
            places = where.setdefault(run, [])
            if not places or places[-1][0] != path or k >= places[-1][2] + length:
                places.append((path, numbered[k][0], k))
    repeats = [places for places in where.values() if len(places) > 1]
    place_sets = {frozenset((p, k) for p, _, k in places) for places in repeats}
    return [
        ", ".join(f"{p}:{line}" for p, line, _ in places)
        for places in repeats
        # the same repeat one line earlier names these places already: this is its continuation
        if frozenset((p, k - 1) for p, _, k in places) not in place_sets
    ]


def readme_layout(readme: Path) -> list[str]:
    """The files listed in ``readme``'s "Layout" section: the first cell of each table row, when it
    is a backquoted path ending in ``.py`` (or ``/``, for a folder)."""
    text = readme.read_text(encoding="utf-8")
    if "## Layout" not in text:
        return []
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w./-]+(?:\.py|/))` \|", section, re.M)


def readme_differences(readme: Path, modules: dict[str, Module]) -> dict[str, list[str]]:
    """How ``readme``'s Layout list and the package's modules differ: modules ``not listed``, rows
    ``listed, no such module`` and rows ``listed twice`` (paths relative to the package folder);
    empty when they agree."""
    root = modules[min(modules, key=len)].path.parent
    listed = readme_layout(readme)
    on_disk = {m.path.relative_to(root).as_posix() for m in modules.values()}
    found = {
        "not listed": sorted(on_disk - set(listed)),
        "listed, no such module": sorted(set(listed) - on_disk),
        "listed twice": sorted({row for row in listed if listed.count(row) > 1}),
    }
    return {what: rows for what, rows in found.items() if rows}


def shape_problems(
    modules: dict[str, Module],
    readme: Path,
    *,
    module_limit: int = 400,
    function_limit: int = 60,
    above: Iterable[str] = (),
) -> dict[str, object]:
    """Every finding of the usual shape checks at once (an import circle, long modules, long
    functions, the README's Layout against the modules), keyed by check; empty when the package is
    in shape. A package's layout test asserts it equals ``{}``, and its failure names each offender."""
    found = {
        "import circle": import_circle(modules, above=above),
        "long modules": long_modules(modules, limit=module_limit),
        "long functions": long_functions(modules, limit=function_limit),
        "readme layout": readme_differences(readme, modules),
    }
    return {check: finding for check, finding in found.items() if finding}
