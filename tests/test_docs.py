"""The documentation is tested against the code (datasette's habit), in both directions: what the
code has is documented, and what the README and docs name exists."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import click
import pytest

from agentgym.cli import _add_plugin_commands, cli
from agentgym.parsers import PARSERS
from agentgym.plugins import get_registry, hook_names
from agentgym.rewards import BUILTIN_TRANSFORMS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONTRACT = (ROOT / "docs" / "env-contract.md").read_text(encoding="utf-8")
DOC_FILES = [
    ROOT / "README.md",
    *ROOT.glob("docs/*.md"),
    *ROOT.glob("packages/*/README.md"),
    *ROOT.glob("examples/*/README.md"),
]
DOCS = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in DOC_FILES}

_add_plugin_commands()  # agentgym-train's commands, as `agentgym` itself adds them


def _spans(text: str) -> list[str]:
    """Inline code spans and the lines of fenced code blocks."""
    blocks = re.findall(r"```\w*\n(.*?)```", text, re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```\w*\n.*?```", "", text, flags=re.S))
    return inline + [line for block in blocks for line in block.splitlines()]


# -- what the code has is documented -----------------------------------------------------------
def test_readme_is_a_front_page():
    assert len(README) < 12_000, f"README is {len(README)} characters; move detail to docs/"


def test_every_hook_is_in_the_readme_and_documented_in_hookspecs():
    pm = get_registry().pm
    for name in hook_names():  # core's and those a package specifies (agentgym_train.hookspecs...)
        assert f"`{name}(" in README, f"README's plugin table misses {name}"
        spec = getattr(pm.hook, name).spec
        assert spec.function.__doc__, f"{name} has no docstring in {spec.namespace.__name__}"


def test_every_core_command_is_in_the_readme():
    from agentgym.cli import cli as core

    for name in core.commands:
        assert f"`agentgym {name}" in README, f"README's command table misses 'agentgym {name}'"


def test_every_parser_and_reward_transform_is_in_the_readme():
    for name in PARSERS:
        assert f"| `{name}` |" in README, f"README misses parser {name}"
    for name in BUILTIN_TRANSFORMS:
        assert f"`{name}`" in README, f"README misses reward transform {name}"


def _app_routes() -> set[str]:
    from agentgym.server.app import create_app

    app = create_app(["guess"])  # its routes as its OpenAPI schema lists them (routers included)
    return {re.sub(r"\{sid\}", "{id}", path) for path in app.openapi()["paths"]}


def test_every_v1_route_is_in_the_readme():
    # a route counts as documented where it stands alone in code: `POST /v1/sessions` or `/v1/step`
    documented = set(re.findall(r"(/v1/[\w/{}]+)(?=[`,\s])", README))
    for path in _app_routes():
        if path.startswith("/v1/"):
            assert path in documented, f"README misses route {path}"


def _table_names(text: str, heading: str) -> list[str]:
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"^\| `([a-z_]+)`(?:, `([a-z_]+)`)? \|", section, re.M)
    return [n for pair in names for n in pair if n]


@pytest.mark.parametrize(
    ("heading", "cls"),
    [
        ("## `EnvSpec`", "agentgym.spec:EnvSpec"),
        ("## `Split`", "agentgym.spec:Split"),
        ("## `InstanceCost`", "agentgym.spec:InstanceCost"),
        ("## The conformance kit", "agentgym.testing.conformance:ConformanceConfig"),
    ],
)
def test_env_contract_tables_match_the_dataclasses(heading, cls):
    module, _, name = cls.partition(":")
    fields = {f.name for f in dataclasses.fields(getattr(importlib.import_module(module), name)) if f.init}
    documented = set(_table_names(CONTRACT, heading))
    assert fields - documented == set(), f"docs/env-contract.md misses {sorted(fields - documented)}"
    assert documented - fields == set(), (
        f"docs/env-contract.md names no such field {sorted(documented - fields)}"
    )


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
        assert f"`{pyproject.parent.relative_to(ROOT).as_posix()}`" in README, (
            f"README misses {pyproject.parent}"
        )


# -- what the docs name exists -----------------------------------------------------------------
def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lowercase, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", markdown, flags=re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("doc", sorted(DOCS))
def test_every_file_and_link_named_exists(doc):
    text, base = DOCS[doc], (ROOT / doc).parent
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)]*))?\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path = base / target if target else ROOT / doc
        assert path.exists(), f"{doc} links to {target}, which does not exist"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path.read_text(encoding="utf-8")), f"{doc} links to {target}#{anchor}"
    for path in re.findall(r"(?<![\w/.])((?:packages|examples|bench|tests|docs|\.ci)/[\w./-]*[\w/])", text):
        if "*" in path or "<" in path or re.search(r"[A-Z]{3,}", path):  # a glob or a placeholder
            continue
        assert (ROOT / path).exists() or (base / path).exists(), f"{doc} names {path}, which does not exist"


@pytest.mark.parametrize("doc", sorted(DOCS))
def test_every_command_and_option_named_exists(doc):
    for span in _spans(DOCS[doc]):
        for invocation in re.findall(r"(?<!from)(?:^|&& |\s)agentgym ([a-z][a-z-]*)((?: [^&#|]*)?)", span):
            name, rest = invocation
            assert name in cli.commands, f"{doc}: 'agentgym {name}' is no command (span: {span!r})"
            command, words = cli.commands[name], rest.split()
            while isinstance(command, click.Group) and words and not words[0].startswith("-"):
                sub = words.pop(0)  # a group's subcommand: `agentgym search serve-retriever`
                assert sub in command.commands, f"{doc}: 'agentgym {name} {sub}' is no command"
                name, command = f"{name} {sub}", command.commands[sub]
            options = {opt for p in command.params for opt in p.opts}
            for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", " ".join(words)):
                assert option in options, f"{doc}: 'agentgym {name}' has no option {option}"


def test_every_route_the_readme_names_exists():
    routes = _app_routes()
    for method_path in re.findall(r"`(?:GET|POST|DELETE) (/[^ `?]*)", README):
        assert method_path in routes or "/{env}" + method_path in routes, f"README names route {method_path}"
    for path in re.findall(r"(/v1/[\w/{}]+)", README):
        assert path in routes, f"README names route {path}"


def test_every_python_name_the_docs_name_exists():
    for doc, text in DOCS.items():
        for dotted in set(re.findall(r"\b(agentgym(?:_\w+)?(?:\.\w+)+)", text)):
            if dotted.endswith((".py", ".md", ".png", ".json", ".jsonl", ".yaml")):
                continue
            parts = dotted.split(".")
            optional = False
            for i in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                    break
                except ImportError as exc:
                    # a module of ours that needs an optional dependency this environment lacks (verl)
                    optional = optional or not (exc.name or "agentgym").startswith("agentgym")
                    continue
            else:
                pytest.fail(f"{doc}: {dotted} does not import")
            if optional:
                continue
            for attr in parts[i:]:
                assert hasattr(obj, attr), f"{doc}: {dotted} does not exist"
                obj = getattr(obj, attr)


def test_every_environment_variable_the_readme_names_is_read_somewhere():
    source = "\n".join(
        p.read_text(encoding="utf-8")
        for p in ROOT.glob("packages/*/src/**/*.py")
        if "templates" not in p.parts
    )
    for var in set(re.findall(r"\b(AGENTGYM_[A-Z_]+)\b", README)):
        assert f'"{var}"' in source, f"README names {var}, which no package reads"
