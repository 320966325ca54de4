"""Every package's shape, read from its source, by one set of checks with each package's rules as
data: no import circle, no import from a lower layer back up to a higher one, no module reaching
for another's private names, no module over 400 lines or function over 60, and the README's
Layout listing every module and no other; where a package says so, no markup in Python strings
and no run of six lines repeated among its site files."""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentgym.testing import layout


@dataclass(frozen=True)
class Rules:
    package: str  # the import name; its distribution's README.md (the Layout section) is two folders up
    #: one import ``importer -> imported`` the checks must see (a wrong root passes every check vacuously)
    sees_import: tuple[str, str]
    #: the package's layers, lowest first, each a tuple of module-name prefixes below the package:
    #: a module imports only from its own layer and those below (imports inside functions and for
    #: type checkers included). Empty: the package is small enough to be one layer.
    layers: tuple[tuple[str, ...], ...] = ()
    #: modules over everything that only re-export, lazily (the package's ``__init__``)
    facade: tuple[str, ...] = ()
    no_markup: bool = False  # pages are templates, not Python strings
    sites: str | None = None  # a folder whose files share no run of six lines
    says_its_job: str | None = None  # a subpackage whose every module opens with a one-sentence docstring


CORE_LAYERS = (
    ("errors", "spaces", "parsers", "trajectory", "api_version", "resets", "protocol"),
    ("env", "spec", "gym_registry", "resources", "prompting"),
    ("hookspecs", "hooks", "plugin_report", "plugins", "rewards", "builtin"),
    ("client",),
    ("adapters",),
    ("server",),
    ("testing", "play", "check", "scaffold"),
    ("cli", "__main__"),
)
TRAIN_LAYERS = (
    ("models",),
    ("policies", "tracking"),
    ("rollout", "serving"),
    ("rl", "finetune"),
    ("recipes", "verl_backend", "hookspecs"),
    ("cli",),
    ("plugin",),
)

PACKAGES = [
    Rules(
        "agentgym",
        ("agentgym.server.sessions", "agentgym.server.shards"),
        CORE_LAYERS,
        ("agentgym",),
        says_its_job="server",
    ),
    Rules(
        "agentgym_train",
        ("agentgym_train.rl.step", "agentgym_train.rl.learner"),
        TRAIN_LAYERS,
        ("agentgym_train",),
    ),
    Rules("agentgym_babyai", ("agentgym_babyai.oracle", "agentgym_babyai.scene")),
    Rules("agentgym_textcraft", ("agentgym_textcraft.plugin", "agentgym_textcraft.tasks")),
    Rules("agentgym_sciworld", ("agentgym_sciworld.plugin", "agentgym_sciworld.tasks")),
    Rules("agentgym_search", ("agentgym_search.generate", "agentgym_search.facts")),
    Rules(
        "agentgym_webarena",
        ("agentgym_webarena.sites", "agentgym_webarena.sites.db"),
        no_markup=True,
        sites="sites",
    ),
    Rules("agentgym_viewer", ("agentgym_viewer.app", "agentgym_viewer.pages"), no_markup=True),
]


def _with(rule: str) -> list:
    """The packages that set ``rule``, as test parameters named by package."""
    return [pytest.param(r, id=r.package) for r in PACKAGES if getattr(r, rule)]


def _folder(rules: Rules) -> Path:
    # a namespace package (agentgym_search: no __init__.py) has its one folder on __path__
    (folder,) = (Path(p) for p in importlib.import_module(rules.package).__path__)
    return folder


def _modules(rules: Rules) -> dict[str, layout.Module]:
    return layout.package_modules(_folder(rules))


def _layer(rules: Rules, module: str) -> int | None:
    rest = module.removeprefix(rules.package + ".")
    for rank, prefixes in enumerate(rules.layers):
        if any(rest == p or rest.startswith(p + ".") for p in prefixes):
            return rank
    return None


