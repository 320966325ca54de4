"""Benchmark: GRPO against GiGPO in the real-model recipe (SmolLM2 on BabyAI), from the same SFT
model, each algorithm with the recipe's RL seeds.

    python -m bench.experiments.real_model_gigpo [KEY=VALUE ...] [--runs-dir DIR] [--arms grpo,gigpo]
        [--out bench/results/real_model_gigpo.md]

Each arm is the packaged recipe (``agentgym train --demo smollm2 algorithm=ARM``, the given
overrides after) in ``DIR/ARM/`` under GNU time, run by ``bench/experiments/real_model_recipe.py``'s runner.
The first arm does the demonstrations, the SFT and the SFT model's test scores; every later arm
starts from those same files (its ``sft`` is a link to the first arm's), so every arm's gains are
measured against one SFT model on the same test episodes. Resumable per arm: every launch runs the
recipe again, which skips finished phases (a seed list grown by a later launch adds only the new
seeds) and resumes an unfinished RL run from its last checkpoint. ``--from-runs`` writes the table
of the arms in ``--runs-dir`` again without launching anything. After each arm, the table and the JSON are
written, so a stopped run leaves the finished arms' figures.

Per arm and RL seed: greedy and sampled test success gains over the SFT model (points, paired SE
over the test tasks), minutes of the whole recipe for that algorithm (the shared SFT phases plus
its RL phases), peak GB (GNU time, the arm's process: the first arm's includes SFT), and from the
runs' metrics: update tokens/s (every token of the rows trained on, per second of update), the
share of rows skipped with a zero advantage, and the anchor coverage (turns sharing a state with
another sample of their task). A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common.recipe_runs import RUN, launch, phase_seconds, share_sft

ROOT = Path(__file__).resolve().parents[2]


def metrics_means(run: Path) -> dict[str, float]:
    """Means over an RL run's steps: update tokens/s, zero-advantage share, anchor coverage."""
    from agentgym_train.tracking.plots import read_metrics

    rows = read_metrics(run)

    def mean(key: str) -> float | None:
        values = [r[key] for r in rows if r.get(key) is not None]
        return round(statistics.fmean(values), 4) if values else None

    return {
        "update_tokens_per_s": mean("update_tokens_per_s"),
        "zero_adv_skipped": mean("zero_adv_skipped"),
        "anchor_coverage": mean("anchor_coverage/babyai"),
        "update_s_per_step": mean("time_train"),
        "step_s": mean("time_step"),
        "steps": len(rows),
    }


def arm_figures(arm_dir: Path, proc: dict[str, Any], shared_s: float) -> dict[str, Any]:
    result = json.loads((arm_dir / RUN / "recipe_report.json").read_text())
    run = arm_dir / RUN
    phases = phase_seconds({**result, "run": str(run)})
    rl_s = sum(v for k, v in phases.items() if k.startswith("RL seed"))
    seeds = []
    for s in result["seeds"]:
        seeds.append({**s, **metrics_means(run / f"rl-seed{s['seed']}")})
    return {
        "algorithm": result["recipe"]["rl"]["algorithm"],
        "algo_params": result["recipe"]["rl"].get("algo_params", {}),
        "sft_greedy": result["sft_greedy"],
        "sft_sampled": result["sft_sampled"],
        "seeds": seeds,
        "mean_greedy_gain": result["mean_greedy_gain"],
        "mean_sampled_gain": result["mean_sampled_gain"],
        "recipe_minutes": round((shared_s + rl_s) / 60, 1),
        "rl_minutes": round(rl_s / 60, 1),
        "peak_rss_gb": proc["peak_rss_gb"],
        "process": proc,
    }


def table(results: dict[str, Any]) -> str:
    lines = [
        "# GRPO against GiGPO in the real-model recipe (`bench/experiments/real_model_gigpo.py`)",
        "",
        f"`{results['command']}`, {results['date']}. SmolLM2-135M-Instruct on BabyAI, one SFT model for "
        f"every arm: greedy {results['sft_greedy']:.1f}%, sampled {results['sft_sampled']:.1f}% on the test "
        f"split. Shared phases (demonstrations, SFT, the SFT model's test scores): "
        f"{results['shared_s'] / 60:.1f} min.",
        "",
        "| arm | seed | greedy % | greedy gain (± SE) | sampled % | sampled gain (± SE) | update tokens/s | "
        "zero-adv rows skipped | anchor coverage | s/step |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, arm in results["arms"].items():
        for s in arm["seeds"]:
            g, p = s["greedy_gain"], s["sampled_gain"]
            lines.append(
                f"| {name} | {s['seed']} | {s['greedy_after']:.1f} | {g['gain']:+.1f} ± {g['se']:.1f} | "
                f"{s['sampled_after']:.1f} | {p['gain']:+.1f} ± {p['se']:.1f} | {s['update_tokens_per_s']} | "
                f"{100 * s['zero_adv_skipped']:.0f}% | {100 * s['anchor_coverage']:.0f}% | {s['step_s']:.1f} |"
            )
    lines += [
        "",
        "| arm | mean greedy gain | mean sampled gain | whole recipe, minutes | RL minutes (its seeds) | peak GB |",
        "|---|---|---|---|---|---|",
    ]
    for name, arm in results["arms"].items():
        lines.append(
            f"| {name} | {arm['mean_greedy_gain']:+.1f} | {arm['mean_sampled_gain']:+.1f} | "
            f"{arm['recipe_minutes']} | {arm['rl_minutes']} | {arm['peak_rss_gb']} |"
        )
    lines += [
        "",
        "Gains are in points over the SFT model on the same 90 test tasks, with the standard error of the "
        "paired per-task differences. Peak GB: the arm's process (GNU time); the first arm's ran the "
        "shared phases too. Update tokens/s, skipped share and coverage are means over the run's steps.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="KEY=VALUE overrides of the recipe, for every arm")
    ap.add_argument("--runs-dir", type=Path, default=Path("/tmp/agentgym-gigpo"))
    ap.add_argument("--arms", default="grpo,gigpo")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "real_model_gigpo.md")
    ap.add_argument(
        "--from-runs", action="store_true", help="write the table of the arms in --runs-dir again"
    )
    args = ap.parse_args()
    arms = args.arms.split(",")
    results: dict[str, Any] = {
        "command": "python -m bench.experiments.real_model_gigpo " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "arms": {},
    }
    first = args.runs_dir / arms[0] / RUN
    for arm in arms:
        arm_dir = args.runs_dir / arm
        if arm != arms[0]:
            share_sft(first, arm_dir / RUN)
        print(f"arm {arm}: the recipe in {arm_dir}", flush=True)
        proc = launch(arm_dir, [f"algorithm={arm}", *args.overrides], from_runs=args.from_runs)
        if arm == arms[0]:
            report = json.loads((first / "recipe_report.json").read_text())
            phases = phase_seconds({**report, "run": str(first)})
            results["shared_s"] = sum(v for k, v in phases.items() if not k.startswith("RL seed"))
            results["sft_greedy"], results["sft_sampled"] = report["sft_greedy"], report["sft_sampled"]
        results["arms"][arm] = arm_figures(arm_dir, proc, results["shared_s"])
        args.out.write_text(table(results))
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=2))
        print(table(results), flush=True)


if __name__ == "__main__":
    main()
