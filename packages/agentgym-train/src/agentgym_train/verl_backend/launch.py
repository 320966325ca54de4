"""``agentgym train --backend verl``: write a verl run and start verl's PPO trainer on it.

A run directory (``<runs_dir>/<name>/``, as for the native trainer) gets ``config.yaml`` (our
config), ``data/{train,val}.parquet`` (train: one row per task the native sampler draws, step
after step; val: one per task; each with env, task id, split, category, phase, its place in the
native task list, the agent loop's name and the env's prompt), ``verl/agent_loops.yaml`` (our agent loop for
verl's registry) and ``verl/agentgym_verl.yaml`` (verl's config: ``ppo_trainer`` plus what
:mod:`.translate` derives). The command is verl's own entry point on that file; ``--dry-run``
writes everything, checks it with verl's config loading and validation, and prints it.
"""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentgym.errors import AgentGymError
from agentgym.plugins import get_env_spec
from agentgym_train.models.checkpoint import check_same_settings, write_config
from agentgym_train.models.device import default_device
from agentgym_train.models.gguf import resolve_model
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rl.model_choice import model_for_run
from agentgym_train.rl.validation import val_ids
from agentgym_train.rollout.task_sampling import make_task_sampler
from agentgym_train.verl_backend.cpu import check_verl_version
from agentgym_train.verl_backend.keeper import latest_checkpoint
from agentgym_train.verl_backend.translate import deep_merge, verl_config
from agentgym_train.verl_backend.usage import TreeMemory, step_figures

EXTERNAL = "agentgym_train.verl_backend.external"
CONFIG_NAME = "agentgym_verl"
#: verl's file logger writes each step's metrics here (it truncates: an earlier file is kept, numbered)
METRICS = "verl_metrics.jsonl"


