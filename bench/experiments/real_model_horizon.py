"""Benchmark: ScalingInter-RL against fixed horizons (and the adaptive schedule), on a packaged
recipe (SmolLM2 on BabyAI by default, or the tiny model's demo), from one SFT model, per RL seed.

    python -m bench.experiments.real_model_horizon [--demo smollm2|tiny|smollm2-textcraft]
        [--steps N] [--rounds 4,8,12] [--runs-dir DIR] [--arms scaling_inter,fixed_short,fixed_long]
        [--seeds 0,1] [--from-runs] [--out bench/results/horizon_DEMO_Nsteps.md]
        [--figure docs/horizon_DEMO_Nsteps.png]

Arms, all GRPO with the recipe's step settings (tasks per step, samples, learning rate) for
``--steps`` steps (the recipe's by default); only the horizon differs, from ``--rounds`` (the
recipe's by default):

- ``scaling_inter``: the rounds in stages of equal length (``steps / len(rounds)`` each: the
  steps must divide evenly);
- ``fixed_short``: the first round's horizon at every step;
- ``fixed_long``: the last round's;
- ``adaptive`` (launched only when named): the rounds, moving on once the step's truncation rate
  falls below ``ADAPTIVE_THRESHOLD`` after at least 2 steps at a horizon.

Every arm tests at the last round's horizon, so that all are scored alike.

At the paper's proportions (its rounds 1 : 2 : 3, BabyAI's ``[6, 13, 20]``, each stage 100 steps):

    python -m bench.experiments.real_model_horizon --demo tiny --steps 150 --rounds 4,8,12 --seeds 0,1,2
    python -m bench.experiments.real_model_horizon --demo smollm2 --steps 36 --rounds 4,8,12 --seeds 0,1

12 turns, not 20: the recipes' 2,048-token context holds about 12 BabyAI turns. Over 200 expert
demonstrations an episode costs 295 tokens of prompt and 120 a turn with SmolLM2's tokenizer (368
and 127 with the tiny model's), the expert replying in 8 tokens; a model's replies run up to 32
(24 for the tiny model), so 12 turns fill 1,740-2,080 tokens (an episode that fills the context
ends there, marked ``context_full``). Each arm is the
packaged recipe (``agentgym train --demo DEMO``) in ``DIR/ARM/`` under GNU
time; the first arm launched makes the demonstrations, the SFT model and its test scores, and
every other arm starts from those files (``bench/experiments/real_model_gigpo.py``'s sharing), so that every
gain is against one SFT model on the same test episodes. Seeds run one at a time over every arm
(seed 0 of each arm, then seed 1 of each), so a stopped run leaves whole seeds; a later launch
resumes (finished phases are read back, an unfinished RL run resumes from its checkpoint). After
every arm, the table, the JSON and the figure are written.

The JSON beside ``--out`` is the record a later session resumes from when ``DIR`` is gone (run
directories hold gigabytes of checkpoints; the JSON holds every seed's per-task test success): its
arms' seeds are kept and only the seeds it lacks are launched, from an SFT model made again in
``DIR``. Its test success must equal the recorded SFT model's on every test task (SFT is
deterministic on one machine type), or nothing is merged.

Per arm and seed: the training success and mean turns per step, RL minutes (steps, and the
sampled test split after), training successes per RL minute and per CPU minute of the steps
(the trainer's ``cpu_step``), greedy and sampled test success after with gains over the SFT
model (paired SE over test tasks), and a stability figure: the largest fall of the moving mean of
training success (over a tenth of the steps, 3 at least) below its best so far. Per arm, the
seeds' per-task success against ScalingInter's, paired over the test tasks. The figure: training
success (its moving mean) and mean turns per step, the mean of the seeds as a line, the seeds'
range as a band.
A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.common.recipe_runs import (
    bench_launches,
    launch,
    launch_list,
    phase_seconds,
    report_seeds,
    rl_seconds,
    share_sft,
)

ROOT = Path(__file__).resolve().parents[2]
#: Episodes in BabyAI end by success or by the horizon, so the truncation rate is 1 - success:
#: the schedule's default (0.2) would keep the SFT model (~0.3 success at 4 turns) at the first
#: round for good. 0.75 moves on once a quarter of a step's episodes finish within the horizon.
ADAPTIVE_THRESHOLD = 0.75


ARMS = ("scaling_inter", "fixed_short", "fixed_long", "adaptive")
#: What a record must share with a launch that resumes it (and an arm's run with the launch).
SETTINGS = (
    "model",
    "envs",
    "steps",
    "rounds",
    "tasks_per_step",
    "n",
    "val_n",
    "val_temperature",
    "val_max_turns",
)


def arms(rounds: list[int], every: int) -> dict[str, list[str]]:
    """Each arm's recipe overrides, from the ScalingInter rounds and the length of a stage."""
    return {
        "scaling_inter": ["horizon=scaling_inter", f"horizon_params={{rounds: {rounds}, every: {every}}}"],
        "fixed_short": ["horizon=fixed", f"horizon_params={{horizon: {rounds[0]}}}"],
        "fixed_long": ["horizon=fixed", f"horizon_params={{horizon: {rounds[-1]}}}"],
        "adaptive": [
            "horizon=adaptive",
            f"horizon_params={{rounds: {rounds}, threshold: {ADAPTIVE_THRESHOLD}, min_steps: 2}}",
        ],
    }


