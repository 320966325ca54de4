"""AgentEvol: self-evolution by exploring, keeping successes and fine-tuning again from the base.

Each iteration (the reference's recipe): sample ``samples`` episodes per train task with the
current model, keep the successful ones — one per task (dedup), the env's own success flag is the
criterion — and fine-tune the *base* model on the original expert episodes plus everything kept so
far. The next iteration explores with that model. The test split is evaluated after each
iteration when ``val_n`` > 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentgym.errors import AgentGymError
from agentgym.trajectory import Episode, write_episodes
from agentgym_train.finetune.sft import sft
from agentgym_train.models.memory import peak_memory
from agentgym_train.policies.base import Sampling
from agentgym_train.policies.hf import HFPolicy
from agentgym_train.rollout.evaluate import evaluate


def evolve(
    base_model: str | Path,
    expert: Sequence[Episode],
    envs: Sequence[str],
    output: str | Path,
    *,
    iterations: int = 4,
    samples: int = 3,
    explore_split: str = "train",
    explore_limit: int | None = 200,
    val_split: str = "test",
    val_n: int = 1,
    temperature: float = 1.0,
    max_new_tokens: int = 48,
    sft_options: dict[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run AgentEvol; every iteration's model goes to ``output/iter_K``. Returns a summary with
    per-iteration exploration success, kept counts and validation success."""

    if iterations < 1 or samples < 1:
        raise AgentGymError("iterations and samples must be >= 1")
    say = log or (lambda message: None)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    sampling = Sampling(temperature=temperature, max_new_tokens=max_new_tokens)
    kept: dict[tuple[str, int], Episode] = {}
    expert_tasks = {(ep.env, ep.task_id) for ep in expert}
    model = Path(base_model)
    history = []
    t0 = time.perf_counter()
    for it in range(1, iterations + 1):
        policy = HFPolicy(str(model))
        report, episodes = evaluate(
            envs, policy, split=explore_split, n=samples, limit=explore_limit, sampling=sampling
        )
        new = keep_new_successes(episodes, kept, expert_tasks)
        write_episodes(out / f"iter_{it}.kept.jsonl", list(kept.values()))
        explored = mean_success(report)
        say(
            f"iteration {it}: exploration success {explored:.3f}, {new} new successful tasks ({len(kept)} kept)"
        )
        model = out / f"iter_{it}"
        sft(base_model, list(expert) + list(kept.values()), model, **(sft_options or {}))
        entry: dict[str, Any] = {"iteration": it, "explore_success": explored, "new": new, "kept": len(kept)}
        if val_n:
            val, _ = evaluate(envs, HFPolicy(str(model)), split=val_split, n=val_n, sampling=sampling)
            entry["val_success"] = mean_success(val)
            say(f"iteration {it}: {val_split} success {entry['val_success']:.3f}")
        history.append(entry)
    summary = {
        "model": str(model),
        "iterations": history,
        "wall_s": round(time.perf_counter() - t0, 1),
        **peak_memory(),
    }
    (out / "evolve.json").write_text(json.dumps(summary, indent=2))
    return summary


def keep_new_successes(
    episodes: Sequence[Episode], kept: dict[tuple[str, int], Episode], expert_tasks: set[tuple[str, int]]
) -> int:
    """Add to ``kept`` the first success of each task neither kept nor in the expert data (the
    dedup); returns how many were added."""
    new = 0
    for ep in episodes:
        key = (ep.env, ep.task_id)
        if ep.success and key not in kept and key not in expert_tasks:
            kept[key] = ep
            new += 1
    return new


def mean_success(report: dict[str, Any]) -> float:
    """An evaluation report's success rate, averaged over its envs."""
    return sum(r["success"] for r in report["envs"].values()) / len(report["envs"])
