"""Benchmark: ScalingInter-RL against fixed horizons and the adaptive schedule, on a real model
(SmolLM2 on BabyAI), from one SFT model, with the recipe's RL seeds.

    python bench/real_model_horizon.py [--runs-dir DIR] [--arms scaling_inter,fixed_short,...]
        [--seeds 0,1] [--from-runs] [--out bench/results/real_model_horizon.md]
        [--figure docs/real_model_horizon.png]

Arms, all GRPO with the recipe's step settings (steps, tasks per step, samples, learning rate),
only the horizon differs (the recipe's rounds, ``[4, 6, 8]``):

- ``scaling_inter``: the recipe as it is (4 turns for steps 1-4, 6 for 5-8, 8 from 9);
- ``fixed_short``: the first round's horizon at every step;
- ``fixed_long``: the last round's (twice the first);
- ``adaptive``: the rounds, moving on once the step's truncation rate falls below
  ``ADAPTIVE_THRESHOLD`` after at least 2 steps at a horizon.

Each arm is the packaged recipe (``agentgym train --demo smollm2``) in ``DIR/ARM/`` under GNU
time; ``scaling_inter`` makes the demonstrations, the SFT model and its test scores (launch it
first), and every other arm starts from those files (``bench/real_model_gigpo.py``'s sharing), so that every gain is
against one SFT model on the same test episodes. Seeds run one at a time over every arm (seed 0
of each arm, then seed 1 of each), so a stopped run leaves whole seeds; a later launch resumes
(finished phases are read back, an unfinished RL run resumes from its checkpoint). After every
arm, the table, the JSON and the figure are written from every arm in ``DIR``.

Per arm and seed: the training success and mean turns per step, RL minutes (steps, and the
sampled test split after), training successes per RL minute, greedy and sampled test success
after with gains over the SFT model (paired SE over test tasks), and a stability figure: the
largest fall of the 3-step moving mean of training success below its best so far. Per arm, the
seeds' per-task success against ScalingInter's, paired over the test tasks. The figure: training
success and mean turns per step, the mean of the seeds as a line, the seeds' range as a band.
A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from real_model_gigpo import RUN, share_sft  # bench/ is on sys.path
from real_model_recipe import launch, phase_seconds, rl_seconds

ROOT = Path(__file__).resolve().parents[1]
#: Episodes in BabyAI end by success or by the horizon, so the truncation rate is 1 - success:
#: the schedule's default (0.2) would keep the SFT model (~0.3 success at 4 turns) at the first
#: round for good. 0.75 moves on once a quarter of a step's episodes finish within the horizon.
ADAPTIVE_THRESHOLD = 0.75


def arms(rounds: list[int]) -> dict[str, list[str]]:
    """Each arm's recipe overrides, from the recipe's ScalingInter rounds."""
    return {
        "scaling_inter": [],
        "fixed_short": ["horizon=fixed", f"horizon_params={{horizon: {rounds[0]}}}"],
        "fixed_long": ["horizon=fixed", f"horizon_params={{horizon: {rounds[-1]}}}"],
        "adaptive": [
            "horizon=adaptive",
            f"horizon_params={{rounds: {rounds}, threshold: {ADAPTIVE_THRESHOLD}, min_steps: 2}}",
        ],
    }


def moving(xs: list[float], k: int = 3) -> list[float]:
    return [statistics.fmean(xs[max(0, i - k + 1) : i + 1]) for i in range(len(xs))]


def largest_fall(xs: list[float]) -> float:
    """The largest fall of the 3-step moving mean below its best so far (0: it never fell)."""
    smooth, best, fall = moving(xs), -math.inf, 0.0
    for x in smooth:
        best = max(best, x)
        fall = max(fall, best - x)
    return fall


def seed_figures(run: Path, seed_result: dict[str, Any], rl: dict[str, Any]) -> dict[str, Any]:
    from agentgym_train.real_demo import per_task

    rl_run = run / f"rl-seed{seed_result['seed']}"
    rows = [json.loads(line) for line in (rl_run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    success = [r["success"] for r in rows]
    minutes = rl_seconds(rl_run) / 60
    episodes = rl["tasks_per_step"] * rl["n"]
    val = sorted((rl_run / "episodes").glob("val_step_*.jsonl"))[-1]
    return {
        "seed": seed_result["seed"],
        "greedy_after": seed_result["greedy_after"],
        "greedy_gain": seed_result["greedy_gain"],
        "sampled_after": seed_result["sampled_after"],
        "sampled_gain": seed_result["sampled_gain"],
        "train_success": success,
        "turns": [r["turns"] for r in rows],
        "horizon": [r["horizon"] for r in rows],
        "rl_minutes": round(minutes, 2),
        "train_minutes": round(sum(r["time_step"] for r in rows) / 60, 2),
        "successes_per_rl_minute": round(sum(success) * episodes / minutes, 2),
        "largest_fall": round(largest_fall(success), 3),
        "greedy_per_task": per_task(run / f"rl-seed{seed_result['seed']}_greedy.episodes.jsonl"),
        "sampled_per_task": per_task(val),
    }


def arm_figures(arm_dir: Path, proc: dict[str, Any]) -> dict[str, Any]:
    run = arm_dir / RUN
    result = json.loads((run / "recipe_report.json").read_text())
    rl = result["recipe"]["rl"]
    seeds = [seed_figures(run, s, rl) for s in result["seeds"]]
    from agentgym_train.real_demo import paired_gain, per_task

    arm = {"seeds": seeds}
    return {
        # the seeds' mean model against the SFT model, paired over the test tasks
        "greedy_gain_of_mean": paired_gain(
            per_task(run / "sft_greedy.episodes.jsonl"), seeds_mean(arm, "greedy_per_task")
        ),
        "sampled_gain_of_mean": paired_gain(
            per_task(run / "sft_sampled.episodes.jsonl"), seeds_mean(arm, "sampled_per_task")
        ),
        "horizon": rl["horizon"],
        "horizon_params": rl["horizon_params"],
        "sft_greedy": result["sft_greedy"],
        "sft_sampled": result["sft_sampled"],
        "seeds": seeds,
        "mean_greedy_gain": result["mean_greedy_gain"],
        "mean_sampled_gain": result["mean_sampled_gain"],
        # the RL runs' own peaks (over every launch of each): a launch of the recipe that found its
        # phases done and only read them back measures just that
        "peak_rss_gb": max(s["peak_rss_gb"] for s in result["seeds"]),
        "launches": proc["launches"],
    }


def seeds_mean(arm: dict[str, Any], key: str) -> dict[tuple[str, int], float]:
    """Per test task, the success averaged over the arm's seeds."""
    tasks = set.intersection(*(set(s[key]) for s in arm["seeds"]))
    return {t: statistics.fmean(s[key][t] for s in arm["seeds"]) for t in tasks}