def encode(per_task: dict[tuple[str, int], float]) -> dict[str, float]:
    """Per-task success as JSON: ``"env:task_id"`` keys."""
    return {f"{env}:{tid}": v for (env, tid), v in sorted(per_task.items())}


def decode(per_task: dict[str, float]) -> dict[tuple[str, int], float]:
    return {(k.rsplit(":", 1)[0], int(k.rsplit(":", 1)[1])): v for k, v in per_task.items()}


def window(steps: int) -> int:
    """The moving mean's steps: a tenth of the run, 3 at least (a 12-step run's 3)."""
    return max(3, steps // 10)


def moving(xs: list[float], k: int) -> list[float]:
    return [statistics.fmean(xs[max(0, i - k + 1) : i + 1]) for i in range(len(xs))]


def largest_fall(xs: list[float], k: int) -> float:
    """The largest fall of the ``k``-step moving mean below its best so far (0: it never fell)."""
    smooth, best, fall = moving(xs, k), -math.inf, 0.0
    for x in smooth:
        best = max(best, x)
        fall = max(fall, best - x)
    return fall


def seed_figures(run: Path, seed_result: dict[str, Any], rl: dict[str, Any]) -> dict[str, Any]:
    from agentgym_train.recipes.report import per_task
    from agentgym_train.tracking.plots import read_metrics

    rl_run = run / f"rl-seed{seed_result['seed']}"
    rows = read_metrics(rl_run)
    if not rows:
        sys.exit(f"{rl_run}: no metrics.jsonl")
    success = [r["success"] for r in rows]
    minutes = rl_seconds(rl_run) / 60
    episodes = rl["tasks_per_step"] * rl["n"]
    # CPU seconds a step: what runs of this code record (``cpu_step``); none in older runs
    cpu = sum(r["cpu_step"] for r in rows) / 60 if all("cpu_step" in r for r in rows) else None
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
        "cpu_minutes": round(cpu, 2) if cpu else None,
        "successes_per_cpu_minute": round(sum(success) * episodes / cpu, 2) if cpu else None,
        "largest_fall": round(largest_fall(success, window(len(rows))), 3),
        # the RL run's own peak: a launch that found its phases done and only read them back
        # measures just that
        "peak_rss_gb": seed_result["peak_rss_gb"],
        "greedy_per_task": per_task(run / f"rl-seed{seed_result['seed']}_greedy.episodes.jsonl"),
        "sampled_per_task": per_task(val),
    }


