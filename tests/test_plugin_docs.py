"""docs/plugins.md, the plugin author's guide, held to the code both ways: every hook, ``EnvSpec``,
``Split`` and ``InstanceCost`` field, spec method and v1 route is in it, and every hook, field,
method, route, command, option, environment variable and Python name it names exists. Its Python
examples run as written and its HTTP exchanges are replayed against a real server.

The repository-wide checks (commands and options, files and links, Python names, environment
variables) cover this page with every other doc, in tests/test_docs.py."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
from pathlib import Path

import httpx
import pytest
from test_docs import _app_routes, _table_names

import agentgym
from agentgym.env import TextEnv
from agentgym.plugins import get_registry, hook_names, reset_registry
from agentgym.spec import EnvSpec, InstanceCost, Split
from agentgym.testing.conformance import ConformanceConfig

ROOT = Path(__file__).resolve().parents[1]
NAME = "docs/plugins.md"
GUIDE = (ROOT / NAME).read_text(encoding="utf-8")


def _section(heading: str) -> str:
    """The text under ``heading`` up to the next heading of any level (the heading included)."""
    assert f"\n{heading}\n" in GUIDE, f"{NAME} has no heading {heading!r}"
    body = GUIDE.split(f"\n{heading}\n", 1)[1]
    return heading + "\n" + re.split(r"^#", body, maxsplit=1, flags=re.M)[0]


def _table(heading: str) -> set[str]:
    return set(_table_names(_section(heading), heading))


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE, re.S)


# -- hooks --------------------------------------------------------------------------------------
def test_every_hook_is_in_the_table_with_its_arguments_and_every_hook_named_exists():
    rows = dict(re.findall(r"^\| `(agentgym_\w+)\(([^)]*)\)` \|", _section("## Hooks"), re.M))
    pm = get_registry().pm
    for name in hook_names():  # core's and those a package specifies (agentgym_train.hookspecs...)
        assert name in rows, f"{NAME}'s hook table misses {name}"
        args = [a.strip() for a in rows[name].split(",") if a.strip()]
        assert args == list(getattr(pm.hook, name).spec.argnames), f"{NAME} gives {name} other arguments"
    named = set(re.findall(r"\b(agentgym_\w+)\(", GUIDE))
    assert named - set(hook_names()) == set(), (
        f"{NAME} names no such hook {sorted(named - set(hook_names()))}"
    )


# -- EnvSpec, Split, InstanceCost -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("heading", "cls"),
    [
        ("## `EnvSpec`: what a plugin declares", EnvSpec),
        ("### Splits and categories", Split),
        ("### `InstanceCost`", InstanceCost),
    ],
)
def test_the_field_tables_match_the_dataclasses(heading, cls):
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    documented = _table(heading)
    assert fields - documented == set(), (
        f"{NAME} misses {cls.__name__} field(s) {sorted(fields - documented)}"
    )
    assert documented - fields == set(), (
        f"{NAME} names no such {cls.__name__} field {sorted(documented - fields)}"
    )


def test_the_methods_table_matches_envspecs_public_methods():
    fields = {f.name for f in dataclasses.fields(EnvSpec)}
    methods = {n for n, _ in inspect.getmembers(EnvSpec) if not n.startswith("_") and n not in fields}
    documented = _table("### Its methods")
    assert methods - documented == set(), f"{NAME} misses EnvSpec method(s) {sorted(methods - documented)}"
    assert documented - methods == set(), (
        f"{NAME} names no such EnvSpec method {sorted(documented - methods)}"
    )


def test_the_textenv_table_names_real_methods_and_the_two_to_implement():
    documented = _table("## The env: a `TextEnv`")
    public = {n for n, _ in inspect.getmembers(TextEnv) if not n.startswith("_")}
    assert documented - public == set(), f"{NAME} names no such TextEnv method {sorted(documented - public)}"
    assert {"reset_task", "step_action"} <= documented


# -- the HTTP API -------------------------------------------------------------------------------
def test_every_v1_route_is_in_the_guide_and_every_route_named_exists():
    routes = {r for r in _app_routes() if r.startswith("/v1/")}
    named = {re.sub(r"/\d+(?=/|$)", "/{id}", path) for path in re.findall(r"(/v1/[\w/{}]+)", GUIDE)}
    assert routes - named == set(), f"{NAME} misses route(s) {sorted(routes - named)}"
    assert named - routes == set(), f"{NAME} names no such route {sorted(named - routes)}"


def _exchanges() -> list[tuple[str, str, dict | None, dict]]:
    """``(method, path, body, reply)`` of each ```http block and the ```json block after it."""
    out = []
    for request, reply in re.findall(r"```http\n(.*?)```\s*```json\n(.*?)```", GUIDE, re.S):
        line, _, body = request.partition("\n")
        method, path = line.split()
        out.append((method, path, json.loads(body) if body.strip() else None, json.loads(reply)))
    return out


def test_the_http_exchanges_are_what_the_server_answers():
    from agentgym.server.background import serve_in_thread

    exchanges = _exchanges()
    assert {"/v1/reset", "/v1/step", "/v1/expert"} <= {path for _, path, _, _ in exchanges}
    reset_registry()
    with serve_in_thread(["guess"]) as url, httpx.Client(base_url=url, timeout=30) as client:
        for method, path, body, reply in exchanges:
            answer = (
                client.request(method, path, json=body) if body is not None else client.request(method, path)
            )
            assert answer.json() == reply, f"{method} {path} {body}: the server answers {answer.text}"
            assert answer.is_success == ("error" not in reply), (
                f"{method} {path}: status {answer.status_code}"
            )


# -- the examples ---------------------------------------------------------------------------------
@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_each_python_example_runs_as_written(index):
    reset_registry()
    namespace: dict = {"__name__": f"plugins_md_example_{index}"}
    exec(compile(_blocks("python")[index], f"{NAME}, Python block {index + 1}", "exec"), namespace)
    if "agentgym_envs" in namespace:  # the plugin module: its spec is sound and is the example's
        assert namespace["AGENTGYM_API_VERSION"] == agentgym.API_VERSION
        [spec] = namespace["agentgym_envs"]()
        installed = agentgym.env_specs()[spec.name]
        assert spec.problems() == []
        for field in ("factory", "expert", "default_max_turns", "action_parser", "description"):
            assert getattr(spec, field) == getattr(installed, field), f"the plugin module's {field}"
        assert {n: list(s.task_ids) for n, s in spec.splits.items()} == {
            n: list(s.task_ids) for n, s in installed.splits.items()
        }


def test_every_conformance_option_named_exists():
    known = {f.name for f in dataclasses.fields(ConformanceConfig)}
    lines = [line for block in _blocks("python") for line in block.splitlines()]
    settings = [line for line in lines if line.startswith("agentgym_conformance = ")]
    assert settings, f"{NAME} shows no agentgym_conformance line"
    for line in settings:
        value = ast.literal_eval(line.split("=", 1)[1].split("#")[0].strip())
        named = set(value) if isinstance(value, dict) else {"env"}
        assert named <= known, f"{NAME}: no conformance option {sorted(named - known)}"


# -- versions, and where the guide is linked from --------------------------------------------------
def test_the_api_version_and_its_declaration_are_the_current_ones():
    assert f'`agentgym.API_VERSION` (now `"{agentgym.API_VERSION}"`)' in GUIDE
    assert f'`AGENTGYM_API_VERSION = "{agentgym.API_VERSION}"`' in GUIDE
    assert f'\nAGENTGYM_API_VERSION = "{agentgym.API_VERSION}"' in "\n".join(_blocks("python"))


def test_the_guide_is_linked_from_cores_readme_and_the_env_contract():
    for doc, link in (
        ("packages/agentgym-core/README.md", "](../../docs/plugins.md)"),
        ("docs/env-contract.md", "](plugins.md)"),
        ("README.md", "](docs/plugins.md)"),
    ):
        assert link in (ROOT / doc).read_text(encoding="utf-8"), f"{doc} does not link to {NAME}"
