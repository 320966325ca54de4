"""The plugin module: adds ``agentgym view``. Import-light: the app loads when the command runs."""

from __future__ import annotations

from agentgym import hookimpl

# the plugin API this plugin is written for (agentgym.api_version checks it when it loads)
AGENTGYM_API_VERSION = "1"


@hookimpl
def agentgym_cli(cli):
    from agentgym_viewer.cli import view

    cli.add_command(view)
