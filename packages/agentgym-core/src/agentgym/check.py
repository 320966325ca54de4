"""``agentgym check ENV...``: the conformance kit (``agentgym.testing``) against installed envs, from
the command line, with no source checkout and no pytest knowledge.

One suite, two front-ends: this writes a conftest per env (``agentgym_conformance = {...}``, as an
env package's tests do) into a temporary folder and runs pytest on it in this process, with a
plugin object that collects each check's outcome. It prints a line per check as it ends, then a
table (or, with ``--json``, every check and case as JSON) and exits 1 when a check failed.
pytest (``pip install 'agentgym-core[testing]'``) is imported only when the command runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: What to change when a check fails, where its message does not say (a ``To fix:`` line does).
FIXES = {
    "factory_and_expert_import": "make the spec's factory, expert and compat 'module:attr' targets "
    "importable (install what they import)",
    "reset_leaves_instance_as_fresh": "reset every per-episode attribute in reset_task, or declare those "
    "that legitimately persist (caches, handles) in the env class's persistent_attributes",
    "reset_is_deterministic": "derive everything a task needs from its task id (seed random generators "
    "with it; no time, global state or set order); return a non-empty observation, "
    "info['instruction'] and a category",
    "different_ids_give_different_tasks": "make each task id pick its own task (goal, layout, hidden "
    "value), not one shared task",
    "invalid_action_is_an_observation": "answer an action step_action cannot use with an observation "
    "saying what is valid, info['valid_action'] = False and reward <= 0, without ending the episode",
    "non_text_actions_are_observations": "leave non-text actions to TextEnv.step (do not override step)",
    "listed_available_actions_are_valid": "list in available_actions() only actions step_action "
    "accepts at that moment",
    "step_after_end_is_an_error": "let TextEnv.step refuse a step after the end (do not override step)",
    "spaces_and_gymnasium_checker": "return str observations and accept any str action without raising",
    "registered_with_gymnasium": "let gymnasium.make(spec.gym_id) build the env agentgym.make does: a "
    "factory with no required argument, and resets that depend on the task id only",
    # its failures name their own fix (reward range, state kept over a reset, serialising); this one
    # is for the others (an error serving or reaching the env)
    "http_matches_in_process": "let the env be served as it runs in-process (try agentgym serve NAME): "
    "the failure above says what the served env answered or raised",
    "expert_solves_sample": "fix the expert (EnvSpec.expert) or the tasks it fails on",
    "undeclared_task_ids_are_refused": "refuse task ids in no split (TextEnv.reset raises "
    "UnknownTaskError) instead of wrapping them, or declare EnvSpec(open_task_ids=True)",
}
FIXES["undeclared_task_ids_are_refused_over_http"] = FIXES["undeclared_task_ids_are_refused"]
INSTALL_HINT = "agentgym check needs pytest and the conformance kit: pip install 'agentgym-core[testing]'"


@dataclass
class Case:
    """One test of the kit: a check (a test function) on one parameter (a task id, an action)."""

    env: str
    check: str
    case: str = ""
    outcome: str = "passed"  # passed, failed, skipped
    message: str = ""
    details: str = ""  # the full report, for -v
    duration_s: float = 0.0


@dataclass
class Check:
    """A check's cases together: failed if one failed, skipped if all were skipped."""

    env: str
    check: str
    cases: list[Case] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        outcomes = {c.outcome for c in self.cases}
        return "failed" if "failed" in outcomes else "passed" if "passed" in outcomes else "skipped"

    @property
    def first(self) -> Case:
        """The case that explains the outcome: the first failure, else the first skip, else any."""
        return next((c for c in self.cases if c.outcome == self.outcome), self.cases[0])

    def fix(self) -> str:
        message = self.first.message
        if self.outcome != "failed" or "To fix" in message:
            return ""
        return FIXES.get(self.check, "")

    def to_json(self) -> dict[str, Any]:
        counts = Counter(c.outcome for c in self.cases)
        return {
            "env": self.env,
            "check": self.check,
            "outcome": self.outcome,
            **{k: counts.get(k, 0) for k in ("passed", "failed", "skipped")},
            "message": self.first.message if self.outcome != "passed" else "",
            "fix": self.fix(),
            "duration_s": round(sum(c.duration_s for c in self.cases), 3),
            "cases": [{k: v for k, v in asdict(c).items() if k not in ("env", "check")} for c in self.cases],
        }


