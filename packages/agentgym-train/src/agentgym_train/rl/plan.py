"""What a native run would do, read from its config without loading a model or an env
(``agentgym train CONFIG --dry-run``): the config is checked as a run checks it before it writes
or loads anything (``TrainConfig``'s checks, then the trainer's ``preflight``), then each part the
run would use is named."""

from __future__ import annotations

from pathlib import Path

from agentgym_train.models import checkpoint
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rl.horizon import make_schedule
from agentgym_train.rl.specs import get_algorithm
from agentgym_train.rl.trainer import preflight


def horizon_stages(cfg: TrainConfig) -> list[tuple[int, int, int]]:
    """``(first step, last step, turn cap)`` of each stretch of the schedule, as it runs when no
    step's metrics move it (a schedule that reacts to them, like ``adaptive``, may move sooner)."""
    schedule = make_schedule(cfg.horizon, **cfg.horizon_params)
    stages: list[tuple[int, int, int]] = []
    for step in range(1, cfg.steps + 1):
        cap = schedule(step)
        if stages and stages[-1][2] == cap:
            stages[-1] = (stages[-1][0], step, cap)
        else:
            stages.append((step, step, cap))
    return stages


def plan(cfg: TrainConfig) -> list[str]:
    """The run ``cfg`` describes, a line per part."""
    algo = get_algorithm(cfg.algorithm)
    run_dir = Path(cfg.runs_dir) / cfg.name
    preflight(cfg, run_dir)
    found = checkpoint.checkpoints(run_dir)
    pool = cfg.train_pool()
    horizon = ", ".join(f"steps {a}-{b}: {cap} turns" for a, b, cap in horizon_stages(cfg))
    episodes = cfg.steps * cfg.tasks_per_step * cfg.n
    return [
        f"run: {run_dir}"
        + (f" (resumes from {found[-1].name})" if cfg.resume and found else " (starts at step 0)"),
        f"model: {cfg.model or f'the tiny model ({cfg.tiny_size}), built in the run'}"
        + (f", LoRA r={cfg.lora_r}" if cfg.lora else ", every weight")
        + f", dtype {cfg.dtype}, rollout {cfg.rollout}",
        f"algorithm: {algo.name} ({algo.description}), parameters { ({**algo.params, **cfg.algo_params}) }",
        f"loss: clip {cfg.clip_ratio}, kl_coef {cfg.kl_coef} ({cfg.kl_kind}), entropy_coef "
        f"{cfg.entropy_coef}, {cfg.loss_agg}; lr {cfg.lr}, {cfg.ppo_epochs} epoch(s) x "
        f"{cfg.mini_batches} mini-batch(es)",
        f"steps: {cfg.steps} x {cfg.tasks_per_step} tasks x {cfg.n} samples = {episodes} episodes"
        + (" (more under dynamic sampling)" if cfg.dynamic_sampling else ""),
        "train tasks: "
        + ", ".join(f"{env} {len(ids)} of {cfg.train_split!r}" for env, ids in pool.ids.items())
        + f", drawn by the {cfg.task_sampler!r} sampler",
        "envs: "
        + (
            f"sessions on {len(cfg.env_urls)} env server(s): {', '.join(cfg.env_urls)}"
            if cfg.env_urls
            else "in-process"
        ),
        f"horizon: {cfg.horizon}, {horizon}",
        f"reward: {cfg.reward}" + (f" {cfg.reward_params}" if cfg.reward_params else ""),
        f"validation: {cfg.val_split!r} split, {cfg.val_n} sample(s) per task"
        + (f", every {cfg.val_every} steps" if cfg.val_every else ", before and after")
        + (
            f"; greedy curve on {cfg.curve_tasks} tasks every {cfg.curve_every} steps"
            if cfg.curve_every
            else ""
        ),
    ]
