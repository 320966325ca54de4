"""The plugin module: adds ``agentgym view``. Import-light: the app loads when the command runs."""

from __future__ import annotations

from agentgym import hookimpl


@hookimpl
def agentgym_cli(cli):
    from agentgym_viewer.cli import view

    cli.add_command(view)
