"""Benchmark: the uniform task sampler against the difficulty sampler in a real-model recipe
(SmolLM2-135M-Instruct), every arm and RL seed from one SFT model, with learning curves.

    python -m bench.experiments.real_model_sampler --demo smollm2-textcraft [KEY=VALUE ...] [--runs-dir DIR]
        [--arms difficulty,uniform] [--seeds 0,1] [--sft-from RECIPE_DIR] [--from-runs] [--out MD]

Each arm is the packaged recipe with ``task_sampler=ARM`` (the given overrides after) in
``DIR/<demo>/ARM/`` under GNU time (``bench/experiments/real_model_recipe.py``'s runner). The first arm does the
demonstrations, the SFT and the SFT model's test scores, or takes them from ``--sft-from`` (a recipe
directory that has them); every other arm links to the same SFT model and copies its scores, so
every gain is measured against one SFT model on the same test episodes. Seeds run one at a time
across the arms (seed 0 of every arm, then seed 1...), and after every arm's seed the table
``bench/results/real_model_sampler_<env>.md`` (with its JSON) and the curves figure
``..._<env>.png`` are written again: a stopped run keeps what finished, and a relaunch skips it
(the recipe skips finished phases and resumes an RL run from its last checkpoint).

Per arm and seed: greedy and sampled test success and their gains over the SFT model (points,
paired SE over test tasks); means over the run's steps of the drawn tasks' estimated pass rate,
the share of groups whose samples all scored the same (zero variance) and training success;
seconds per step, RL minutes, peak GB. Per arm: the seeds' mean gains with the SE of the per-task
gains averaged over seeds. With both arms: difficulty against uniform, each test task's success
averaged over the seeds, paired over the tasks (both arms start from one SFT model). The figure:
each run's greedy curve on the recipe's fixed test subset.
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

from agentgym_train.recipes.report import paired_gain, per_task

from bench.common.recipe_runs import launch, share_sft

ROOT = Path(__file__).resolve().parents[2]


def run_means(run: Path) -> dict[str, Any]:
    from agentgym_train.tracking.plots import read_metrics

    rows = read_metrics(run)

    def mean(key: str) -> float | None:
        values = [r[key] for r in rows if r.get(key) is not None]
        return round(statistics.fmean(values), 4) if values else None

    return {
        "pass_rate_est": mean("task_pass_rate_est"),
        "zero_variance": mean("zero_variance_groups"),
        "train_success": mean("success"),
        "step_s": mean("time_step"),
        "steps": len(rows),
        "curve": json.loads((run / "report.json").read_text()).get("curve", []),
    }


def after_rl(recipe_dir: Path, seeds: list[int], kind: str) -> dict[str, float]:
    """Each test task's success after RL (greedy or sampled), averaged over the seeds."""
    if kind == "greedy":
        afters = [per_task(recipe_dir / f"rl-seed{s}_greedy.episodes.jsonl") for s in seeds]
    else:
        vals = [sorted((recipe_dir / f"rl-seed{s}" / "episodes").glob("val_step_*.jsonl"))[-1] for s in seeds]
        afters = [per_task(v) for v in vals]
    common = set(afters[0]).intersection(*afters[1:])
    return {t: statistics.fmean(a[t] for a in afters) for t in common}


def mean_gain(recipe_dir: Path, seeds: list[int], kind: str) -> dict[str, float]:
    """The seeds' mean gain with the SE over test tasks of each task's gain averaged over seeds."""
    return paired_gain(per_task(recipe_dir / f"sft_{kind}.episodes.jsonl"), after_rl(recipe_dir, seeds, kind))


def arm_difference(base_dir: Path, arm_dir: Path, seeds: list[int]) -> dict[str, dict[str, float]]:
    """One arm's success over another's on the same test tasks, each task averaged over the seeds:
    both arms start from one SFT model, so the pairing removes the tasks' own difficulty."""
    return {
        kind: paired_gain(after_rl(base_dir, seeds, kind), after_rl(arm_dir, seeds, kind))
        for kind in ("greedy", "sampled")
    }


