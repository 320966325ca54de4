"""What a native run measures of its policy between steps: the validation (the test split sampled
as configured, before, every ``val_every`` steps and after) and the learning curve (greedy success
on a fixed subset of the test split, at step 0 and every ``curve_every`` steps), both played with
the training RNG streams left untouched."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from agentgym.trajectory import Episode
from agentgym_train.policies.base import Sampling
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rollout.evaluate import evaluate, kept_episodes
from agentgym_train.rollout.tasks import split_ids, spread_ids


def val_ids(cfg: TrainConfig) -> dict[str, list[int]]:
    """Each env's validation tasks: its whole ``val_split``, or ``val_limit`` of them spread over
    its categories (the first N of a split sorted by category would be one category only)."""
    return {
        env: spread_ids(env, cfg.val_split, cfg.val_limit) if cfg.val_limit else split_ids(env, cfg.val_split)
        for env in cfg.envs
    }


def play(
    cfg: TrainConfig,
    policy: Any,
    step: int,
    *,
    greedy: bool,
    task_ids: dict[str, Sequence[int]] | None = None,
    played: Sequence[Episode] = (),
    on_episode: Callable[[Episode], None] | None = None,
) -> tuple[dict[str, Any], list[Any]]:
    """The run's validation split played by ``policy`` after ``step`` steps: sampled as
    ``val_*`` says, or greedily once per task; on ``task_ids`` per env when given (else
    ``val_ids``). The episodes' streams' bases sit below every training step's
    (``TrainConfig.episode_seed``). ``played``, ``on_episode``: as ``evaluate``'s (a resumed
    validation)."""
    ids = task_ids or val_ids(cfg)
    report: dict[str, Any] = {"envs": {}}
    episodes: list[Any] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed + 1_000_003)
        for envs in [[e] for e in cfg.envs] if task_ids else [list(cfg.envs)]:
            part, eps = evaluate(
                envs,
                policy,
                split=cfg.val_split,
                n=1 if greedy else cfg.val_n,
                task_ids=ids,
                batch_size=cfg.rollout_batch,
                sampling=Sampling(
                    temperature=0.0 if greedy else cfg.val_temperature, max_new_tokens=cfg.max_new_tokens
                ),
                max_context=cfg.max_context,
                max_turns=cfg.val_max_turns,
                max_instances=cfg.max_instances,
                urls=cfg.env_urls,
                token=cfg.env_token(),
                episode_seed=cfg.episode_seed(-1 - step),
                match_actions=cfg.match_actions,
                format_hint=cfg.format_hint,
                constrain_actions=cfg.constrain_actions,
                played=played,
                on_episode=on_episode,
            )
            report["envs"].update(part["envs"])
            episodes += eps
    return report, episodes


def kept(
    episodes_dir: Path, step: int, launch_step: int
) -> tuple[Path, list[Episode], Callable[[Episode], None]]:
    """Where a validation at ``step`` keeps each episode as it ends, the kept episodes this launch
    can trust, and the keeper (``kept_episodes``). Only a launch resumed from ``step``'s checkpoint
    (the weights and checked settings those episodes were played with: a run cut in its validation
    after the last step) trusts them; every other kept file goes, an earlier step's too."""
    path = episodes_dir / f"val_step_{step:06d}.jsonl.partial"
    for other in episodes_dir.glob("val_step_*.jsonl.partial"):
        if other != path or not 0 < launch_step == step:
            other.unlink()
    return path, *kept_episodes(path)


def entry(step: int, label: str, report: dict[str, Any]) -> dict[str, Any]:
    """A validation or curve point: its step, label, per-env reports and mean success over envs."""
    envs = report["envs"]
    return {
        "step": step,
        "label": label,
        "envs": envs,
        "success": sum(r["success"] for r in envs.values()) / len(envs),
    }


def curve_line(point: dict[str, Any], start: dict[str, Any] | None, tasks: int) -> str:
    """A curve point as one log line, beside the starting model's point."""
    since = (
        "" if start is None or start is point else f" (step {start['step']}: {100 * start['success']:.1f}%)"
    )
    per_env = ", ".join(f"{env} {100 * r['success']:.1f}%" for env, r in point["envs"].items())
    return f"curve at step {point['step']}: greedy {100 * point['success']:.1f}% on {tasks} test tasks an env ({per_env}){since}"
