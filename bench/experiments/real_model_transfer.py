"""Benchmark: one agent on two envs. SmolLM2 trained on BabyAI alone, TextCraft alone, and both
together (SFT then GRPO), each model scored on both envs' test splits, greedy.

    python -m bench.experiments.real_model_transfer [--runs-dir DIR] [--seeds 0] [--babyai DIR] [--from-runs]
        [--out bench/results/real_model_transfer.md]

The three trainings are the packaged recipes ``smollm2`` (BabyAI), ``smollm2-textcraft`` and
``smollm2-babyai-textcraft`` (SFT on both envs' demonstrations, then GRPO drawing each task's env
at random), each in ``DIR/<recipe>/`` under GNU time with the RL seeds given; a recipe whose
report already holds those seeds is read, not launched (``--babyai DIR``: take BabyAI's from
another bench's run, e.g. ``runs/horizon/scaling_inter``, the same recipe). The one-env models,
SFT and RL, are then scored on the env they never saw, as the recipe scores its own (greedy, the
RL stage's turn cap and reply length), each written beside the run and read back on a rerun.

The table: per trained-on row and scored-on column, greedy test success of the SFT model and of
the RL model (the mean of the seeds), RL's gain over that SFT model (paired SE over the test
tasks), and on each env, the two-env model against the one trained on that env alone (paired).
A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common.recipe_runs import launch, report_seeds

ROOT = Path(__file__).resolve().parents[2]
ENVS = ("babyai", "textcraft")
RECIPES = {"babyai": "smollm2", "textcraft": "smollm2-textcraft", "both": "smollm2-babyai-textcraft"}


def recipe_run(arm_dir: Path, demo: str, seeds: list[int], from_runs: bool) -> tuple[Path, dict[str, Any]]:
    """The recipe's run directory and report, launched unless its report holds ``seeds``."""
    run = arm_dir / "runs" / f"demo-{demo}"
    if not set(report_seeds(run)) >= set(seeds) and not from_runs:
        print(f"{demo}: the recipe in {arm_dir}, seeds {seeds}", flush=True)
        launch(arm_dir, [f"seeds={seeds}"], demo=demo)
    return run, json.loads((run / "recipe_report.json").read_text())


def envs_of(report: dict[str, Any]) -> list[str]:
    """The envs a recipe trained on (a report from before multi-env recipes names none: BabyAI)."""
    return report.get("envs", ["babyai"])


def greedy_file(run: Path, model: str, env: str, recipe_envs: list[str]) -> Path:
    """Where the recipe wrote ``model``'s (``sft`` or ``rl-seedK``) greedy episodes on ``env``, or
    where this bench writes them for an env the recipe did not train on."""
    if env in recipe_envs:
        return run / f"{model}_greedy.episodes.jsonl"
    return run / f"{model}_on_{env}_greedy.episodes.jsonl"


def score_elsewhere(run: Path, report: dict[str, Any], model: str, env: str) -> None:
    """``model`` of a one-env recipe, greedy on ``env``'s test split as the recipe scores its own."""
    from agentgym_train.recipes.runner import close_policy, eval_model, rl_config, sampler

    out = greedy_file(run, model, env, envs_of(report)).with_name(f"{model}_on_{env}_greedy.json")
    if out.is_file():
        return
    seed = report["seeds"][0]["seed"] if model == "sft" else int(model.removeprefix("rl-seed"))
    cfg = rl_config({**report["recipe"], "envs": [env]}, run, run / "sft", seed)
    path = run / "sft" if model == "sft" else run / model / "model"
    print(f"{run.name}: {model} on {env}, greedy", flush=True)
    policy = sampler(path, cfg)
    try:
        eval_model(lambda: policy, out, cfg, greedy=True)
    finally:
        close_policy(policy)


def cell(run: Path, report: dict[str, Any], env: str, seeds: list[int]) -> dict[str, Any]:
    """One trained-on/scored-on cell: per-task greedy success of the SFT model and of the RL model
    (averaged over the seeds), and RL's gain over SFT."""
    from agentgym_train.recipes.report import paired_gain, per_task

    sft = per_task(greedy_file(run, "sft", env, envs_of(report)), env)
    rls = [per_task(greedy_file(run, f"rl-seed{k}", env, envs_of(report)), env) for k in seeds]
    rl = {t: statistics.fmean(r[t] for r in rls) for t in set.intersection(*(set(r) for r in rls))}
    return {
        "sft": round(100 * statistics.fmean(sft.values()), 2),
        "rl": round(100 * statistics.fmean(rl.values()), 2),
        "rl_seeds": [round(100 * statistics.fmean(r.values()), 2) for r in rls],
        "gain": paired_gain(sft, rl),
        "per_task": rl,
    }