def arm_figures(recipe_dir: Path, proc: dict[str, Any]) -> dict[str, Any]:
    result = json.loads((recipe_dir / "recipe_report.json").read_text())
    seeds = [{**s, **run_means(recipe_dir / f"rl-seed{s['seed']}")} for s in result["seeds"]]
    ids = [s["seed"] for s in seeds]
    return {
        "sft_greedy": result["sft_greedy"],
        "sft_sampled": result["sft_sampled"],
        "seeds": seeds,
        "greedy_gain": mean_gain(recipe_dir, ids, "greedy"),
        "sampled_gain": mean_gain(recipe_dir, ids, "sampled"),
        "rl_minutes": round(sum(s["rl_wall_s"] for s in seeds) / 60, 1),
        "peak_rss_gb": proc["peak_rss_gb"],
        "times_s": result["times_s"],
        "by_category": by_category(recipe_dir, ids),
    }


def by_category(recipe_dir: Path, seeds: list[int]) -> dict[str, dict[str, float]]:
    """Greedy test success per category (TextCraft: depth), SFT and each seed, in percent."""
    out: dict[str, dict[str, float]] = {}
    files = {"SFT": recipe_dir / "sft_greedy.json"}
    files |= {f"seed {s}": recipe_dir / f"rl-seed{s}_greedy.json" for s in seeds}
    for label, path in files.items():
        for r in json.loads(path.read_text())["envs"].values():
            for cat, c in (r.get("categories") or {}).items():
                out.setdefault(cat, {})[label] = round(100 * c["success"], 1)
    return out


def _num(value: float | None, scale: float, fmt: str) -> str:
    """A mean that a run from before the metric existed lacks: blank."""
    return "" if value is None else format(scale * value, fmt)