def _message(report: Any) -> str:
    """A failed or skipped report's reason, without pytest's prefixes."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, "Skipped: why")
        text = str(longrepr[2])
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(longrepr)
    for prefix in ("Skipped: ", "Failed: ", "AssertionError: "):
        text = text.removeprefix(prefix)
    if text.strip() in ("", "AssertionError"):  # a bare assert: the line that failed says what
        failed = [line[1:].strip() for line in report.longreprtext.splitlines() if line.startswith(">")]
        text = f"failed: {failed[-1]}" if failed else "AssertionError"
    return text.strip()


class Collector:
    """The pytest plugin object: each case's outcome, and a progress line as each check ends."""

    def __init__(self, progress: Callable[[Check, int, int], None]):
        self.progress = progress
        self.config: Any = None
        self.checks: dict[tuple[str, str], Check] = {}
        self.cases: dict[str, Case] = {}
        self.left: Counter[tuple[str, str]] = Counter()
        self.done = 0

    def pytest_configure(self, config: Any) -> None:
        # the kit's collector, where pytest did not load it from its entry point (autoload disabled)
        from agentgym.testing import plugin

        self.config = config
        if not config.pluginmanager.is_registered(plugin):
            config.pluginmanager.register(plugin, "agentgym")

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        for item in items:
            env = Path(str(item.path)).parent.name
            name = getattr(item, "originalname", item.name).removeprefix("test_")
            callspec = getattr(item, "callspec", None)
            case = Case(env=env, check=name, case=callspec.id if callspec is not None else "")
            self.cases[item.nodeid] = case
            self.checks.setdefault((env, name), Check(env, name)).cases.append(case)
            self.left[(env, name)] += 1

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:  # the suite could not be built: the env's spec, or the kit itself
            env = Path(report.nodeid.split("::")[0]).parent.name or "?"
            case = Case(
                env, "collect", outcome="failed", message=_message(report), details=report.longreprtext
            )
            check = self.checks[(env, f"collect {report.nodeid}")] = Check(env, "collect", [case])
            self._show(check, 0, 0)

    def pytest_runtest_logreport(self, report: Any) -> None:
        case = self.cases.get(report.nodeid)
        if case is None:
            return
        case.duration_s += report.duration
        if report.failed and case.outcome != "failed":
            where = "" if report.when == "call" else f"(in {report.when}) "
            case.outcome, case.message, case.details = "failed", where + _message(report), report.longreprtext
        elif report.skipped and case.outcome == "passed":
            case.outcome, case.message = "skipped", _message(report)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        case = self.cases.get(nodeid)
        if case is None:
            return
        key = (case.env, case.check)
        self.left[key] -= 1
        if self.left[key] == 0:
            self.done += 1
            self._show(self.checks[key], self.done, len(self.left))

    def _show(self, check: Check, done: int, total: int) -> None:
        """The progress line, past pytest's output capturing."""
        manager = self.config.pluginmanager.getplugin("capturemanager") if self.config else None
        with manager.global_and_fixture_disabled() if manager else contextlib.nullcontext():
            self.progress(check, done, total)


@dataclass
class CheckRun:
    """What ``agentgym check`` found: every check of every env, and how long it took."""

    envs: list[str]
    checks: list[Check]
    duration_s: float
    exit_code: int  # pytest's

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.outcome != "failed" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "envs": self.envs,
            "duration_s": round(self.duration_s, 1),
            "counts": dict(Counter(c.outcome for c in self.checks)),
            "checks": [c.to_json() for c in self.checks],
        }