@dataclass
class Launch:
    run_dir: Path
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    #: variables for the trainer's process only: never printed, nor in verl's config (whose
    #: ``runtime_env`` holds ``env``); a local Ray cluster's workers inherit them
    secrets: dict[str, str] = field(default_factory=dict, repr=False)

    def shell(self) -> str:
        """The command as one shell line, its environment variables in front."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"{env} {shlex.join(self.command)}".strip()


def with_ray_address(verl: dict[str, Any], address: str) -> dict[str, Any]:
    """``verl`` overrides that start the trainer on the Ray cluster at ``address``."""
    return deep_merge(verl, {"ray_kwargs": {"ray_init": {"address": address}}})


def task_rows(cfg: TrainConfig, phase: str) -> list[dict[str, Any]]:
    """train: the tasks the native trainer's sampler draws, step after step (verl reads them in
    order, ``data.shuffle`` off, so both trainers play the same tasks); val: each task of the
    split once."""
    rows = []
    split = cfg.train_split if phase == "train" else cfg.val_split
    # each row with its place in the native task list: in its step's draws; validation: in its env's
    if phase == "train":
        sampler = make_task_sampler(cfg.task_sampler, cfg.train_pool(), cfg.seed, **cfg.task_sampler_params)
        tasks = [
            (*task, i) for _ in range(cfg.steps) for i, task in enumerate(sampler.draw(cfg.tasks_per_step))
        ]
    else:
        tasks = [(env, t, i) for env, ids in val_ids(cfg).items() for i, t in enumerate(ids)]
    for env, task_id, position in tasks:
        spec = get_env_spec(env)
        rows.append(
            {
                "data_source": env,
                "agent_name": "agentgym",
                "prompt": [{"role": "system", "content": spec.prompt or ""}],
                "env": env,
                "task_id": int(task_id),
                "split": split,
                "category": spec.category_of(task_id) or "",
                "phase": phase,
                "position": position,
                "reward_model": {"style": "env", "ground_truth": ""},
                "extra_info": {"index": len(rows)},
            }
        )
    if not rows:
        raise AgentGymError(f"no {phase} tasks: the {split!r} split of {', '.join(cfg.envs)} selects none")
    return rows


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise AgentGymError("the verl backend writes Parquet data files: pip install pyarrow") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _ensure_model(cfg: TrainConfig, run_dir: Path, dry_run: bool, log: Any) -> None:
    """Build the tiny model (no ``model``) or check the configured directory; a dry run only notes
    a directory this machine lacks (the trainer's nodes may hold it)."""

    try:
        model_for_run(cfg, run_dir, log)
    except AgentGymError as exc:
        if not (dry_run and cfg.model):
            raise
        log(f"note: {exc.message}; the trainer's nodes need it")


def prepare(
    cfg: TrainConfig, *, device: str | None = None, dry_run: bool = False, log: Any = print
) -> Launch:
    """Write the run's files; returns the command that trains it. The config is translated (and
    refused, with the reason) before anything is written."""

    run_dir = (Path(cfg.runs_dir) / cfg.name).resolve()
    token = cfg.env_token()
    dev = device or default_device()
    env = {"VERL_USE_EXTERNAL_MODULES": EXTERNAL, "VERL_FILE_LOGGER_PATH": str(run_dir / METRICS)}
    if dev == "cpu":
        env["VERL_PLATFORM"] = "cpu"
    if "tensorboard" in cfg.logger:  # where the native trainer writes them too
        env["TENSORBOARD_DIR"] = str(run_dir / "tensorboard")
    if "wandb" in cfg.logger:
        env.update({"WANDB_DIR": str(run_dir), "WANDB_MODE": os.environ.get("WANDB_MODE") or "offline"})
    # a .gguf file or 'smollm2': verl's workers load the imported HF directory
    model = str(resolve_model(cfg.model).resolve()) if cfg.model else str(run_dir / "tiny")
    overrides = verl_config(cfg, run_dir, model, device=dev)
    # the same variables for Ray's workers on other nodes (a local cluster inherits them)
    overrides = deep_merge(overrides, {"ray_kwargs": {"ray_init": {"runtime_env": {"env_vars": env}}}})
    if cfg.resume and latest_checkpoint(overrides["trainer"]["default_local_dir"]) is not None:
        check_same_settings(run_dir, cfg.to_dict())  # verl resumes from it: the same run, or an error
    run_dir.mkdir(parents=True, exist_ok=True)
    write_config(run_dir, cfg.to_dict())
    _ensure_model(cfg, run_dir, dry_run, log)
    for phase in ("train", "val"):
        write_parquet(task_rows(cfg, phase), run_dir / "data" / f"{phase}.parquet")
    verl_dir = run_dir / "verl"
    verl_dir.mkdir(exist_ok=True)
    loops = [{"name": "agentgym", "_target_": "agentgym_train.verl_backend.agent_loop.AgentGymAgentLoop"}]
    (verl_dir / "agent_loops.yaml").write_text(yaml.safe_dump(loops, sort_keys=False))
    doc = {"defaults": ["ppo_trainer", "_self_"], **overrides}
    (verl_dir / f"{CONFIG_NAME}.yaml").write_text(
        "# verl's config for this agentgym run: verl's ppo_trainer, then these keys\n"
        + yaml.safe_dump(doc, sort_keys=False)
    )
    command = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        "--config-path",
        str(verl_dir),
        "--config-name",
        CONFIG_NAME,
        "hydra.searchpath=[pkg://verl.trainer.config]",
        f"hydra.run.dir={verl_dir / 'hydra'}",
    ]
    return Launch(run_dir, command, env, secrets={"AGENTGYM_TOKEN": token} if token else {})


def load_config(launch: Launch) -> Any:
    """verl's config for the launch, composed and validated by verl's own code (what its entry
    point does before starting Ray)."""

    check_verl_version()

    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    # what verl's processes import: plugin algorithms, the rollout (the CPU platform is not needed
    # to compose and validate, so VERL_PLATFORM stays out of this process)
    importlib.import_module(EXTERNAL)
    verl_dir = launch.run_dir / "verl"
    with initialize_config_dir(config_dir=str(verl_dir), version_base=None):
        config = compose(CONFIG_NAME, overrides=["hydra.searchpath=[pkg://verl.trainer.config]"])
    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    return config


def run(launch: Launch) -> dict[str, Any]:
    """Run verl's trainer on the launch (its output streams through). Returns its exit ``code``, the
    wall time, the peak memory of its process tree (verl, Ray and their workers) and verl's own step
    figures (:mod:`.usage`)."""
    metrics = launch.run_dir / METRICS
    if metrics.is_file() and metrics.stat().st_size:
        k = 1
        while metrics.with_suffix(f".{k}.jsonl").exists():
            k += 1
        metrics.rename(metrics.with_suffix(f".{k}.jsonl"))
    env = {**os.environ, **launch.env, **launch.secrets}
    start = time.monotonic()
    proc = subprocess.Popen(launch.command, env=env, cwd=launch.run_dir)
    with TreeMemory(proc.pid) as memory:
        code = proc.wait()
    wall = round(time.monotonic() - start, 1)
    return {"code": code, "wall_s": wall, "peak_memory_gb": round(memory.peak_gb, 2), **step_figures(metrics)}