@pytest.mark.parametrize("rules", _with("package"))
def test_the_package_is_in_shape(rules):
    """No import circle, no module over 400 lines, no function over 60, and the README's Layout
    lists every module and no other."""
    readme = _folder(rules).parents[1] / "README.md"
    assert layout.shape_problems(_modules(rules), readme, above=rules.facade) == {}


@pytest.mark.parametrize("rules", _with("package"))
def test_the_checks_see_the_package(rules):
    modules = _modules(rules)
    importer, imported = rules.sees_import
    assert imported in layout.imports_of(modules[importer], modules)


@pytest.mark.parametrize("rules", _with("layers"))
def test_imports_run_down_the_layers(rules):
    modules = _modules(rules)
    unplaced = [m for m in modules if m not in rules.facade and _layer(rules, m) is None]
    assert unplaced == [], f"{rules.package}: modules in no layer (add them to its rules)"
    upward = [
        f"{name} -> {target}"
        for name, module in modules.items()
        if name not in rules.facade
        for target in layout.imports_of(module, modules)
        if target not in rules.facade and _layer(rules, target) > _layer(rules, name)
    ]
    assert upward == []


@pytest.mark.parametrize("rules", _with("package"))
def test_no_module_imports_a_private_name_from_another(rules):
    offences = [
        f"{name}: from {node.module} import {alias.name}"
        for name, module in _modules(rules).items()
        for node in ast.walk(module.tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentgym")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__") and node.module != name
    ]
    assert offences == []


@pytest.mark.parametrize("rules", _with("no_markup"))
def test_markup_lives_in_templates_not_in_python(rules):
    heavy = {name: n for name, m in _modules(rules).items() if (n := layout.markup_lines(m)) > 20}
    assert heavy == {}


@pytest.mark.parametrize("rules", _with("sites"))
def test_no_run_of_six_lines_is_repeated_among_the_site_files(rules):
    files = sorted(
        p for p in (_folder(rules) / rules.sites).rglob("*") if p.suffix in {".py", ".html", ".css", ".js"}
    )
    assert any(p.suffix == ".html" for p in files) and any(p.suffix == ".py" for p in files)
    assert layout.repeated_runs(files, length=6) == []


@pytest.mark.parametrize("rules", _with("says_its_job"))
def test_each_module_of_a_part_says_its_job(rules):
    part = f"{rules.package}.{rules.says_its_job}."
    silent = [
        name
        for name, module in _modules(rules).items()
        if name.startswith(part)
        and not ((doc := ast.get_docstring(module.tree)) and doc.split("\n\n")[0].rstrip().endswith("."))
    ]
    assert silent == []


#: where a first-party import inside a function needs no reason: the command line and the plugin
#: module import what a command or a hook needs when it runs, so that `agentgym --help` and
#: `agentgym plugins` (which calls every hook) stay fast
LAZY_BY_RULE = ("agentgym_train.cli", "agentgym_train.plugin")


def test_a_first_party_import_inside_a_function_says_why():
    """Elsewhere in the train package, an import of ours inside a function hides a dependency from
    a reader: it is at the top of its module, or a comment on it (or above its block) says why."""
    rules = next(r for r in PACKAGES if r.package == "agentgym_train")
    silent = []
    for name, module in _modules(rules).items():
        if name.startswith(LAZY_BY_RULE):
            continue
        lines = module.path.read_text(encoding="utf-8").splitlines()
        for fn in ast.walk(module.tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentgym"):
                    above = node.lineno - 2
                    while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
                        above -= 1
                    if "#" not in lines[node.lineno - 1] and not lines[above].strip().startswith("#"):
                        silent.append(f"{name}:{node.lineno}")
    assert silent == []


def test_the_layer_check_finds_an_import_back_up():
    """On the train package's own modules: a model module importing the CLI would be caught."""
    rules = next(r for r in PACKAGES if r.package == "agentgym_train")
    assert _layer(rules, "agentgym_train.models.logprobs") < _layer(rules, "agentgym_train.cli.train")
    assert _layer(rules, "agentgym_train.plugin") == len(rules.layers) - 1
