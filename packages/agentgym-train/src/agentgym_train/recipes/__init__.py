"""The packaged recipes: ``NAME.yaml`` here, run by ``agentgym train --demo NAME`` through one
runner (``agentgym_train.recipes.runner``). ``tiny`` is the embedded default; the ``smollm2*``
ones train a real model. Import-free, so that the CLI lists them without loading the runner."""

from __future__ import annotations

from pathlib import Path

from agentgym_train.rl.config import ConfigError

HERE = Path(__file__).parent
DEFAULT = "tiny"  #: what ``agentgym train`` with no arguments runs


def demo_names() -> list[str]:
    """The ``--demo`` names of the packaged recipes, the default first."""
    names = sorted(p.stem for p in HERE.glob("*.yaml"))
    return [DEFAULT, *(n for n in names if n != DEFAULT)]


def recipe_path(demo: str) -> Path:
    """The recipe file of a ``--demo`` name; an unknown name lists the packaged ones."""
    if demo not in demo_names():
        raise ConfigError(f"--demo {demo}: no such recipe (packaged: {', '.join(demo_names())})")
    return HERE / f"{demo}.yaml"
