"""What the train package's commands share on the terminal: the console, progress bars, report
tables, the quieting of transformers' own output, and the ``--env`` option's parser."""

from __future__ import annotations

import os
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


def progress(label: str) -> Progress:
    """A progress display headed ``label``: its tasks (``add_task(..., total=, status="")``) show
    a bar, a status line and the time. Shown on a terminal, or anywhere when ``AGENTGYM_PROGRESS``
    is set."""
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console(),
        transient=False,
        disable=not console().is_terminal and not os.environ.get("AGENTGYM_PROGRESS"),
    )


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
