"""Launching a real-model recipe in a process of its own and reading back what it wrote: what the
real-model experiments (``bench/experiments/``) and the speed benchmarks share."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common.equal_work import work_of_run
from bench.common.procs import machine, timed


def run_figures(run: Path) -> dict[str, Any]:
    """Mean per-step figures from the run's metrics, its validation seconds and its work."""
    from agentgym_train.tracking.plots import read_metrics

    rows = read_metrics(run)
    report = json.loads((run / "report.json").read_text())

    def mean(key: str) -> float:
        return round(sum(r.get(key, 0.0) for r in rows) / len(rows), 2)

    return derive(
        {
            "steps": len(rows),
            "generate_s": mean("time_generate"),
            "update_s": mean("time_train"),
            "sync_s": mean("time_sync"),
            "step_s": mean("time_step"),
            "tokens_per_s": mean("tokens_per_s"),
            "validation_s": round(report["wall_s"] - sum(r["time_step"] for r in rows), 1),
            "success_after": report["after"],
            **work_of_run(run),
        }
    )


def derive(r: dict[str, Any]) -> dict[str, Any]:
    """A run's seconds per 1,000 sampled (generation) and trained (update) tokens: the costs that
    stay comparable when the two samplers drew different numbers of tokens."""
    if r.get("steps"):
        r["generate_s_per_1k"] = round(1000 * r["generate_s"] * r["steps"] / max(r["sampled_tokens"], 1), 2)
        r["update_s_per_1k"] = round(1000 * r["update_s"] * r["steps"] / max(r["trained_tokens"], 1), 2)
    return r


def run_recipe(
    overrides: list[str],
    runs_dir: Path,
    log: Path,
    demo: str = "smollm2",
    on_sample: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    cmd = [str(Path(sys.executable).parent / "agentgym"), "train", "--demo", demo, *overrides]
    return timed(cmd, dict(os.environ), log, cwd=runs_dir, on_sample=on_sample)


def launch(
    arm_dir: Path, overrides: list[str], *, from_runs: bool = False, demo: str = "smollm2"
) -> dict[str, Any]:
    """The recipe ``demo`` once more in ``arm_dir`` (it skips what an earlier launch finished, so a
    seed list grown by a later launch adds only the new seeds), every launch's process figures kept
    in ``recipe_launches.json``; ``from_runs``: launch nothing, read those back (a run directory
    from before that record: its ``recipe_process.json``). A launch's record is written while it
    runs (``status`` null), so one killed midway keeps its figures so far; the recipe's next launch
    goes on from its finished phases. Returns the peak over the launches that ended well or were
    cut short, their count and the last one's seconds; exits with the log's name if this launch
    failed."""
    arm_dir.mkdir(parents=True, exist_ok=True)
    record, older = arm_dir / "recipe_launches.json", arm_dir / "recipe_process.json"
    procs = json.loads(record.read_text()) if record.exists() else []
    if not procs and older.exists():
        procs = [json.loads(older.read_text())]
    log = arm_dir / f"recipe-{len(procs) - from_runs}.log"
    if not from_runs:
        last = [0.0]

        def so_far(figures: dict[str, Any]) -> None:  # every 30 s: a killed launch keeps its peak
            if figures["wall_s"] - last[0] >= 30:
                last[0] = figures["wall_s"]
                record.write_text(json.dumps([*procs, figures], indent=1))

        procs.append(run_recipe(overrides, arm_dir, log, demo, on_sample=so_far))
        record.write_text(json.dumps(procs, indent=1))
        if procs[-1]["status"]:
            sys.exit(f"{arm_dir}: the recipe failed (status {procs[-1]['status']}); its log: {log}")
    ok = [p for p in procs if not p["status"]]  # 0, or None: cut short (its phases were kept)
    if not ok:
        sys.exit(f"{arm_dir}: no launch of the recipe ended well; the last log: {log}")
    return {
        "peak_rss_gb": max(p["peak_rss_gb"] or 0 for p in ok),
        "peak_tree_gb": max(p.get("peak_tree_gb") or 0 for p in ok),
        "launches": len(procs),
        "wall_s": procs[-1]["wall_s"],
    }


def bench_launches(
    script: str, earlier: list[dict[str, str]] | None = None, *, read_back: bool = False
) -> list[dict[str, str]]:
    """The launches of a resumable benchmark that wrote its record, oldest first: ``earlier`` (what
    the record kept) and this process's command line, date and machine. A table written over
    several launches names each of them, not only the last (which may have added one arm), and
    where each ran: wall times differ from machine to machine. ``read_back``: this launch ran
    nothing (``--from-runs``), so the earlier ones stand for it where there are any."""
    if read_back and earlier:
        return earlier
    this = {
        "command": f"python -m {script} " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
    }
    return [*(x for x in earlier or [] if x["command"] != this["command"]), this]


def launch_list(launches: list[dict[str, str]]) -> str:
    """The launches as a table's header names them."""
    return "; ".join(
        f"`{x['command']}` ({x['date']}, {x.get('machine', 'machine not recorded')})" for x in launches
    )


def report_seeds(run: Path) -> list[int]:
    """The RL seeds a recipe run's report holds (none before it has one)."""
    report = run / "recipe_report.json"
    return [s["seed"] for s in json.loads(report.read_text())["seeds"]] if report.is_file() else []


def phase_seconds(result: dict[str, Any]) -> dict[str, float]:
    """Seconds of each phase, read from what each phase wrote (so that a phase done by an earlier
    launch of the same run still counts its own time)."""
    run, times = Path(result["run"]), result["times_s"]

    def wall(name: str) -> float:  # the envs are evaluated one after the other
        return sum(r["wall_s"] for r in json.loads((run / name).read_text())["envs"].values())

    out = {
        "model (fetch and import, or the cached import)": times["model_s"],
        "expert demonstrations": times["collect_s"],
        "SFT": result["sft"]["wall_s"],
        "SFT model, test split greedy": wall("sft_greedy.json"),
        "SFT model, test split sampled": wall("sft_sampled.json"),
    }
    for s in result["seeds"]:
        k = s["seed"]
        out[f"RL seed {k}: GRPO steps and the sampled test split after"] = rl_seconds(run / f"rl-seed{k}")
        out[f"RL seed {k}: test split greedy"] = wall(f"rl-seed{k}_greedy.json")
    return out


def rl_seconds(rl_run: Path) -> float:
    """An RL run's own seconds, from what it wrote: its steps and its validations (a launch that
    found the run finished, and only read it back, adds nothing)."""
    from agentgym_train.tracking.plots import read_metrics

    steps = read_metrics(rl_run)
    report = json.loads((rl_run / "report.json").read_text())
    vals = [e["wall_s"] for v in report["validation"] for e in v["envs"].values()]
    return round(sum(r["time_step"] for r in steps) + sum(vals), 1)


RUN = Path("runs") / "demo-smollm2"


#: What the first arm made that every other arm starts from.
SHARED = (
    "demos.jsonl",
    "sft_greedy.json",
    "sft_greedy.episodes.jsonl",
    "sft_sampled.json",
    "sft_sampled.episodes.jsonl",
)


def share_sft(first: Path, arm: Path) -> None:
    """Start ``arm``'s recipe from ``first``'s SFT model and its test scores."""
    arm.mkdir(parents=True, exist_ok=True)
    if not (arm / "sft").exists():
        (arm / "sft").symlink_to((first / "sft").resolve())
    for name in SHARED:
        if (first / name).exists() and not (arm / name).exists():
            shutil.copy(first / name, arm / name)
