"""``agentgym view``: index run folders and episode files, then serve the viewer on loopback."""

from __future__ import annotations

from pathlib import Path

import click

from agentgym_viewer.server import DEFAULT_HOST, DEFAULT_PORT


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="AGENTGYM_TOKEN",
    default=None,
    help="Require this token (Authorization: Bearer, or ?token= once). Default: $AGENTGYM_TOKEN. "
    "Needed to listen on a non-loopback address.",
)
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
def view(paths: tuple[Path, ...], host: str, port: int, token: str | None, no_open: bool) -> None:
    """Look at what agents did: runs, curves, episodes, compare, replay, play.

    \b
    PATH: run folders (metrics.jsonl, episodes/), folders of runs (at any depth), episode .jsonl files,
    eval reports (eval.json beside eval.episodes.jsonl). Default: ./runs if it exists, else .
    The index is kept in $AGENTGYM_VIEWER_CACHE (default ~/.cache/agentgym/viewer).
    """
    from agentgym_viewer.server import serve

    if not paths:
        paths = (Path("runs"),) if Path("runs").is_dir() else (Path("."),)
    serve(list(paths), host=host, port=port, token=token or None, open_browser=not no_open)