def against(arm: dict[str, Any], base: dict[str, Any], key: str) -> dict[str, float]:
    """``base`` minus ``arm`` (both averaged over their seeds), paired over the test tasks."""
    from agentgym_train.real_demo import paired_gain

    return paired_gain(seeds_mean(arm, key), seeds_mean(base, key))


def mean(xs: list[float]) -> float:
    return statistics.fmean(xs)


def table(results: dict[str, Any]) -> str:
    arms_ = results["arms"]
    lines = [
        "# ScalingInter-RL against fixed horizons on a real model (`bench/real_model_horizon.py`)",
        "",
        f"`{results['command']}`, {results['date']}. SmolLM2-135M-Instruct on BabyAI, one SFT model for every "
        f"arm: greedy {results['sft_greedy']:.1f}%, sampled {results['sft_sampled']:.1f}% on the test split "
        f"({results['val_max_turns']} turns). GRPO, {results['steps']} steps x {results['tasks_per_step']} tasks x {results['n']} samples "
        "per arm and seed; only the horizon differs.",
        "",
        "| arm | horizon | seed | greedy % | greedy gain (± SE) | sampled % | sampled gain (± SE) | "
        "RL min | train successes / RL min | largest fall |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, arm in arms_.items():
        for s in arm["seeds"]:
            g, p = s["greedy_gain"], s["sampled_gain"]
            lines.append(
                f"| {name} | {horizon_label(arm)} | {s['seed']} | {s['greedy_after']:.1f} | "
                f"{g['gain']:+.1f} ± {g['se']:.1f} | {s['sampled_after']:.1f} | {p['gain']:+.1f} ± {p['se']:.1f} | "
                f"{s['rl_minutes']:.1f} | {s['successes_per_rl_minute']:.2f} | {s['largest_fall']:.2f} |"
            )
    base = arms_.get("scaling_inter")
    lines += [
        "",
        "| arm | seeds | mean greedy gain (± SE) | mean sampled gain (± SE) | ScalingInter - arm, greedy (± SE) | "
        "ScalingInter - arm, sampled (± SE) | mean RL min | greedy points / RL min | mean largest fall | peak GB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, arm in arms_.items():
        seeds = arm["seeds"]
        if base is not None and name != "scaling_inter" and len(base["seeds"]) == len(seeds):
            dg, ds = against(arm, base, "greedy_per_task"), against(arm, base, "sampled_per_task")
            vs = f"{dg['gain']:+.1f} ± {dg['se']:.1f} | {ds['gain']:+.1f} ± {ds['se']:.1f}"
        else:
            vs = " | "
        minutes = mean([s["rl_minutes"] for s in seeds])
        lines.append(
            f"| {name} | {len(seeds)} | {pm(arm['greedy_gain_of_mean'])} | {pm(arm['sampled_gain_of_mean'])} | {vs} | "
            f"{minutes:.1f} | {arm['mean_greedy_gain'] / minutes:+.2f} | "
            f"{mean([s['largest_fall'] for s in seeds]):.2f} | {arm['peak_rss_gb']} |"
        )
    lines += [
        "",
        f"Gains are in points over the SFT model on the same {results['test_tasks']} test tasks (greedy once "
        f"each, sampled {results['val_n']} times at temperature {results['val_temperature']}), with the standard error of the per-task differences; an arm's mean gain is its "
        "per-task success averaged over its seeds, against the SFT model's. ScalingInter - arm: the two arms' "
        "per-task success, each averaged over its seeds, paired over the test tasks (shown once both have the "
        "same number of seeds). RL min: the run's steps and its sampled test split after (wall minutes, 2 "
        "cores). Train successes / RL min: successful training episodes per RL minute. Largest fall: the "
        "largest drop of the 3-step moving mean of training success below its best so far (a collapse "
        "shows as a large one). Peak GB: the largest of the arm's launches (GNU time); a launch that "
        "found its phases done and read them back measures only that. "
        f"Shared phases (demonstrations, SFT, the SFT model's test scores): {results['shared_s'] / 60:.1f} min.",
        "",
    ]
    return "\n".join(lines)


def pm(gain: dict[str, float]) -> str:
    return f"{gain['gain']:+.1f} ± {gain['se']:.1f}"


def horizon_label(arm: dict[str, Any]) -> str:
    p = arm["horizon_params"]
    if arm["horizon"] == "fixed":
        return f"fixed {p['horizon']}"
    if arm["horizon"] == "scaling_inter":
        return f"{p['rounds']} every {p['every']}"
    return f"adaptive {p['rounds']} < {p['threshold']}"


def plot(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(19, 4), gridspec_kw={"width_ratios": [3, 3, 3, 2]})
    panels = [
        ("train_success", "training success"),
        ("turns", "mean turns"),
        ("horizon", "horizon (turn cap)"),
    ]
    for i, (name, arm) in enumerate(results["arms"].items()):
        color = f"C{i}"
        for j, key in enumerate(("greedy_gain_of_mean", "sampled_gain_of_mean")):
            g = arm[key]
            axes[3].bar(i + 0.4 * j - 0.2, g["gain"], 0.4, yerr=g["se"], color=color, alpha=1.0 - 0.5 * j)
        for ax, (key, label) in zip(axes, panels, strict=False):
            curves = [s[key] for s in arm["seeds"]]
            steps = range(1, min(len(c) for c in curves) + 1)
            cols = list(zip(*curves, strict=False))[: len(steps)]
            ax.plot(steps, [mean(c) for c in cols], color=color, label=f"{name} ({len(curves)} seeds)")
            if len(curves) > 1:
                ax.fill_between(
                    steps, [min(c) for c in cols], [max(c) for c in cols], color=color, alpha=0.15
                )
            ax.set_xlabel("training step")
            ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    axes[3].set_xticks(range(len(results["arms"])), list(results["arms"]), rotation=20, fontsize=8)
    axes[3].axhline(0, color="black", linewidth=0.6)
    axes[3].set_ylabel("test gain over SFT, points (greedy | sampled)")
    fig.suptitle(
        "SmolLM2-135M on BabyAI, GRPO from one SFT model: horizon arms (curves: mean of seeds, band: their range; "
        "bars: test gain of the seeds' mean, ± paired SE)"
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def write(results: dict[str, Any], out: Path, figure: Path) -> None:
    out.write_text(table(results))
    per_task = ("greedy_per_task", "sampled_per_task")
    slim = {
        **results,
        "arms": {
            name: {**arm, "seeds": [{k: v for k, v in s.items() if k not in per_task} for s in arm["seeds"]]}
            for name, arm in results["arms"].items()
        },
    }
    out.with_suffix(".json").write_text(json.dumps(slim, indent=2))
    plot(results, figure)


def main() -> None:
    from agentgym_train.real_demo import load_recipe

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs-dir", type=Path, default=Path("runs/horizon"))
    ap.add_argument(
        "--arms", default="scaling_inter,fixed_short,fixed_long,adaptive", help="to launch, in order"
    )
    ap.add_argument("--seeds", default="0,1", help="RL seeds, one at a time over every arm")
    ap.add_argument(
        "--from-runs", action="store_true", help="launch nothing: the table of the arms in --runs-dir"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "real_model_horizon.md")
    ap.add_argument("--figure", type=Path, default=ROOT / "docs" / "real_model_horizon.png")
    args = ap.parse_args()
    recipe = load_recipe()
    every = arms(recipe["rl"]["horizon_params"]["rounds"])
    launching = args.arms.split(",")
    if unknown := set(launching) - set(every):
        sys.exit(f"--arms: unknown {sorted(unknown)} (known: {', '.join(every)})")
    seeds = [int(s) for s in args.seeds.split(",")]
    first = args.runs_dir / "scaling_inter" / RUN
    if not args.from_runs:
        check_launch(args.runs_dir, launching, seeds, first)
    results: dict[str, Any] = {
        "command": "python bench/real_model_horizon.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        **{
            k: recipe["rl"][k]
            for k in ("steps", "tasks_per_step", "n", "val_n", "val_temperature", "val_max_turns")
        },
        "arms": {},
    }
    for k in range(0 if args.from_runs else len(seeds)):
        for name in launching:
            arm_dir = args.runs_dir / name
            if name != "scaling_inter":
                share_sft(first, arm_dir / RUN)
            print(f"arm {name}, seeds {seeds[: k + 1]}: the recipe in {arm_dir}", flush=True)
            launch(arm_dir, [*every[name], f"seeds={seeds[: k + 1]}"])
            collect(results, args.runs_dir, every)
            write(results, args.out, args.figure)
    collect(results, args.runs_dir, every)
    write(results, args.out, args.figure)
    print(table(results), flush=True)


def check_launch(runs_dir: Path, launching: list[str], seeds: list[int], first: Path) -> None:
    """Exit with the reason before anything runs: every arm but ``scaling_inter`` starts from its
    SFT model, and a recipe's seeds only grow (a launch with fewer would write a report without
    the others)."""
    if launching[0] != "scaling_inter" and not (first / "sft" / "config.json").is_file():
        sys.exit(
            f"--arms: scaling_inter makes the SFT model every arm starts from; launch it first ({first})"
        )
    for name in launching:
        report = runs_dir / name / RUN / "recipe_report.json"
        done = [s["seed"] for s in json.loads(report.read_text())["seeds"]] if report.is_file() else []
        if seeds[: len(done)] != done:
            sys.exit(f"--seeds {seeds}: arm {name} has seeds {done}; give those first, then the new ones")


def collect(results: dict[str, Any], runs_dir: Path, every: dict[str, list[str]]) -> None:
    """Every arm in ``runs_dir`` with a finished recipe, in the arms' order."""
    first = runs_dir / "scaling_inter" / RUN
    report = json.loads((first / "recipe_report.json").read_text())
    phases = phase_seconds({**report, "run": str(first)})
    results["shared_s"] = sum(v for k, v in phases.items() if not k.startswith("RL seed"))
    results["sft_greedy"], results["sft_sampled"] = report["sft_greedy"], report["sft_sampled"]
    results["test_tasks"] = report["seeds"][0]["greedy_gain"]["tasks"]
    results["arms"] = {
        name: arm_figures(runs_dir / name, launch(runs_dir / name, [], from_runs=True))
        for name in every
        if (runs_dir / name / RUN / "recipe_report.json").is_file()
    }


if __name__ == "__main__":
    main()
