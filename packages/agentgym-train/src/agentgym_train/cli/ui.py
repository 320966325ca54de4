"""What the train package's commands share on the terminal: the console, progress bars, report
tables, the quieting of transformers' own output, and the ``--env`` option's parser."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def console() -> Any:
    """The ``agentgym`` command line's console (``rich``)."""
    from agentgym.cli import console as agentgym_console

    return agentgym_console


def parse_env_names(value: tuple[str, ...]) -> list[str]:
    """``--env`` values (``babyai,textcraft`` or repeated) as env names, each checked installed."""
    names = [n.strip() for v in value for n in v.split(",") if n.strip()]
    if not names:
        raise click.BadParameter("give at least one env name", param_hint="--env")
    from agentgym.errors import AgentGymError
    from agentgym.plugins import get_registry

    registry = get_registry()
    for n in names:
        try:
            registry.env(n)  # unknown, or unavailable through a plugin problem: says which
        except AgentGymError as exc:
            raise click.BadParameter(exc.message, param_hint="--env") from None
    return names


def progress(label: str) -> Progress | LineProgress:
    """A progress display headed ``label``: its tasks (``add_task(..., total=, status="")``) show
    a bar, a status line and the time on a terminal (or anywhere when ``AGENTGYM_PROGRESS`` is
    set); elsewhere (logs, CI) a line on stderr per update (:class:`LineProgress`)."""
    if not console().is_terminal and not os.environ.get("AGENTGYM_PROGRESS"):
        return LineProgress(label)
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console(),
        transient=False,
    )


class LineProgress:
    """``rich.progress.Progress``'s calls a command makes, as plain lines on stderr: one per update
    (``label 3/10 status 12s``), at most one every ``every`` seconds except the last of a task, so
    a log shows that work goes on without a line per episode of a large evaluation."""

    def __init__(self, label: str, every: float = 2.0):
        self.label, self.every = label, every
        self.tasks: list[SimpleNamespace] = []  # like rich's: .completed, .total, .fields
        self.t0 = time.monotonic()
        self.last = float("-inf")

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.t0 = time.monotonic()

    def stop(self) -> None:
        pass

    def add_task(self, _description: str, total: float | None = None, **fields: Any) -> int:
        self.tasks.append(SimpleNamespace(completed=0, total=total, fields=fields))
        return len(self.tasks) - 1

    def update(
        self,
        task: int,
        *,
        advance: float | None = None,
        completed: float | None = None,
        total: float | None = None,
        **fields: Any,
    ) -> None:
        t = self.tasks[task]
        t.fields.update(fields)
        t.total = total if total is not None else t.total
        t.completed = completed if completed is not None else t.completed + (advance or 0)
        now = time.monotonic()
        done = t.total is not None and t.completed >= t.total
        if now - self.last < self.every and not done:
            return
        self.last = now
        count = f"{t.completed:g}" + (f"/{t.total:g}" if t.total is not None else "")
        status = t.fields.get("status") or ""
        click.echo(" ".join(x for x in (self.label, count, status, f"{now - self.t0:.0f}s") if x), err=True)


def quiet_transformers() -> None:
    """Silence transformers' warnings and progress bars (ours are enough)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def validation_table(report: dict[str, Any], title: str) -> Any:
    """A training run's validations (``report["validation"]``): one row per validation and env."""
    from rich.table import Table

    table = Table(title=title)
    for col in ("when", "step", "env", "success %", "Avg@n", "Pass@n %", "mean turns"):
        table.add_column(col, justify="left" if col in ("when", "env") else "right")
    for v in report["validation"]:
        for env, r in v["envs"].items():
            table.add_row(
                v["label"],
                str(v["step"]),
                env,
                _pct(r["success"]),
                f"{r['avg']:.3f}",
                _pct(r["pass"]),
                f"{r['mean_turns']:.1f}",
            )
    return table


def report_tables(report: dict[str, Any]) -> list[Any]:
    """An evaluation report's tables: one row per env, then one per env and category."""
    from rich.table import Table

    main = Table(title=f"policy {report['policy']} · {report['strategy']}")
    for col in (
        "env",
        "split",
        "tasks",
        "n",
        "success %",
        "Avg@n",
        "Pass@n %",
        "mean turns",
        "errors",
        "terminations",
    ):
        main.add_column(col, justify="left" if col in ("env", "split", "terminations") else "right")
    cats = Table(title="per category")
    for col in ("env", "category", "tasks", "success %", "Avg@n", "Pass@n %"):
        cats.add_column(col, justify="left" if col in ("env", "category") else "right")
    for env, r in report["envs"].items():
        terms = ", ".join(f"{k} {v}" for k, v in r["terminations"].items())
        main.add_row(
            env,
            r["split"],
            str(r["tasks"]),
            str(r["n"]),
            _pct(r["success"]),
            f"{r['avg']:.3f}",
            _pct(r["pass"]),
            f"{r['mean_turns']:.1f}",
            str(r["errors"]),
            terms,
        )
        for c, cr in r["categories"].items():
            cats.add_row(env, c, str(cr["tasks"]), _pct(cr["success"]), f"{cr['avg']:.3f}", _pct(cr["pass"]))
    return [main, cats]