def arm_figures(seeds: list[dict[str, Any]], rl: dict[str, Any], sft: dict[str, Any]) -> dict[str, Any]:
    """An arm's figures from its seeds (each with its per-task test success) and the SFT model's."""
    from agentgym_train.recipes.report import paired_gain

    arm = {"seeds": sorted(seeds, key=lambda s: s["seed"])}
    return {
        # the seeds' mean model against the SFT model, paired over the test tasks
        "greedy_gain_of_mean": paired_gain(sft["greedy_per_task"], seeds_mean(arm, "greedy_per_task")),
        "sampled_gain_of_mean": paired_gain(sft["sampled_per_task"], seeds_mean(arm, "sampled_per_task")),
        "horizon": rl["horizon"],
        "horizon_params": rl["horizon_params"],
        "seeds": arm["seeds"],
        "mean_greedy_gain": round(mean([s["greedy_gain"]["gain"] for s in seeds]), 2),
        "mean_sampled_gain": round(mean([s["sampled_gain"]["gain"] for s in seeds]), 2),
        "peak_rss_gb": max(s["peak_rss_gb"] for s in seeds),
    }


def seeds_mean(arm: dict[str, Any], key: str) -> dict[tuple[str, int], float]:
    """Per test task, the success averaged over the arm's seeds."""
    tasks = set.intersection(*(set(s[key]) for s in arm["seeds"]))
    return {t: statistics.fmean(s[key][t] for s in arm["seeds"]) for t in tasks}


def against(arm: dict[str, Any], base: dict[str, Any], key: str) -> dict[str, float]:
    """``base`` minus ``arm`` (both averaged over their seeds), paired over the test tasks."""
    from agentgym_train.recipes.report import paired_gain

    return paired_gain(seeds_mean(arm, key), seeds_mean(base, key))


def mean(xs: list[float]) -> float:
    return statistics.fmean(xs)


