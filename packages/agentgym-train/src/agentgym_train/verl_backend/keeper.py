"""The run's keeper: one Ray actor per verl run holding what spans agent loops and steps.

verl runs each sample's agent loop on whichever agent-loop worker is free, so what is one
object in the native trainer lives here: the horizon schedule (asked at every step; an
``adaptive`` one is told each finished step's truncation rate), the step's episodes (written as
our Episode JSON Lines under ``<run>/episodes/``, and summarised into the step's metrics that our
sampler hands to verl's tracking), and the schedule's state, saved beside verl's checkpoint and
read back when verl resumes from it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentgym.plugins import get_env_spec
from agentgym.trajectory import Episode, write_episodes
from agentgym_train.rl.horizon import make_schedule
from agentgym_train.rollout.engine import rollout_metrics

STATE_FILE = "agentgym_horizon.json"


def keeper_name(settings: dict[str, Any]) -> str:
    return f"agentgym_keeper_{settings['name']}"


def latest_checkpoint(checkpoint_dir: str | Path) -> Path | None:
    """verl's last checkpoint directory (``global_step_N``, named by its tracker file), if any."""
    tracker = Path(checkpoint_dir) / "latest_checkpointed_iteration.txt"
    if not tracker.is_file():
        return None
    step = tracker.read_text().strip()
    path = Path(checkpoint_dir) / f"global_step_{step}"
    return path if path.is_dir() else None


class RunKeeper:
    """Horizon schedule, episodes and per-step metrics of one run (see the module docstring)."""

    def __init__(self, settings: dict[str, Any]):
        self.settings = settings
        self.run_dir = Path(settings["run_dir"])
        (self.run_dir / "episodes").mkdir(parents=True, exist_ok=True)
        self.schedule = make_schedule(settings["horizon"], **settings["horizon_params"])
        self.applied_through = 0  # the schedule has been told the metrics of steps up to this one
        self.train: dict[int, list[Episode]] = {}
        self.resumed_from = self._restore()

    def _restore(self) -> int:
        """The step verl resumes from (0 for a new run), with the schedule's state saved there."""
        ckpt = (
            latest_checkpoint(self.settings["checkpoint_dir"]) if self.settings.get("resume", True) else None
        )
        if ckpt is None:
            return 0
        state_file = ckpt / STATE_FILE
        if not state_file.is_file():
            import warnings

            warnings.warn(
                f"{ckpt} has no {STATE_FILE}: the horizon schedule starts from its first stage", stacklevel=2
            )
        else:
            state = json.loads(state_file.read_text())
            self.schedule.load_state_dict(state["schedule"])
            self.applied_through = int(state["applied_through"])
        return int(ckpt.name.removeprefix("global_step_"))

    def horizon(self, step: int, phase: str = "train", env: str | None = None) -> int:
        """The turn cap for an episode of ``step``; validation's is ``val_max_turns``, else the
        env's own (as the native trainer validates)."""
        if phase != "train":
            if self.settings.get("val_max_turns"):
                return int(self.settings["val_max_turns"])
            if env is not None:
                return int(get_env_spec(env).default_max_turns)
        self._advance(step)
        return int(self.schedule(max(step, 1)))

    def _advance(self, step: int) -> None:
        """Tell the schedule the metrics of every finished step before ``step`` not told yet."""
        for s in range(self.applied_through + 1, step):
            if s in self.train:
                self.schedule.update(s, rollout_metrics(self.train[s]))
        self.applied_through = max(self.applied_through, step - 1)

    def record(self, step: int, phase: str, episode: Episode) -> None:
        """Keep one finished episode (and append it to its step's file)."""
        name = f"step_{step:06d}.jsonl" if phase == "train" else f"val_step_{step:06d}.jsonl"
        write_episodes(self.run_dir / "episodes" / name, [episode], append=True)
        if phase == "train":
            self.train.setdefault(step, []).append(episode)

    def metrics(self, step: int) -> dict[str, float]:
        """The step's rollout metrics, overall and per env (``agentgym/...``), for verl's tracking."""
        episodes = self.train.get(step, [])
        if not episodes:
            return {}
        out = {f"agentgym/{k}": float(v) for k, v in rollout_metrics(episodes).items()}
        out["agentgym/horizon"] = float(self.horizon(step))
        envs = sorted({ep.env for ep in episodes})
        if len(envs) > 1:
            for env in envs:
                own = rollout_metrics([ep for ep in episodes if ep.env == env])
                for key in ("success", "return", "turns", "truncation_rate"):
                    out[f"agentgym/{env}/{key}"] = float(own[key])
        # drop what no later step needs: the schedule only looks back one step
        for s in [s for s in self.train if s < step - 1]:
            del self.train[s]
        return out

    def save(self, checkpoint_dir: str, step: int) -> None:
        """Write the schedule's state as of the end of ``step`` into verl's checkpoint directory."""
        self._advance(step + 1)
        state = {"schedule": self.schedule.state_dict(), "applied_through": self.applied_through}
        Path(checkpoint_dir, STATE_FILE).write_text(json.dumps(state))

    def ready(self) -> int:
        return self.resumed_from


def get_keeper(settings: dict[str, Any], create: bool = False) -> Any:
    """The run's keeper actor (made by the first caller with ``create``; the others wait for it)."""
    import time

    import ray

    name = keeper_name(settings)
    if create:
        handle = ray.remote(RunKeeper).options(name=name, get_if_exists=True, num_cpus=0).remote(settings)
        ray.get(handle.ready.remote())
        return handle
    for _ in range(600):
        try:
            return ray.get_actor(name)
        except ValueError:
            time.sleep(0.1)
    raise RuntimeError(
        f"the run's keeper actor {name!r} never appeared (is the agentgym sampler configured?)"
    )
