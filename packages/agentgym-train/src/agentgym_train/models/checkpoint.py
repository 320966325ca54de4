"""A run's checkpoints: ``<run>/checkpoints/step_NNNNNN/`` with ``weights.pt`` (model, critic,
optimizer, lr schedule) and ``state.pt`` (the step, every random generator, the task sampler's
position, the horizon schedule's state, the validation history), so that a resumed run continues
exactly as a straight run would have; and the check that a resumed run keeps its settings.

Every file of a run that is rewritten whole (checkpoint files, ``config.yaml``, ``report.json``,
plots) is written through :func:`atomic_write`: to a temporary file beside it, flushed to disk, then
renamed over it, so a run killed at any moment leaves either the old file or the new one, never a
torn one.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentgym.errors import AgentGymError

#: Config keys a resumed run may change: how long it runs, how often it saves, validates and draws
#: its curve, what it prints, its sampler's memory. Any other change would continue a run under settings it was not
#: trained with. Where the envs are served and verl's own keys may change between launches too (a verl run)
RESUMABLE_CHANGES = frozenset(
    {
        "steps",
        "save_every",
        "val_every",
        "curve_every",
        "curve_tasks",
        "rollout_kv_cache_gb",
        "progress",
        "resume",
        "env_urls",
        "env_token_file",
        "verl",
        "logger",
    }
)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a directory be opened
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; on success it is fsync'd and renamed over
    ``path`` (an old file stays whole until then), on an error it is removed."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


def atomic_write(path: str | Path, data: str | bytes | Callable[[Path], Any]) -> None:
    """Replace ``path`` whole: with ``data`` (text or bytes), or with what ``data(tmp)`` writes."""
    with atomic_path(path) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        elif isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            data(tmp)


def append_line(path: str | Path, line: str) -> None:
    """Append one line and flush it to disk (a kill can still tear it: readers skip a torn last
    line, see :func:`agentgym.trajectory.read_jsonl`)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def checkpoints(run_dir: Path) -> list[Path]:
    """The run's complete checkpoints, oldest first."""
    return sorted(p for p in (run_dir / "checkpoints").glob("step_*") if (p / "state.pt").is_file())


def write_config(run_dir: Path, config: dict[str, Any]) -> None:
    """The run's ``config.yaml`` (what :func:`check_same_settings` compares a resume with)."""
    import yaml

    atomic_write(run_dir / "config.yaml", yaml.safe_dump(config, sort_keys=False))


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
            "delete it, give the run another name, or pass resume=false to start it over (the native "
            "trainer then deletes its checkpoints and episodes)"
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
    """Write the checkpoint of ``step``; ``state.pt`` last, as it marks the checkpoint complete.
    Each file is written atomically: a save killed midway leaves no ``state.pt`` (the checkpoint
    does not count) and no torn ``weights.pt`` beside an older ``state.pt``."""
    path = run_dir / "checkpoints" / f"step_{step:06d}"
    path.mkdir(parents=True, exist_ok=True)
    atomic_write(path / "weights.pt", lambda tmp: torch.save(weights, tmp))
    full = {"step": step, **rng_state(), **state}
    atomic_write(path / "state.pt", lambda tmp: torch.save(full, tmp))
    return path


def load(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(weights, state)`` of a checkpoint; the random generators are restored from it."""
    weights = torch.load(path / "weights.pt", weights_only=False)
    state = torch.load(path / "state.pt", weights_only=False)
    set_rng_state(state)
    return weights, state
