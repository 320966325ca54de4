"""The documentation is tested against the code (datasette's habit)."""

from __future__ import annotations

import re
from pathlib import Path

from agentgym import hookspecs
from agentgym.cli import cli
from agentgym.parsers import PARSERS
from agentgym.plugins import hook_names
from agentgym.rewards import BUILTIN_TRANSFORMS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_hook_is_in_the_readme_and_documented_in_hookspecs():
    for name in hook_names():
        assert f"`{name}(" in README, f"README's plugin table misses {name}"
        assert getattr(hookspecs, name).__doc__, f"{name} has no docstring"


def test_every_core_command_is_in_the_readme():
    for name in cli.commands:
        assert f"`agentgym {name}" in README, f"README's command table misses 'agentgym {name}'"


def test_every_parser_and_reward_transform_is_in_the_readme():
    for name in PARSERS:
        assert f"| `{name}` |" in README, f"README misses parser {name}"
    for name in BUILTIN_TRANSFORMS:
        assert f"`{name}`" in README, f"README misses reward transform {name}"


def test_every_v1_route_is_in_the_readme():
    from agentgym.server.app import create_app

    app = create_app(["guess"])
    for route in app.routes:
        path = getattr(route, "path", "")
        if path.startswith("/v1/"):
            shown = re.sub(r"\{sid\}", "{id}", path)
            assert shown in README, f"README misses route {path}"


def test_quick_start_has_two_commands_and_ci_runs_the_test_command():
    block = re.search(r"## Quick start\s+```bash\n(.*?)```", README, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["pip install hatch && hatch run demo", "hatch test"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^hatch test$", ci, re.M), ".ci/run must run exactly the README's test command"


def test_every_package_has_a_readme_with_install_use_and_test_sections():
    for pyproject in [*ROOT.glob("packages/*/pyproject.toml"), *ROOT.glob("examples/*/pyproject.toml")]:
        readme = (pyproject.parent / "README.md").read_text(encoding="utf-8")
        for heading in ("## Use", "## Test alone"):
            assert heading in readme, f"{pyproject.parent.name}/README.md misses '{heading}'"
