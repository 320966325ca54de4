"""The trackers the native trainer logs each step's metrics to (``logger``), beside
``metrics.jsonl`` and the plots, which are always written.

The names are verl's ``trainer.logger`` names: ``console`` (the per-step line ``agentgym train``
prints), ``tensorboard`` (event files in ``<run>/tensorboard``, through torch's ``SummaryWriter``)
and ``wandb`` (a Weights & Biases run in ``<run>/wandb``, offline unless ``WANDB_MODE`` says
otherwise). Each tracker gets the numeric scalars of a step's metrics at the trainer's step, and of
each validation under ``val/``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from agentgym.errors import AgentGymError

#: The tracker names ``logger`` takes (verl's names for the same trackers).
TRACKERS = ("console", "tensorboard", "wandb")
#: The module each tracker imports and what to pip install when it is missing.
PACKAGES = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb")}
#: wandb's project when ``WANDB_PROJECT`` is not set (verl's ``trainer.project_name`` for our runs).
PROJECT = "agentgym"


class TrackerError(AgentGymError, ValueError):
    """A tracker that cannot run here (its package is missing); the message says what to install."""


class Tracker(Protocol):
    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self, failed: bool = False) -> None: ...


def check_available(names: Iterable[str]) -> None:
    """A one-line TrackerError naming the pip package of the first tracker that cannot be imported."""
    import importlib

    for name in dict.fromkeys(names):
        if name not in PACKAGES:
            continue
        module, package = PACKAGES[name]
        try:
            importlib.import_module(module)
        except ImportError as exc:
            first = str(exc).splitlines()[0] if str(exc) else repr(exc)
            raise TrackerError(f"logger {name} needs {package}: {first} (pip install {package})") from None


def scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of ``metrics`` (booleans, strings, lists and ``step`` left out)."""
    out = {}
    for key, value in metrics.items():
        if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            out[key] = float(value)
    return out


def validation_scalars(entry: Mapping[str, Any]) -> dict[str, float]:
    """A validation's scores as ``val/success`` and ``val/<env>/<metric>``."""
    out = {"val/success": entry["success"]}
    for env, report in entry["envs"].items():
        out.update({f"val/{env}/{k}": v for k, v in scalars(report).items()})
    return scalars(out)


class TensorBoardTracker:
    """Scalars in a TensorBoard event directory, flushed every step (``tensorboard --logdir``)."""

    def __init__(self, log_dir: Path, purge_step: int):
        from torch.utils.tensorboard import SummaryWriter

        # a resumed run hides what an earlier process logged from the step it starts again at
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self, failed: bool = False) -> None:
        self.writer.close()


class WandbTracker:
    """A wandb run in ``<run>/wandb``: offline unless ``WANDB_MODE`` is set (``wandb sync`` uploads
    it later), named after the run, the run's config as its config."""

    def __init__(self, run_dir: Path, name: str, config: dict[str, Any]):
        import wandb

        mode = {} if os.environ.get("WANDB_MODE") else {"mode": "offline"}
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or PROJECT,
            name=name,
            dir=str(run_dir),
            config=config,
            settings=wandb.Settings(console="off"),  # the CLI's progress bar keeps the terminal
            **mode,
        )

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def close(self, failed: bool = False) -> None:
        self.run.finish(exit_code=1 if failed else 0)


class Trackers:
    """The run's trackers as one: each call reaches every tracker; ``close`` is idempotent."""

    def __init__(self, trackers: Iterable[Tracker] = ()):
        self.trackers = list(trackers)

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        values = scalars(metrics)
        if values:
            for tracker in self.trackers:
                tracker.log(values, step)

    def close(self, failed: bool = False) -> None:
        trackers, self.trackers = self.trackers, []
        errors = []
        for tracker in trackers:
            try:
                tracker.close(failed=failed)
            except Exception as exc:  # the others still close
                errors.append(exc)
        if errors:
            raise errors[0]


def open_trackers(
    names: Iterable[str], run_dir: Path, *, name: str, config: dict[str, Any], step: int = 0
) -> Trackers:
    """The trackers ``names`` asks for, for a run at ``run_dir`` starting after ``step`` (console:
    none here, the CLI prints each step)."""
    names = list(dict.fromkeys(names))
    check_available(names)
    opened = Trackers()
    try:
        if "tensorboard" in names:
            opened.trackers.append(
                TensorBoardTracker(run_dir / "tensorboard", purge_step=step + 1 if step else 0)
            )
        if "wandb" in names:
            opened.trackers.append(WandbTracker(run_dir, name, config))
    except BaseException:
        opened.close(failed=True)
        raise
    return opened
