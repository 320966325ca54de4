"""Which model a run trains: the configured one, or the tiny model built once inside the run from
its envs' expert text (the native trainer's and the verl backend's alike)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentgym_train.models.loading import model_dir
from agentgym_train.models.tiny import build_tiny
from agentgym_train.rollout.experts import expert_texts


def model_for_run(cfg: Any, run_dir: Path, log: Any = print) -> Path:
    """A run's model: the configured one, or the tiny model built (once) inside the run."""
    if cfg.model:
        return model_dir(cfg.model)
    path = Path(run_dir) / "tiny"
    if not (path / "config.json").is_file():
        log(f"building the tiny model in {path}")
        texts = expert_texts(cfg.envs, cfg.tiny_tasks)
        source = {"envs": list(cfg.envs), "tasks_per_env": cfg.tiny_tasks}
        build_tiny(path, texts, size=cfg.tiny_size, seed=cfg.seed, source=source)
    return path