def table(results: dict[str, Any]) -> str:
    arms_ = results["arms"]
    lines = [
        "# ScalingInter-RL against fixed horizons (`bench/experiments/real_model_horizon.py`)",
        "",
        f"Launches that wrote it: {launch_list(results['launches'])}.",
        "",
        f"Subject: {subject(results)}, one SFT model for every arm: greedy {results['sft']['greedy']:.1f}%, sampled {results['sft']['sampled']:.1f}% on the test split "
        f"({results['val_max_turns']} turns). GRPO, {results['steps']} steps x {results['tasks_per_step']} tasks x {results['n']} samples "
        "per arm and seed; only the horizon differs.",
        "",
        "| arm | horizon | seed | greedy % | greedy gain (± SE) | sampled % | sampled gain (± SE) | "
        "mean turns | RL min | train successes / RL min | / CPU min | largest fall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, arm in arms_.items():
        for s in arm["seeds"]:
            g, p = s["greedy_gain"], s["sampled_gain"]
            lines.append(
                f"| {name} | {horizon_label(arm)} | {s['seed']} | {s['greedy_after']:.1f} | "
                f"{g['gain']:+.1f} ± {g['se']:.1f} | {s['sampled_after']:.1f} | {p['gain']:+.1f} ± {p['se']:.1f} | "
                f"{mean(s['turns']):.2f} | {s['rl_minutes']:.1f} | {s['successes_per_rl_minute']:.2f} | "
                f"{per_cpu(s)} | {s['largest_fall']:.2f} |"
            )
    base = arms_.get("scaling_inter")
    lines += [
        "",
        "| arm | seeds | mean greedy gain (± SE) | mean sampled gain (± SE) | ScalingInter - arm, greedy (± SE) | "
        "ScalingInter - arm, sampled (± SE) | mean RL min | greedy points / RL min | mean largest fall (± SE over seeds) | peak GB |",
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
            f"{spread([s['largest_fall'] for s in seeds])} | {arm['peak_rss_gb']} |"
        )
    lines += [
        "",
        f"Gains are in points over the SFT model on the same {len(results['sft']['greedy_per_task'])} test tasks (greedy once "
        f"each, sampled {results['val_n']} times at temperature {results['val_temperature']}), with the standard error of the per-task differences; an arm's mean gain is its "
        "per-task success averaged over its seeds, against the SFT model's. ScalingInter - arm: the two arms' "
        "per-task success, each averaged over its seeds, paired over the test tasks (shown once both have the "
        "same number of seeds). RL min: the run's steps and its sampled test split after (wall minutes, 2 "
        "cores). Train successes / RL min: successful training episodes per RL minute; / CPU min: per "
        "CPU minute of the steps (the trainer process's, every thread; blank for runs from before it was "
        f"recorded). Largest fall: the largest drop of the {results['window']}-step moving mean of training "
        "success below its best so far (a collapse shows as a large one). Peak GB: the largest peak memory the arm's RL runs reported. "
        f"Shared phases (demonstrations, SFT, the SFT model's test scores): {results['sft']['shared_s'] / 60:.1f} min.",
        "",
    ]
    return "\n".join(lines)


def subject(results: dict[str, Any]) -> str:
    """The model and env(s) an experiment trained, as the table and the figure name them."""
    model = {"smollm2": "SmolLM2-135M-Instruct", "tiny": "the tiny model"}.get(
        results["model"], results["model"]
    )
    return f"{model} on {', '.join(results['envs'])}"


def per_cpu(seed: dict[str, Any]) -> str:
    return "" if seed.get("successes_per_cpu_minute") is None else f"{seed['successes_per_cpu_minute']:.2f}"


def spread(xs: list[float]) -> str:
    """The mean ± its standard error over seeds (the mean alone for one seed)."""
    if len(xs) < 2:
        return f"{mean(xs):.2f}"
    return f"{mean(xs):.2f} ± {statistics.stdev(xs) / math.sqrt(len(xs)):.2f}"


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
        ("train_success", f"training success ({results['window']}-step moving mean)"),
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
            if key == "train_success":
                curves = [moving(c, results["window"]) for c in curves]
            steps = range(1, min(len(c) for c in curves) + 1)
            cols = list(zip(*curves, strict=False))[: len(steps)]
            seeds = f"{len(curves)} seed" + ("s" if len(curves) > 1 else "")
            ax.plot(steps, [mean(c) for c in cols], color=color, label=f"{name} ({seeds})")
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
        f"{subject(results)}, GRPO from one SFT model: horizon arms (curves: mean of seeds, band: their range; "
        "bars: test gain of the seeds' mean, ± paired SE)"
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def write(results: dict[str, Any], out: Path, figure: Path) -> None:
    """The table, the JSON record (per-task successes encoded) and the figure."""
    out.write_text(table(results))
    per_task = ("greedy_per_task", "sampled_per_task")

    def coded(d: dict[str, Any]) -> dict[str, Any]:
        return {k: encode(v) if k in per_task else v for k, v in d.items()}

    record = {
        **results,
        "sft": coded(results["sft"]),
        "arms": {
            name: {**arm, "seeds": [coded(s) for s in arm["seeds"]]} for name, arm in results["arms"].items()
        },
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=1))
    plot(results, figure)


def recorded(path: Path, results: dict[str, Any]) -> dict[str, Any] | None:
    """The results a launch resumes from (per-task successes decoded); None when there are none,
    or they come from before this script kept per-task successes. Exits when they were made with
    other steps or rounds than ``results`` says."""
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    if "sft" not in record:
        print(f"{path}: no per-task successes recorded; starting a new record", flush=True)
        return None
    for key in SETTINGS:
        if record.get(key) != results[key]:
            sys.exit(
                f"{path}: recorded with {key} {record.get(key)}, not {results[key]}; give another --out "
                "(a record made before this script kept its settings cannot be resumed)"
            )

    def decoded(d: dict[str, Any]) -> dict[str, Any]:
        return {k: decode(v) if k.endswith("_per_task") else v for k, v in d.items()}

    record["sft"] = decoded(record["sft"])
    for arm in record["arms"].values():
        arm["seeds"] = [decoded(s) for s in arm["seeds"]]
    return record