@contextlib.contextmanager
def _no_addopts() -> Iterator[None]:
    """The user's ``PYTEST_ADDOPTS`` is for their own test runs, not this one."""
    saved = os.environ.pop("PYTEST_ADDOPTS", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["PYTEST_ADDOPTS"] = saved


def _kit() -> Any:
    """pytest, once the kit's plugin is known to import; else the install hint, as one line."""
    try:
        import pytest

        import agentgym.testing.plugin  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(f"{INSTALL_HINT} ({exc})") from None
    return pytest


def run_checks(configs: dict[str, dict[str, Any]], progress: Callable[[Check, int, int], None]) -> CheckRun:
    """The kit against each env of ``configs`` (env -> the kit's options, e.g. ``{"sample": 2}``)."""
    pytest = _kit()
    collector = Collector(progress)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentgym-check-") as tmp, _no_addopts():
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        for name, options in configs.items():
            (root / name).mkdir()
            config = {"env": name, **options}
            (root / name / "conftest.py").write_text(f"agentgym_conformance = {config!r}\n", encoding="utf-8")
        args = [str(root), "-c", str(root / "pytest.ini"), "--rootdir", str(root), "--import-mode=importlib"]
        args += ["-p", "no:cacheprovider", "-p", "no:terminal", "-p", "no:randomly", "-W", "ignore"]
        exit_code = int(pytest.main(args, plugins=[collector]))
    order = list(configs)
    checks = sorted(collector.checks.values(), key=lambda c: order.index(c.env) if c.env in order else 0)
    return CheckRun(order, checks, time.monotonic() - start, exit_code)


_STYLE = {"passed": "green", "failed": "bold red", "skipped": "yellow"}


def _result(check: Check) -> str:
    counts = Counter(c.outcome for c in check.cases)
    n = len(check.cases)
    text = check.outcome if n == 1 else f"{check.outcome} {counts[check.outcome]}/{n}"
    return f"[{_STYLE[check.outcome]}]{text}[/]"


def _detail(check: Check, verbose: bool) -> str:
    if check.outcome == "passed":
        return ""
    case = check.first
    message = case.details if verbose and case.details else case.message
    if not verbose and len(message) > 700:  # the start says what failed, the end often what to do
        message = f"{message[:350]} ... {message[-300:]}"
    where = f"[{case.case}] " if case.case and len(check.cases) > 1 else ""
    fix = check.fix()
    return escape(where + message) + (f"\n[bold]To fix:[/] {escape(fix)}" if fix else "")


def render_table(run: CheckRun, console: Console, verbose: bool = False) -> None:
    table = Table(show_lines=any(c.outcome == "failed" for c in run.checks))
    for column in ("env", "check", "result", "detail"):
        table.add_column(column, overflow="fold")
    for check in run.checks:
        table.add_row(check.env, check.check, _result(check), _detail(check, verbose))
    console.print(table)
    counts = Counter(c.outcome for c in run.checks)
    summary = ", ".join(f"{counts[k]} {k}" for k in ("passed", "failed", "skipped") if counts[k])
    verdict = "[green]ok[/]" if run.ok else "[bold red]FAILED[/]"
    console.print(f"{verdict}: {summary or 'no check ran'} ({', '.join(run.envs)}) in {run.duration_s:.1f}s")


def _progress_printer(console: Console, verbose: bool) -> Callable[[Check, int, int], None]:
    def show(check: Check, done: int, total: int) -> None:
        counter = f"[{done}/{total}] " if total else ""
        took = sum(c.duration_s for c in check.cases)
        line = (
            f"{counter}{check.env} {check.check}: {check.outcome} ({len(check.cases)} case(s), {took:.1f}s)"
        )
        if check.outcome == "failed" and verbose:
            line += f"\n{check.first.details or check.first.message}"
        console.print(line, markup=False, soft_wrap=True)

    return show


@click.command()
@click.argument("env_names", nargs=-1, required=True, metavar="ENV...")
@click.option("--sample", type=click.IntRange(1), help="Task ids per split for most checks [kit's: 5].")
@click.option("--expert-sample", type=click.IntRange(1), help="Tasks the expert must solve [kit's: 10].")
@click.option(
    "--expert-max-turns",
    type=click.IntRange(1),
    help="Turns the expert gets per task [kit's: 30 x the env's turn cap: enough for "
    "an expert that plays one primitive move a turn].",
)
@click.option("--no-http", is_flag=True, help="Skip the checks that serve the env over HTTP.")
@click.option("--json", "as_json", is_flag=True, help="Print every check and case as JSON (for CI).")
@click.option("-v", "--verbose", is_flag=True, help="Show failures in full (pytest's report).")
def check(
    env_names: tuple[str, ...],
    sample: int | None,
    expert_sample: int | None,
    expert_max_turns: int | None,
    no_http: bool,
    as_json: bool,
    verbose: bool,
) -> None:
    """Run the conformance kit against installed envs: a table of its checks; exit 1 if one failed.

    \b
    agentgym check babyai textcraft
    agentgym check my-env --sample 2 --no-http --json > report.json
    """
    from agentgym.plugins import get_registry

    _kit()
    # only what was given: every other setting is the kit's default (testing/config.py), as in a
    # conftest's ``agentgym_conformance = "NAME"``, so the two front-ends give the same verdict
    options: dict[str, Any] = {
        "sample": sample,
        "expert_sample": expert_sample,
        "expert_max_turns": expert_max_turns,
    }
    options = {k: v for k, v in options.items() if v is not None}
    if no_http:
        options["http"] = False
    configs = {}
    for name in dict.fromkeys(env_names):
        get_registry().env(name)  # an unknown name fails here, listing the installed envs
        configs[name] = dict(options)
    err = Console(stderr=True, highlight=False)
    err.print(f"agentgym check: {', '.join(configs)}", markup=False)
    run = run_checks(configs, _progress_printer(err, verbose))
    if run.exit_code not in (0, 1) and not run.checks:  # pytest itself failed (usage, internal error)
        raise click.ClickException(f"the conformance kit did not run (pytest exit code {run.exit_code})")
    if as_json:
        click.echo(json.dumps(run.to_json(), indent=2))
    else:
        render_table(run, Console(highlight=False, width=None if sys.stdout.isatty() else 200), verbose)
    if not run.ok:
        sys.exit(1)
