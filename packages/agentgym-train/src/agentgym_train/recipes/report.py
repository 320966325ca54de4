"""What a recipe's report says: success per test task, in percent, and the gain of RL over SFT
in points with its paired standard error over tasks, per seed and env, as table rows."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Literal

from agentgym.trajectory import read_episodes


def per_task(
    episodes_file: Path, env: str | None = None, value: Literal["success", "return"] = "success"
) -> dict[tuple[str, int], float]:
    """Success (or ``value="return"``: the score) per test task, keyed by env and task id (the
    mean over its samples); ``env``: that env's tasks only."""
    by_task: dict[tuple[str, int], list[float]] = {}
    for ep in read_episodes(episodes_file):
        if env is None or ep.env == env:
            by_task.setdefault((ep.env, ep.task_id), []).append(
                float(ep.success if value == "success" else ep.return_)
            )
    return {t: statistics.fmean(s) for t, s in by_task.items()}


def success_pct(report: dict[str, Any], env: str | None = None, key: str = "success") -> float:
    """Test success in percent from an evaluation report: one env's, or over every episode scored;
    ``key="avg"``: the mean score (Avg@n, the mean episode return: partial credit where the env
    pays it), in percent of a full score."""
    scored = [r for name, r in report["envs"].items() if env in (None, name)]
    weights = [r["episodes"] - r["errors"] - r.get("out_of_range", 0) for r in scored]
    if len(scored) == 1:
        return 100 * scored[0][key]
    return 100 * sum(r[key] * w for r, w in zip(scored, weights, strict=True)) / max(1, sum(weights))


def paired_gain(before: dict[Any, float], after: dict[Any, float]) -> dict[str, float]:
    """Success after minus before on the same tasks, in points, with its standard error over
    tasks (pairing removes the tasks' own difficulty from the noise)."""
    common = sorted(before.keys() & after.keys())  # the tasks both scored
    diffs = [100 * (after[t] - before[t]) for t in common]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
    return {"gain": round(statistics.fmean(diffs), 2), "se": round(se, 2), "tasks": len(common)}


def seed_result(
    run: Path, seed: int, report: dict[str, Any], greedy: dict[str, Any], envs: list[str]
) -> dict[str, Any]:
    """One RL seed's figures against the SFT model's, over every test task and per env: sampled
    (the trainer's last validation) and greedy."""
    val = sorted((run / f"rl-seed{seed}" / "episodes").glob("val_step_*.jsonl"))[-1]
    files = {
        "sampled": (run / "sft_sampled.episodes.jsonl", val),
        "greedy": (run / "sft_greedy.episodes.jsonl", run / f"rl-seed{seed}_greedy.episodes.jsonl"),
    }

    def figures(env: str | None) -> dict[str, Any]:
        gains = {k: paired_gain(per_task(a, env), per_task(b, env)) for k, (a, b) in files.items()}
        return {
            "sampled_after": success_pct(report["validation"][-1], env),
            "sampled_gain": gains["sampled"],
            "sampled_score": success_pct(report["validation"][-1], env, "avg"),
            "greedy_after": success_pct(greedy, env),
            "greedy_gain": gains["greedy"],
            "greedy_score": success_pct(greedy, env, "avg"),
        }

    return {
        "seed": seed,
        **figures(None),
        "by_env": {env: figures(env) for env in envs},
        "steps": report["steps"],
        "rl_wall_s": report["wall_s"],
        "peak_rss_gb": report["peak_rss_gb"],
    }


def summary_rows(result: dict[str, Any], env: str | None = None) -> list[list[str]]:
    """The report as table rows: SFT, each seed's RL, the seeds' mean (success %, gains in points
    with their paired standard errors, mean score %), greedy then sampled, over every test task or
    ``env``'s."""

    def gain(g: dict[str, float]) -> str:
        return f"{g['gain']:+.1f} ± {g['se']:.1f}"

    top = result if env is None else result["by_env"][env]
    seeds = [s if env is None else s["by_env"][env] for s in result["seeds"]]
    rows = [
        [
            "SFT",
            f"{top['sft_greedy']:.1f}",
            "",
            f"{top.get('sft_greedy_score', math.nan):.1f}",
            f"{top['sft_sampled']:.1f}",
            "",
            f"{top.get('sft_sampled_score', math.nan):.1f}",
        ]
    ]
    for k, s in zip(result["seeds"], seeds, strict=True):
        rows.append(
            [
                f"RL seed {k['seed']}",
                f"{s['greedy_after']:.1f}",
                gain(s["greedy_gain"]),
                f"{s.get('greedy_score', math.nan):.1f}",
                f"{s['sampled_after']:.1f}",
                gain(s["sampled_gain"]),
                f"{s.get('sampled_score', math.nan):.1f}",
            ]
        )

    def mean(key: str) -> str:  # a report from before the scores: nan
        return f"{statistics.fmean(s.get(key, math.nan) for s in seeds):.1f}"

    rows.append(
        [
            "RL mean",
            mean("greedy_after"),
            f"{top['mean_greedy_gain']:+.1f}",
            mean("greedy_score"),
            mean("sampled_after"),
            f"{top['mean_sampled_gain']:+.1f}",
            mean("sampled_score"),
        ]
    )
    return rows


#: the columns of :func:`summary_rows`
SUMMARY_COLUMNS = (
    "model",
    "greedy success %",
    "greedy gain (points ± SE)",
    "greedy score %",
    "sampled success %",
    "sampled gain (points ± SE)",
    "sampled score %",
)