def sft_maker(runs_dir: Path, run: Path) -> Path | None:
    """The arm run that made the SFT model the others share (theirs is a link to it)."""
    for arm in sorted(runs_dir.glob(f"*/{run}")):
        if (arm / "sft").is_dir() and not (arm / "sft").is_symlink():
            return arm
    return None


def main() -> None:
    from agentgym_train.recipes import recipe_path
    from agentgym_train.recipes.runner import load_recipe, rl_config
    from agentgym_train.rl.config import ConfigError

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", default="smollm2", help="the packaged recipe every arm runs (default: smollm2)")
    ap.add_argument("--steps", type=int, help="GRPO steps per arm (default: the recipe's)")
    ap.add_argument(
        "--rounds", help="the horizons, comma-separated, e.g. 6,12,18 (default: the recipe's rounds)"
    )
    ap.add_argument("--runs-dir", type=Path, help="where the arms run (default: runs/horizon_DEMO_Nsteps)")
    ap.add_argument(
        "--arms", default="scaling_inter,fixed_short,fixed_long", help="to launch, in order (or adaptive)"
    )
    ap.add_argument("--seeds", default="0,1", help="RL seeds, one at a time over every arm")
    ap.add_argument(
        "--from-runs",
        action="store_true",
        help="launch nothing: the table of what is recorded and in --runs-dir",
    )
    ap.add_argument(
        "--out",
        type=Path,
        help="the table (default: bench/results/horizon_DEMO_Nsteps.md); the JSON beside it is the "
        "record a launch resumes from",
    )
    ap.add_argument("--figure", type=Path, help="default: docs/horizon_DEMO_Nsteps.png")
    args = ap.parse_args()
    try:
        recipe = load_recipe(recipe_path(args.demo))
    except ConfigError as e:
        sys.exit(str(e))
    steps = args.steps or recipe["rl"]["steps"]
    rounds = (
        [int(r) for r in args.rounds.split(",")] if args.rounds else recipe["rl"]["horizon_params"]["rounds"]
    )
    if steps % len(rounds):
        sys.exit(f"--steps {steps}: not {len(rounds)} stages of equal length (one per round)")
    stem = f"horizon_{args.demo}_{steps}steps"
    runs_dir = args.runs_dir or Path("runs") / stem
    out = args.out or ROOT / "bench" / "results" / f"{stem}.md"
    figure = args.figure or ROOT / "docs" / f"{stem}.png"
    every = arms(rounds, steps // len(rounds))
    launching = args.arms.split(",")
    if unknown := set(launching) - set(every):
        sys.exit(f"--arms: unknown {sorted(unknown)} (known: {', '.join(every)})")
    seeds = [int(s) for s in args.seeds.split(",")]
    cfg = rl_config(recipe, runs_dir, runs_dir, 0)  # the recipe's RL settings, defaults filled in
    # every arm: the steps, a test at the last round's horizon, no learning curve (its greedy
    # points cost test episodes the training curves do not need)
    common = [f"steps={steps}", f"val_max_turns={rounds[-1]}", "curve_every=0"]
    run_path = Path("runs") / f"demo-{args.demo}"
    results: dict[str, Any] = {
        "model": recipe["model"],
        "envs": recipe["envs"],
        "steps": steps,
        "rounds": rounds,
        "window": window(steps),
        **{k: getattr(cfg, k) for k in ("tasks_per_step", "n", "val_n", "val_temperature")},
        "val_max_turns": rounds[-1],
        "arms": {},
    }
    record = recorded(out.with_suffix(".json"), results)
    # a record from before launches were kept names its last one only
    earlier = (record.get("launches") or [{k: record[k] for k in ("command", "date")}]) if record else None
    results["launches"] = bench_launches(
        "bench.experiments.real_model_horizon", earlier, read_back=args.from_runs
    )
    for k in range(0 if args.from_runs else len(seeds)):
        for name in launching:
            run = runs_dir / name / run_path
            done = report_seeds(run)
            have = (
                {s["seed"] for s in record["arms"][name]["seeds"]}
                if record and name in record["arms"]
                else set()
            )
            new = [s for s in seeds[: k + 1] if s not in have and s not in done]
            if not new:
                continue
            maker = sft_maker(runs_dir, run_path)
            if maker is not None and maker != run:
                share_sft(maker, run)
            print(f"arm {name}, seeds {done + new}: the recipe in {run.parents[1]}", flush=True)
            launch(run.parents[1], [*common, *every[name], f"seeds={done + new}"], demo=args.demo)
            record = collect(results, runs_dir, run_path, record)
            write(results, out, figure)
    collect(results, runs_dir, run_path, record)
    write(results, out, figure)
    print(table(results), flush=True)


def collect(
    results: dict[str, Any], runs_dir: Path, run_path: Path, record: dict[str, Any] | None
) -> dict[str, Any]:
    """Every arm's seeds, recorded or in ``runs_dir`` (a run's seed replaces a recorded one), into
    ``results``, which it returns: the record the next launch resumes from."""
    from agentgym_train.recipes.report import per_task

    maker = sft_maker(runs_dir, run_path)
    if maker is not None and (maker / "recipe_report.json").is_file():
        report = json.loads((maker / "recipe_report.json").read_text())
        phases = phase_seconds({**report, "run": str(maker)})
        sft = {
            "greedy": report["sft_greedy"],
            "sampled": report["sft_sampled"],
            "shared_s": sum(v for k, v in phases.items() if not k.startswith("RL seed")),
            "greedy_per_task": per_task(maker / "sft_greedy.episodes.jsonl"),
            "sampled_per_task": per_task(maker / "sft_sampled.episodes.jsonl"),
        }
        if record is not None:
            check_same_sft(maker, sft, record["sft"])
    elif record is not None:
        sft = record["sft"]
    else:
        sys.exit(f"{runs_dir}: no finished recipe run in it, and no results recorded")
    results["sft"] = sft
    results["arms"] = {}
    for name in ARMS:
        old = record["arms"].get(name) if record else None
        seeds, rl = ({s["seed"]: s for s in old["seeds"]}, old) if old else ({}, None)
        run = runs_dir / name / run_path
        if (run / "recipe_report.json").is_file():
            report = json.loads((run / "recipe_report.json").read_text())
            rl = report["recipe"]["rl"]
            made = {"steps": rl["steps"], "val_max_turns": rl["val_max_turns"]}
            if made != {k: results[k] for k in made}:
                sys.exit(f"{run}: made with {made}, not this launch's settings; give another --runs-dir")
            seeds |= {s["seed"]: seed_figures(run, s, rl) for s in report["seeds"]}
        if seeds:
            results["arms"][name] = arm_figures(list(seeds.values()), rl, sft)
    return results


def check_same_sft(maker: Path, sft: dict[str, Any], old: dict[str, Any]) -> None:
    """Exit unless the SFT model in ``maker`` scores as the recorded one on every test task."""
    for key in ("greedy_per_task", "sampled_per_task"):
        differ = [t for t in old[key].keys() | sft[key].keys() if old[key].get(t) != sft[key].get(t)]
        if differ:
            sys.exit(
                f"{maker}: its SFT model's {key.split('_')[0]} test success differs from the recorded one's "
                f"on {len(differ)} of {len(old[key])} tasks; the recorded seeds cannot be compared with new "
                "ones (give another --out to start a new record)"
            )


if __name__ == "__main__":
    main()
