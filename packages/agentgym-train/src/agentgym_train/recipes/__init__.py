"""The packaged real-model recipes: ``ENVS-smollm2.yaml`` (envs joined by ``-``), run by
``agentgym train --demo smollm2-ENVS`` (``smollm2`` alone: BabyAI's). Import-free, so that the
CLI lists them without loading the recipe runner (``agentgym_train.real_demo``)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent


def demo_names() -> list[str]:
    """The ``--demo`` names of the packaged recipes."""
    envs = sorted(p.name.removesuffix("-smollm2.yaml") for p in HERE.glob("*-smollm2.yaml"))
    return ["smollm2", *(f"smollm2-{e}" for e in envs if e != "babyai")]


def recipe_path(demo: str) -> Path:
    """The recipe file of a ``--demo`` name; an unknown name lists the packaged ones."""
    if demo not in demo_names():
        from agentgym_train.config import ConfigError

        raise ConfigError(f"--demo {demo}: no such recipe (packaged: {', '.join(demo_names())})")
    return HERE / f"{demo.removeprefix('smollm2').removeprefix('-') or 'babyai'}-smollm2.yaml"
