"""The embedded default: ``agentgym train`` with no arguments (and ``hatch run demo``).

On CPU, with nothing downloaded: build the tiny model and its tokenizer from BabyAI's expert
text, collect expert demonstrations on train tasks, a short SFT warm start, then GRPO with the
ScalingInter horizon schedule on BabyAI train tasks. The test split is evaluated on the SFT
checkpoint (before RL) and after RL, ``n`` samples per task; the table and the run's paths are
printed at the end. Every choice is fixed here (seed included) and none was tuned on the test
split.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentgym_train.config import TrainConfig

SEED = 0
TINY_SIZE = "nano"  # ~0.1M parameters: what 2 CPU cores train in minutes on 1k-token episodes
DEMO_TASKS = 300  # the first train ids of the demo's levels, played by the expert
# Episodes are cut at 1,024 tokens for SFT (the first turns: what these levels need).
SFT = {"epochs": 10, "lr": 5e-3, "batch_size": 16, "max_len": 1024}
RL: dict[str, Any] = {
    "algorithm": "grpo",
    "steps": 72,
    # 16 tasks x 8 samples (the reference's smallest batch), lr 6e-4: the dev set's best (docs/demo.md)
    "tasks_per_step": 16,
    "n": 8,
    "lr": 6e-4,
    "horizon": "scaling_inter",
    "horizon_params": {"rounds": [4, 6, 8], "every": 24},
    "kl_coef": 0.001,
    "kl_kind": "low_var_kl",
    "entropy_coef": 0.0,
    # every episode weighs the same, so long failed episodes do not outweigh short successes
    "loss_agg": "seq-mean-token-mean",
    "max_new_tokens": 24,
    "reward": "success",
    "val_n": 4,
    "val_max_turns": 8,  # the last horizon; the expert needs 3.3 turns on average
    "max_context": 2048,
    "val_every": 0,
    "save_every": 24,
}


def demo_levels(env: str = "babyai") -> list[str]:
    """``env``'s train categories that its test split covers, in the train split's order: the
    demos train on those (BabyAI: the GoTo*, Pickup, UnblockPickup, PickupLoc, ActionObjDoor,
    FindObjS7, OneRoomS20 and SynthLoc levels, on their train seeds 0-9999, never the test seeds;
    TextCraft: every depth).

    Read from the installed env's spec (this package does not import the env's): BabyAI numbers
    a task ``seed * 40 + level`` in both splits, so the train split's ``category_fn`` (a task's
    level) names the level of a test task too; an env without one names its test categories
    like its train ones."""
    from agentgym.plugins import get_env_spec

    splits = get_env_spec(env).splits
    train, test = splits["train"], splits["test"]
    if train.category_fn is not None:
        levels = {train.category_fn(t) for t in test.task_ids}
    elif test.categories:
        levels = set(test.categories)
    else:
        raise LookupError(f"the {env} splits name no categories (no category_fn, no categories)")
    return [level for level in train.categories if level in levels]


def demo_ids(env: str, tasks: int) -> list[int]:
    """``tasks`` train ids of ``env`` taken in turn from each of its demo categories (each one's in
    ascending order), so that a split sorted by category (TextCraft's by depth) gives every
    category its share. BabyAI's ids interleave its levels already: there it is their ascending
    order."""
    import itertools

    from agentgym_train.tasks import get_split

    known = get_split(env, "train").categories
    columns = itertools.zip_longest(*(sorted(known[c]) for c in demo_levels(env)))
    return [t for row in columns for t in row if t is not None][:tasks]


def demo_config(name: str = "demo", runs_dir: str = "runs", **overrides: Any) -> TrainConfig:
    """The demo's RL configuration (the model is the SFT checkpoint inside the run)."""
    run = Path(runs_dir) / name
    return TrainConfig.from_dict(
        {
            "name": name,
            "runs_dir": runs_dir,
            "seed": SEED,
            "envs": ["babyai"],
            "model": str(run / "sft"),
            "train_categories": demo_levels(),
            **RL,
            **overrides,
        }
    )


def collect_demos(path: Path, tasks: int, envs: Sequence[str] = ("babyai",)) -> list[Any]:
    """The expert's successful episodes on ``tasks`` train ids of each env's demo categories
    (``demo_ids``), written to ``path`` (read back when it exists)."""
    from agentgym.plugins import get_env_spec
    from agentgym.trajectory import read_episodes, write_episodes
    from agentgym_train.envs import LocalEnvs
    from agentgym_train.policies import make_policy
    from agentgym_train.rollout import RolloutEngine, Task

    if path.is_file():
        return list(read_episodes(path))
    demos = []
    for env in envs:
        engine = RolloutEngine(make_policy("scripted"), {env: LocalEnvs(get_env_spec(env))}, max_turns=20)
        demos += [
            e for e in engine.run([Task(env, i, split="train") for i in demo_ids(env, tasks)]) if e.success
        ]
    write_episodes(path, demos)
    return demos


def prepare(
    run: Path, say: Any = print, size: str = TINY_SIZE, sft_params: dict[str, Any] | None = None
) -> tuple[Path, dict[str, float]]:
    """Stages 1-3 (tiny model, expert demonstrations, SFT); returns the SFT checkpoint and the
    seconds each stage took. Stages already done in ``run`` are skipped. ``size`` and
    ``sft_params`` (overrides of ``SFT``) are for tuning on the dev set (``bench/demo_dev.py``)."""
    sft_cfg = {**SFT, **(sft_params or {})}
    from agentgym_train.sft import sft
    from agentgym_train.tiny import build_tiny

    run.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    t = time.perf_counter()
    tiny = run / "tiny"
    if not (tiny / "config.json").is_file():
        say(f"[1/4] building the tiny model ({size}) and its tokenizer from BabyAI expert text -> {tiny}")
        build_tiny(tiny, envs=["babyai"], tasks_per_env=200, size=size, seed=SEED)
    times["tiny_s"] = time.perf_counter() - t
    sft_dir = run / "sft"
    if not (sft_dir / "config.json").is_file():
        t = time.perf_counter()
        say(
            f"[2/4] expert demonstrations on the first {DEMO_TASKS} BabyAI train tasks of the test's level families"
        )
        demos = collect_demos(run / "demos.jsonl", DEMO_TASKS)
        times["collect_s"] = time.perf_counter() - t
        t = time.perf_counter()
        say(f"[3/4] SFT warm start on {len(demos)} successful demonstrations ({sft_cfg['epochs']} epochs)")
        summary = sft(tiny, demos, sft_dir, seed=SEED, **sft_cfg)
        say(
            f"      loss {summary['first_epoch_loss']} -> {summary['last_epoch_loss']} in {summary['wall_s']} s"
        )
        times["sft_s"] = time.perf_counter() - t
    return sft_dir, times


def run_demo(
    name: str = "demo",
    runs_dir: str = "runs",
    *,
    say: Callable[[str], None] = print,
    log: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Run the demo in ``runs_dir/name`` and return its report (also written to its
    ``report.json``, with the seconds each stage took under ``demo_times``; ``demo_summary``
    words it). ``say`` gets the stages' messages; ``log``, ``on_start`` and ``on_step`` are the
    RL trainer's (:func:`agentgym_train.trainer.run`); ``overrides`` are TrainConfig keys of the
    RL stage."""
    from agentgym_train.trainer import run as train

    run = Path(runs_dir) / name
    t0 = time.perf_counter()
    _, times = prepare(run, say)
    t = time.perf_counter()
    cfg = demo_config(name, runs_dir, **overrides)
    say(
        f"[4/4] GRPO on BabyAI train tasks: {cfg.steps} steps x {cfg.tasks_per_step} tasks x {cfg.n} samples, "
        f"ScalingInter horizons {cfg.horizon_params['rounds']} every {cfg.horizon_params['every']} steps; "
        f"test split (n={cfg.val_n}) before and after"
    )
    report = train(cfg, log=log, on_start=on_start, on_step=on_step)
    times["rl_s"] = time.perf_counter() - t
    times["total_s"] = time.perf_counter() - t0
    report["demo_times"] = {k: round(v, 1) for k, v in times.items()}
    (run / "report.json").write_text(json.dumps(report, indent=2))
    return report


def demo_summary(report: dict[str, Any]) -> str:
    """The demo's outcome in three lines: success before and after RL, the run, its plots."""
    before, after, minutes = report["before"], report["after"], report["demo_times"]["total_s"] / 60
    return (
        f"success {100 * before:.1f}% -> {100 * after:.1f}% "
        f"({100 * (after - before):+.1f} points) in {minutes:.1f} min\n"
        f"run: {Path(report['run'])}\nplots: {', '.join(report['plots'])}"
    )
