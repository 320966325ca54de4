"""The shape checks of ``agentgym.testing.layout`` find what is planted in a small package, and
nothing in one without it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from agentgym.testing import layout


def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return pkg


def test_an_import_circle_is_found_through_relative_and_lazy_imports(tmp_path):
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "",
            "sub/__init__.py": "",
            "sub/a.py": "from . import b\n",
            "sub/b.py": "def f():\n    from pkg.c import g\n",
            "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.a import x\n",
        },
    )
    modules = layout.package_modules(pkg)
    assert set(modules) == {"pkg", "pkg.sub", "pkg.sub.a", "pkg.sub.b", "pkg.c"}
    circle = layout.import_circle(modules)
    assert set(circle) == {"pkg.sub.a", "pkg.sub.b", "pkg.c"} and circle[0] == circle[-1]
    (pkg / "c.py").write_text("x = 1\n")
    assert layout.import_circle(layout.package_modules(pkg)) == []


def test_long_functions_and_modules_are_named_with_their_length(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    pkg = _package(
        tmp_path, {"__init__.py": "", "m.py": f"def short():\n    pass\n\n\nasync def long():\n{body}"}
    )
    modules = layout.package_modules(pkg)
    assert layout.long_functions(modules, limit=60) == ["pkg.m.long: 61 lines"]
    assert layout.long_functions(modules, limit=61) == []
    assert layout.long_modules(modules, limit=60) == {"pkg.m": 65}


def test_markup_in_strings_is_counted_line_by_line(tmp_path):
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "",
            "page.py": '''\
                """A docstring may show <a href="x">markup</a>: it documents."""
                PAGE = """<div class="x">
                  <p>{{ text }}</p>
                plain words, a < b and c > d
                </div>"""
                CSS = """
                .card {
                  margin: 0 auto;
                }
                """
                SQL = "SELECT a FROM t WHERE b < 3"
                ''',
        },
    )
    modules = layout.package_modules(pkg)
    assert layout.markup_lines(modules["pkg.page"]) == 5
    assert layout.markup_lines(modules["pkg"]) == 0


def test_a_repeated_run_is_reported_once_at_its_start(tmp_path):
    block = "".join(f"line {i}\n" for i in range(8))
    a = tmp_path / "a.html"
    b = tmp_path / "b.py"
    a.write_text("head\n" + block + "tail\n")
    b.write_text("other\n\n" + "\n".join("  " + line for line in block.splitlines()) + "\n")
    found = layout.repeated_runs([a, b], length=6)
    assert found == [f"{a}:2, {b}:3"]
    assert layout.repeated_runs([a, b], length=9) == []
    # a run that overlaps itself (seven equal lines) is not a repeat
    c = tmp_path / "c.css"
    c.write_text("}\n" * 7)
    assert layout.repeated_runs([c], length=6) == []


def test_the_readme_layout_is_read_from_its_table(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "# x\n\n## Layout\n\n| module | holds |\n|---|---|\n| `a.py` | a |\n| `sites/` | b |\n"
        "| not a row |\n\n## Test\n\n| `z.py` | not in the layout |\n"
    )
    assert layout.readme_layout(readme) == ["a.py", "sites/"]


def test_the_readme_and_the_modules_are_compared_both_ways(tmp_path):
    pkg = _package(tmp_path, {"__init__.py": "", "a.py": "", "sub/__init__.py": "", "sub/b.py": ""})
    readme = tmp_path / "README.md"
    rows = ["__init__.py", "a.py", "sub/__init__.py", "sub/b.py"]
    readme.write_text("## Layout\n\n" + "".join(f"| `{r}` | x |\n" for r in rows))
    modules = layout.package_modules(pkg)
    assert layout.readme_differences(readme, modules) == {}
    readme.write_text("## Layout\n\n" + "".join(f"| `{r}` | x |\n" for r in [*rows[1:], "gone.py", "a.py"]))
    assert layout.readme_differences(readme, modules) == {
        "not listed": ["__init__.py"],
        "listed, no such module": ["gone.py"],
        "listed twice": ["a.py"],
    }


def test_shape_problems_gathers_every_check_and_is_empty_for_a_package_in_shape(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    pkg = _package(
        tmp_path, {"__init__.py": "", "a.py": "from pkg import b\n", "b.py": "from pkg import a\n"}
    )
    readme = tmp_path / "README.md"
    readme.write_text("## Layout\n\n" + "".join(f"| `{r}` | x |\n" for r in ["__init__.py", "a.py", "b.py"]))
    assert layout.shape_problems(layout.package_modules(pkg), readme) == {
        "import circle": layout.import_circle(layout.package_modules(pkg))
    }
    (pkg / "b.py").write_text(f"def long():\n{body}")
    (pkg / "c.py").write_text("")
    assert layout.shape_problems(layout.package_modules(pkg), readme, module_limit=60) == {
        "long modules": {"pkg.b": 61},
        "long functions": ["pkg.b.long: 61 lines"],
        "readme layout": {"not listed": ["c.py"]},
    }
    (pkg / "c.py").unlink()
    (pkg / "b.py").write_text("x = 1\n")
    assert layout.shape_problems(layout.package_modules(pkg), readme) == {}