def table(results: dict[str, Any]) -> str:
    from agentgym_train.recipes.report import paired_gain

    cells = results["cells"]
    tasks = ", ".join(f"{cells['both'][e]['gain']['tasks']} {e}" for e in ENVS)
    lines = [
        "# One agent, two envs: SmolLM2 on BabyAI, TextCraft and both (`bench/experiments/real_model_transfer.py`)",
        "",
        f"`{results['command']}`, {results['date']}. Greedy test success %, SFT -> RL (mean of RL seeds "
        f"{results['seeds']}), and RL's gain over that SFT model in points ± paired SE over the test tasks "
        f"({tasks}).",
        "",
        "| trained on | scored on BabyAI | scored on TextCraft |",
        "|---|---|---|",
    ]
    for row in ("babyai", "textcraft", "both"):
        parts = []
        for env in ENVS:
            c = cells[row][env]
            g = c["gain"]
            parts.append(f"{c['sft']:.1f} -> {c['rl']:.1f} ({g['gain']:+.1f} ± {g['se']:.1f})")
        lines.append(f"| {row} | " + " | ".join(parts) + " |")
    lines += ["", "| scored on | both - alone, RL models (± paired SE) |", "|---|---|"]
    for env in ENVS:
        d = paired_gain(cells[env][env]["per_task"], cells["both"][env]["per_task"])
        lines.append(f"| {env} | {d['gain']:+.1f} ± {d['se']:.1f} |")
    lines += [
        "",
        "| trained on | recipe minutes | peak GB |",
        "|---|---|---|",
    ]
    for row, figures in results["runs"].items():
        lines.append(f"| {row} | {figures['minutes']} | {figures['peak_rss_gb']} |")
    lines += [
        "",
        f"Every model is scored as the recipes score theirs: greedy once per test task, {results['val_max_turns']} "
        f"turns, {results['max_new_tokens']} tokens a reply. The one-env models' scores on the other env are this bench's. Recipe minutes: "
        "the recipe's phases (demonstrations, SFT, its own test scores, the RL seeds given).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs-dir", type=Path, default=Path("runs/transfer"))
    ap.add_argument("--seeds", default="0", help="RL seeds of every recipe")
    ap.add_argument("--babyai", type=Path, default=None, help="BabyAI's recipe run (default: DIR/smollm2)")
    ap.add_argument("--from-runs", action="store_true", help="launch nothing: the table of the runs made")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "real_model_transfer.md")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    dirs = {row: args.runs_dir / demo for row, demo in RECIPES.items()}
    if args.babyai is not None:
        dirs["babyai"] = args.babyai
    runs = {row: recipe_run(dirs[row], RECIPES[row], seeds, args.from_runs) for row in RECIPES}
    from real_model_recipe import phase_seconds

    results: dict[str, Any] = {
        "command": "python -m bench.experiments.real_model_transfer " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "seeds": seeds,
        **{k: runs["both"][1]["recipe"]["rl"][k] for k in ("val_max_turns", "max_new_tokens")},
        "cells": {},
        "runs": {},
    }
    for row, (run, report) in runs.items():
        for env in ENVS:
            if env not in envs_of(report) and not args.from_runs:
                for model in ["sft", *(f"rl-seed{k}" for k in seeds)]:
                    score_elsewhere(run, report, model, env)
        results["cells"][row] = {env: cell(run, report, env, seeds) for env in ENVS}
        used = [s for s in report["seeds"] if s["seed"] in seeds]
        phases = phase_seconds({**report, "run": str(run), "seeds": used})
        results["runs"][row] = {
            "run": str(run),
            "minutes": round(sum(phases.values()) / 60, 1),
            # the RL runs' own peaks too: a launch that read finished phases back measures only that
            "peak_rss_gb": max(
                launch(dirs[row], [], from_runs=True)["peak_rss_gb"], *(s["peak_rss_gb"] for s in used)
            ),
        }
    text = table(results)
    args.out.write_text(text)
    for row in results["cells"].values():
        for c in row.values():
            c.pop("per_task")
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2))
    print(text)


if __name__ == "__main__":
    main()