def table(results: dict[str, Any]) -> str:
    env = results["env"]
    lines = [
        f"# {' against '.join(results['arms']).capitalize()} task sampling on {env} (`bench/experiments/real_model_sampler.py`)",
        "",
        f"`{results['command']}`, {results['date']}. SmolLM2-135M-Instruct, the `{results['demo']}` recipe, "
        f"one SFT model for every arm: greedy {results['sft_greedy']:.1f}%, sampled "
        f"{results['sft_sampled']:.1f}% on the test split.",
        "",
        "| arm | seed | greedy % | greedy gain (± SE) | sampled % | sampled gain (± SE) | est. pass rate of draws | "
        "zero-variance groups | train success | s/step | RL min |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, arm in results["arms"].items():
        for s in arm["seeds"]:
            g, p = s["greedy_gain"], s["sampled_gain"]
            lines.append(
                f"| {name} | {s['seed']} | {s['greedy_after']:.1f} | {g['gain']:+.1f} ± {g['se']:.1f} | "
                f"{s['sampled_after']:.1f} | {p['gain']:+.1f} ± {p['se']:.1f} | {_num(s['pass_rate_est'], 1, '.2f')} | "
                f"{_num(s['zero_variance'], 100, '.0f')}% | {_num(s['train_success'], 100, '.1f')}% | {s['step_s']:.1f} | "
                f"{s['rl_wall_s'] / 60:.1f} |"
            )
    lines += [
        "",
        "| arm | seeds | mean greedy gain (± SE) | mean sampled gain (± SE) | peak GB |",
        "|---|---|---|---|---|",
    ]
    for name, arm in results["arms"].items():
        g, p = arm["greedy_gain"], arm["sampled_gain"]
        lines.append(
            f"| {name} | {len(arm['seeds'])} | {g['gain']:+.1f} ± {g['se']:.1f} | {p['gain']:+.1f} ± {p['se']:.1f} | "
            f"{arm['peak_rss_gb']} |"
        )
    if diff := results.get("difficulty_minus_uniform"):
        g, p = diff["greedy"], diff["sampled"]
        lines += [
            "",
            f"Difficulty against uniform, on the same test tasks with each task's success averaged over the seeds: "
            f"greedy {g['gain']:+.1f} ± {g['se']:.1f}, sampled {p['gain']:+.1f} ± {p['se']:.1f} points (paired SE).",
        ]
    cats = sorted({c for arm in results["arms"].values() for c in arm["by_category"]})
    if cats:
        lines += ["", "Greedy test success by category, %:", "", "| arm | model | " + " | ".join(cats) + " |"]
        lines.append("|---|---|" + "---|" * len(cats))
        for name, arm in results["arms"].items():
            for label in next(iter(arm["by_category"].values()), {}):
                row = [str(arm["by_category"].get(c, {}).get(label, "")) for c in cats]
                lines.append(f"| {name} | {label} | " + " | ".join(row) + " |")
    lines += [
        "",
        "Gains: points over the SFT model on the same test tasks, with the standard error of the paired "
        "per-task differences (for an arm's mean: of each task's difference averaged over its seeds). "
        "Estimated pass rate, zero-variance share and train success: means over the run's steps. Peak GB: "
        "the arm's process (GNU time, maximum RSS over its launches).",
        "",
        f"![curves]({results['figure']})",
        "",
    ]
    return "\n".join(lines)


def plot(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    styles = {"uniform": "o--", "difficulty": "s-"}
    for name, arm in results["arms"].items():
        for s in arm["seeds"]:
            pts = s["curve"]
            ax.plot([p["step"] for p in pts], [100 * p["success"] for p in pts], styles.get(name, "x-"),
                    label=f"{name}, seed {s['seed']}")  # fmt: skip
    ax.set_xlabel("RL step")
    ax.set_ylabel("greedy success on the curve's test tasks, %")
    ax.set_title(f"{results['env']}: learning curves, {' against '.join(results['arms'])} sampling")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="KEY=VALUE overrides of the recipe, for every arm")
    ap.add_argument("--demo", default="smollm2-textcraft")
    ap.add_argument("--runs-dir", type=Path, default=Path("/tmp/agentgym-sampler"))
    ap.add_argument("--arms", default="difficulty,uniform")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--sft-from", type=Path, default=None, help="a recipe directory with SFT and its scores")
    ap.add_argument(
        "--from-runs", action="store_true", help="write the table of the runs again, launch nothing"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the table's path (JSON and figure beside it; default bench/results/real_model_sampler_<env>.md)",
    )
    args = ap.parse_args()
    arms, seeds = args.arms.split(","), [int(s) for s in args.seeds.split(",")]
    name = f"demo-{args.demo}"
    env = "babyai" if args.demo == "smollm2" else args.demo.removeprefix("smollm2-")
    out = args.out or ROOT / "bench" / "results" / f"real_model_sampler_{env}.md"
    results: dict[str, Any] = {
        "command": "python -m bench.experiments.real_model_sampler " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "demo": args.demo,
        "env": env,
        "arms": {},
        "figure": out.with_suffix(".png").name,
    }

    def recipe_dir_of(arm: str) -> Path:
        return args.runs_dir / args.demo / arm / "runs" / name

    first = args.sft_from or recipe_dir_of(arms[0])
    for k in range(len(seeds)):
        for arm in arms:
            arm_dir = args.runs_dir / args.demo / arm
            recipe_dir = recipe_dir_of(arm)
            if recipe_dir != first:
                share_sft(first, recipe_dir)
            print(f"arm {arm}, seeds {seeds[: k + 1]}: the recipe in {arm_dir}", flush=True)
            overrides = [f"task_sampler={arm}", f"seeds={seeds[: k + 1]}", *args.overrides]
            proc = launch(arm_dir, overrides, from_runs=args.from_runs, demo=args.demo)
            results["arms"][arm] = arm_figures(recipe_dir, proc)
            results["sft_greedy"] = results["arms"][arm]["sft_greedy"]
            results["sft_sampled"] = results["arms"][arm]["sft_sampled"]
            if arm == arms[-1] and {"difficulty", "uniform"} <= set(arms):
                results["difficulty_minus_uniform"] = arm_difference(
                    recipe_dir_of("uniform"), recipe_dir_of("difficulty"), seeds[: k + 1]
                )
            out.write_text(table(results))
            out.with_suffix(".json").write_text(json.dumps(results, indent=2))
            plot(results, out.with_suffix(".png"))
            print(table(results), flush=True)


if __name__ == "__main__":
    main()
