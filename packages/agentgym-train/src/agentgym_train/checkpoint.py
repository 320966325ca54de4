"""A run's checkpoints: ``<run>/checkpoints/step_NNNNNN/`` with ``weights.pt`` (model, critic,
optimizer, lr schedule) and ``state.pt`` (the step, every random generator, the task sampler's
position, the horizon schedule's state, the validation history), so that a resumed run continues
exactly as a straight run would have; and the check that a resumed run keeps its settings.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentgym.errors import AgentGymError

#: Config keys a resumed run may change: how long it runs, how often it saves and validates, what
#: it prints. Any other change would continue a run under settings it was not trained with.
#: where the envs are served and verl's own keys may change between launches too (a verl run)
RESUMABLE_CHANGES = frozenset(
    {"steps", "save_every", "val_every", "progress", "resume", "env_urls", "env_token", "verl"}
)


def checkpoints(run_dir: Path) -> list[Path]:
    """The run's complete checkpoints, oldest first."""
    return sorted(p for p in (run_dir / "checkpoints").glob("step_*") if (p / "state.pt").is_file())


def write_config(run_dir: Path, config: dict[str, Any]) -> None:
    """The run's ``config.yaml`` (what :func:`check_same_settings` compares a resume with)."""
    import yaml

    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def check_same_settings(run_dir: Path, config: dict[str, Any]) -> None:
    """Resuming continues the checkpointed run, so its settings must be the ones it was trained
    with; only how long it runs and how it reports may change (``RESUMABLE_CHANGES``)."""
    import yaml

    path = run_dir / "config.yaml"
    old = yaml.safe_load(path.read_text()) if path.is_file() else None
    if not isinstance(old, dict):
        return
    changed = [
        f"{k}: {old.get(k)!r} -> {config[k]!r}"
        for k in config
        if k not in RESUMABLE_CHANGES and k in old and old[k] != config[k]
    ]
    if changed:
        raise AgentGymError(
            f"run {run_dir} has checkpoints trained with other settings ({'; '.join(changed)}): "
            "delete it, give the run another name, or pass resume=false to start it over"
        )


def rng_state() -> dict[str, Any]:
    """Every global random generator a step draws from."""
    return {
        "python_rng": random.getstate(),
        "numpy_rng": np.random.get_state(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python_rng"])
    np.random.set_state(state["numpy_rng"])
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])


def save(run_dir: Path, step: int, weights: dict[str, Any], state: dict[str, Any]) -> Path:
    """Write the checkpoint of ``step``; ``state.pt`` last, as it marks the checkpoint complete."""
    path = run_dir / "checkpoints" / f"step_{step:06d}"
    path.mkdir(parents=True, exist_ok=True)
    torch.save(weights, path / "weights.pt")
    torch.save({"step": step, **rng_state(), **state}, path / "state.pt")
    return path


def load(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(weights, state)`` of a checkpoint; the random generators are restored from it."""
    weights = torch.load(path / "weights.pt", weights_only=False)
    state = torch.load(path / "state.pt", weights_only=False)
    set_rng_state(state)
    return weights, state
