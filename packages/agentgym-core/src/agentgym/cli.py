"""The ``agentgym`` command line. Other packages add subcommands through the ``agentgym_cli`` hook.

Bad input ends with one line ``agentgym: error: <reason>`` and a non-zero exit code, never a
traceback (set ``AGENTGYM_DEBUG=1`` to see one).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentgym.check import check
from agentgym.errors import AgentGymError
from agentgym.hooks import call_each
from agentgym.scaffold import new_env_command

# Piped output (tests, logs) gets wide tables instead of rich's 80-column default.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, highlight=False)


def _registry():
    from agentgym.plugins import get_registry

    return get_registry()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="agentgym-core", prog_name="agentgym")
def cli() -> None:
    """AgentGym: text environments and multi-turn RL for LLM agents.

    \b
    agentgym envs                  installed envs, their splits and requirements
    agentgym plugins               installed plugins and what each registers
    agentgym new-env NAME          write a new env plugin package ./agentgym-env-NAME/
    agentgym check babyai          run the conformance kit against installed envs
    agentgym serve guess           serve envs over HTTP (API v1 + AgentGym routes)
    agentgym play guess --task 7   play an env yourself in the terminal
    """


cli.add_command(new_env_command)  # agentgym new-env NAME
cli.add_command(check)  # agentgym check ENV...


# -- envs / plugins ----------------------------------------------------------------------------
@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def envs(as_json: bool) -> None:
    """List installed environments: splits, sizes, categories, turn cap, parser, requirements.

    Envs whose plugin has a problem (see 'agentgym plugins') are listed after the table with the
    reason; commands that need them fail with it.
    """
    registry = _registry()
    specs = registry.envs()
    if as_json:
        click.echo(json.dumps([s.to_json() for s in specs.values()], indent=2))
        return
    table = Table(title=f"{len(specs)} installed env(s)")
    for col in (
        "env",
        "gym id",
        "distribution",
        "splits (size: categories)",
        "max turns",
        "parser",
        "requires",
        "expert",
    ):
        table.add_column(col)
    for spec in specs.values():
        splits = "\n".join(
            f"{name}: {len(split)}"
            + (
                f" ({', '.join(f'{c} {n}' for c, n in split.category_counts().items())})"
                if split.categories
                else ""
            )
            for name, split in spec.splits.items()
        )
        table.add_row(
            spec.name,
            spec.gym_id,
            spec.distribution or "",
            splits or "-",
            str(spec.default_max_turns),
            spec.action_parser,
            ", ".join(spec.requires) or "-",
            "yes" if spec.expert else "no",
        )
    console.print(table)
    problems = registry.all_problems()
    if problems:
        console.print(f"[bold red]{len(problems)} plugin problem(s)[/]: what they concern is skipped")
        for problem in problems:
            console.print(f"  {problem}", soft_wrap=True, markup=False)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins(as_json: bool) -> None:
    """List plugins, the distribution providing each, what each registers, and their problems.

    A plugin that fails to import, clashes with another, or declares an invalid env spec is shown
    with the reason and skipped; everything else keeps working. AGENTGYM_STRICT_PLUGINS=1 makes any
    such problem an error.
    """
    infos = _registry().plugins()
    if as_json:
        click.echo(json.dumps([vars(p) for p in infos], indent=2))
        return
    broken = sum(bool(p.problems) for p in infos)
    title = f"{len(infos)} plugin(s)" + (f", {broken} with problems" if broken else "")
    table = Table(title=title)
    for col in ("plugin", "distribution", "version", "module", "hooks", "registers", "problems"):
        table.add_column(col)
    for p in infos:
        registers = "\n".join(f"{k}: {', '.join(v)}" for k, v in p.registers.items() if v)
        table.add_row(
            p.name,
            p.distribution,
            p.version,
            p.module,
            "\n".join(p.hooks),
            registers or "-",
            "[red]" + escape("\n".join(p.problems)) + "[/]" if p.problems else "-",
        )
    console.print(table)


# -- serve -------------------------------------------------------------------------------------
@cli.command()
@click.argument("env_names", nargs=-1, metavar="[ENV]...")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind (non-loopback needs --token)."
)
@click.option("--port", default=36001, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Processes to shard sessions over (1 = env code on threads in the server process).",
)
@click.option(
    "--capacity", default=1024, show_default=True, type=click.IntRange(1), help="Most live sessions."
)
@click.option(
    "--ttl",
    default=1800.0,
    show_default=True,
    type=click.FloatRange(0.01),
    help="Seconds an idle session lives, and an env instance kept idle for reuse.",
)
@click.option(
    "--compat-ttl",
    default=None,
    type=click.FloatRange(0.01),
    help="Seconds an idle session made by AgentGym's /create lives (default: no TTL, as on the "
    "original servers, whose clients cannot recover a lost session; one idle for a minute is closed "
    "only when a creation finds no room).",
)
@click.option(
    "--max-instances",
    default=None,
    type=click.IntRange(1),
    help="Env instances of one env held at once (in sessions, or idle for reuse); a creation beyond "
    "gets 503 with Retry-After (default: from the env's declared cost and this machine's cores and "
    "memory; GET /health shows it).",
)
@click.option(
    "--step-timeout",
    default=None,
    type=click.FloatRange(0),
    help="Seconds one env step may run; past it the step is answered 504 step_timeout and its "
    "session closed (0: no limit; default: $AGENTGYM_STEP_TIMEOUT, else 60).",
)
@click.option(
    "--token", default=None, help="Require 'Authorization: Bearer TOKEN' (default: $AGENTGYM_TOKEN)."
)
@click.option("--insecure", is_flag=True, help="Allow a non-loopback address without a token.")
@click.option("--openenv", is_flag=True, help="OpenEnv's protocol too, at /openenv/ENV (needs openenv-core).")
@click.option(
    "--log-level",
    default="warning",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
def serve(
    env_names: tuple[str, ...],
    host: str,
    port: int,
    workers: int,
    capacity: int,
    ttl: float,
    compat_ttl: float | None,
    max_instances: int | None,
    step_timeout: float | None,
    token: str | None,
    insecure: bool,
    log_level: str,
    openenv: bool,
) -> None:
    """Serve installed envs over HTTP (all installed envs when none is named).

    API v1 (batched /v1/step, OpenAPI at /docs) and AgentGym's /create, /reset, /step,
    /observation, /close routes; with --openenv, OpenEnv's routes at /openenv/ENV.
    """
    from agentgym.server.run import check_bind
    from agentgym.server.run import serve as run_server

    token = token or os.environ.get("AGENTGYM_TOKEN") or None
    check_bind(host, token, insecure)
    if openenv:
        from agentgym.adapters.openenv import check_installed

        check_installed()
    registry = _registry()
    names = list(env_names) or list(registry.envs())
    if not names:
        raise click.UsageError("no env installed to serve (see 'agentgym envs')")
    bounds = _instance_bounds(registry, names, max_instances)
    err_console.print(
        f"serving {', '.join(names)} on http://{host}:{port} ({workers} worker(s)); Ctrl-C stops"
    )
    from agentgym.server.config import ServerConfig

    # --step-timeout 0: no limit; not given: ServerConfig's default ($AGENTGYM_STEP_TIMEOUT, else 60)
    timeout = {} if step_timeout is None else {"step_timeout": step_timeout or None}
    config = ServerConfig(
        workers=workers,
        capacity=capacity,
        ttl=ttl,
        compat_ttl=compat_ttl,
        max_instances=max_instances,
        bounds=bounds,
        **timeout,
    )
    settings = {"log_level": log_level, "openenv": openenv}
    try:
        run_server(names, config, host=host, port=port, token=token, insecure=insecure, **settings)
    finally:
        err_console.print("agentgym: server stopped")


def _instance_bounds(registry: Any, names: list[str], max_instances: int | None) -> dict[str, Any]:
    """Each env's instance bound, printed: computed once, so that the number printed is the one
    the server holds and ``/health`` shows. An unknown name fails here, listing the installed envs."""
    from agentgym.resources import instance_bound

    bounds = {}
    for name in names:
        bounds[name] = instance_bound(registry.env(name).cost, override=max_instances)
        err_console.print(f"{name}: {bounds[name].explain()}")
    return bounds


# -- play --------------------------------------------------------------------------------------
@cli.command()
@click.argument("env_name", metavar="ENV")
@click.option(
    "--task",
    "task_id",
    type=click.IntRange(0),
    default=None,
    help="Task id (default: the first id of --split).",
)
@click.option("--split", default="test", show_default=True, help="Split to take the default task from.")
@click.option(
    "--url", default=None, help="Play on a server started with 'agentgym serve' instead of in-process."
)
@click.option("--token", default=None, help="Bearer token for --url (default: $AGENTGYM_TOKEN).")
@click.option("--max-turns", type=click.IntRange(1), default=None, help="Turn cap (default: the env's).")
@click.option("--expert", "auto", is_flag=True, help="Let the env's expert play and watch it.")
def play(
    env_name: str,
    task_id: int | None,
    split: str,
    url: str | None,
    token: str | None,
    max_turns: int | None,
    auto: bool,
) -> None:
    """Play an env yourself: type actions; ':help' lists the play commands."""
    from agentgym.play import play_episode

    spec = _registry().env(env_name)
    if task_id is None:
        if split not in spec.splits:
            raise click.BadParameter(
                f"{env_name} has no split {split!r} (has: {', '.join(spec.splits) or 'none'})",
                param_hint="--split",
            )
        task_id = spec.splits[split].task_ids[0]
    episode = play_episode(
        spec,
        task_id,
        url=url,
        token=token or os.environ.get("AGENTGYM_TOKEN"),
        max_turns=max_turns or spec.default_max_turns,
        auto=auto,
        console=console,
    )
    sys.exit(0 if episode is not None else 1)


# -- demo --------------------------------------------------------------------------------------
@cli.command()
@click.option("--env", "env_name", help="Env to serve and play [default: an installed env with an expert].")
@click.option("--episodes", default=3, show_default=True, type=click.IntRange(1))
def demo(env_name: str | None, episodes: int) -> None:
    """Serve an env on a free loopback port and let its expert play it through the HTTP client."""
    from agentgym.play import run_demo

    run_demo(env_name, episodes=episodes, console=console)


def _add_plugin_commands() -> None:
    try:
        registry = _registry()
        # one by one: a plugin that fails leaves its commands out, not every plugin's
        for plugin_name, _, exc in call_each(registry.pm.hook.agentgym_cli, cli=cli):
            if exc is not None:
                err_console.print(
                    f"agentgym: warning: plugin {plugin_name!r} failed to add its commands: "
                    f"{type(exc).__name__}: {exc}",
                    soft_wrap=True,
                )
        for problem in registry.all_problems():
            err_console.print(f"agentgym: warning: {problem} (skipped)", soft_wrap=True, markup=False)
    except AgentGymError as exc:
        err_console.print(f"agentgym: warning: plugin commands not loaded: {exc.message}", soft_wrap=True)


def _error_line(message: str) -> None:
    """``agentgym: error: <message>`` on one line of stderr (the message is not rich markup)."""
    one_line = " ".join(str(message).split())
    err_console.print(f"agentgym: error: {one_line}", soft_wrap=True, markup=False)


def main(argv: list[str] | None = None) -> Any:
    debug = bool(os.environ.get("AGENTGYM_DEBUG"))
    try:
        _add_plugin_commands()
        return cli.main(args=argv, prog_name="agentgym", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err_console.print("agentgym: aborted")
        sys.exit(130)
    except click.ClickException as exc:
        _error_line(exc.format_message())
        sys.exit(exc.exit_code)
    except AgentGymError as exc:  # UnknownNameError (an unknown env, policy, algorithm...) too
        if debug:
            raise
        _error_line(exc.message)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if debug:
            raise
        _error_line(f"{type(exc).__name__}: {exc} (AGENTGYM_DEBUG=1 shows the traceback)")
        sys.exit(1)
