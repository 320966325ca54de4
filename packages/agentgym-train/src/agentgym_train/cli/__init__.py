"""The train package's commands, added to ``agentgym`` by the plugin's ``agentgym_cli`` hook.

``evaluate`` holds ``eval`` and ``collect``; ``train`` holds ``train``; ``finetune``
``sft``, ``dpo`` and ``evolve``; ``model`` the ``model`` group (GGUF import) and ``tiny``; ``serve_model``
``serve-model`` (a local model behind an OpenAI-compatible server); ``ui`` what they share on the
terminal. Imports run one way: the commands import the library (``recipes``,
``rl``, ``rollout``...), which never imports them.
"""

from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    """Add the train package's commands to the ``agentgym`` group ``cli``."""
    from agentgym_train.cli.evaluate import COMMANDS as EVALUATE
    from agentgym_train.cli.finetune import COMMANDS as FINETUNE
    from agentgym_train.cli.model import COMMANDS as MODEL
    from agentgym_train.cli.serve_model import COMMANDS as SERVE_MODEL
    from agentgym_train.cli.train import COMMANDS as TRAIN

    for command in (*EVALUATE, *TRAIN, *FINETUNE, *MODEL, *SERVE_MODEL):
        cli.add_command(command)
