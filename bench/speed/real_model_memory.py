"""Benchmark: peak memory and time of SFT and of a GRPO step on a real model (SmolLM2-135M-Instruct),
the code before this project could train real models against today's, in one run.

    python -m bench.speed.real_model_memory [--model smollm2] [--before REF] [--only sft,grpo]
        [--tolerance 0.1] [--sft-tolerance 0] [--out bench/results/real_model_memory.md]

``--before REF`` (default ``f20ad89``, the last commit before the real-model work) is checked out
into a temporary git worktree and run from there (``PYTHONPATH`` over its packages' sources), with
the same commands, data and model directory. Each command runs in a process of its own under
GNU time, whose maximum resident set size is the figure (the kernel's high-water mark).

- SFT: ``agentgym sft`` of the model on 8 BabyAI expert episodes (2 steps of 4 episodes); before:
  the old command's defaults (float32, no checkpointing, 8,192-token micro-batches); after: the new
  defaults (float32 weights, gradient checkpointing, 2,048-token micro-batches, chunked log-probs).
- GRPO: one step of ``agentgym train model=... lora=true dtype=bfloat16 steps=1 tasks_per_step=4
  n=4`` (16 episodes, 6 turns) as the issue's user ran it; after: the same with
  ``gradient_checkpointing=true``. Generation and update seconds come from the run's metrics.

Each side's work is read from what its run wrote: SFT, its ``sft_summary.json`` (examples, optimizer
steps, trained tokens: assistant tokens per epoch times epochs); GRPO, its episode files
(``bench/common/equal_work.py``: episodes, turns, sampled and trained tokens, errors); a side whose
command failed did no known work (``differences`` reads its exit ``status``). Prints one JSON
object and ``ratio`` lines (after/before peak memory), each only when both sides did the same work: SFT exactly (``--sft-tolerance``, default 0: the same
episodes, deterministic), GRPO within ``--tolerance`` (default 0.10: both sample at temperature 1),
else ``no ratio ...: not the same work (...)``; writes a markdown table with the work columns.
A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common.equal_work import WORK_KEYS, differences, ratio_line, work_of_run
from bench.common.procs import code_env, timed

ROOT = Path(__file__).resolve().parents[2]


#: Peak RSS budgets of today's code (GB): SFT of SmolLM2 fits a 4 GB machine's share, as does a
#: GRPO step with LoRA and gradient checkpointing.
BUDGET_GB = {"sft": 4.0, "grpo": 4.0}


def sft_cmd(model: Path, demos: Path, out: Path, before: bool) -> list[str]:
    cmd = [sys.executable, "-m", "agentgym", "sft", "--model", str(model), "--data", str(demos),
           "--output", str(out), "--epochs", "1", "--batch-size", "4", "--lr", "1e-5"]  # fmt: skip
    return cmd


def grpo_cmd(model: Path, runs: Path, before: bool) -> list[str]:
    cmd = [sys.executable, "-m", "agentgym", "train", f"model={model}", f"runs_dir={runs}", "name=grpo",
           "lora=true", "dtype=bfloat16", "steps=1", "tasks_per_step=4", "n=4", "val_limit=1", "val_n=1",
           "val_max_turns=1"]  # fmt: skip
    return cmd if before else [*cmd, "gradient_checkpointing=true"]


#: The work compared between before and after, per part.
SFT_WORK = ("examples", "optimizer_steps", "trained_tokens")
PART_WORK = {"sft": SFT_WORK, "grpo": WORK_KEYS}


def grpo_times(runs: Path) -> dict[str, Any]:
    lines = (runs / "grpo" / "metrics.jsonl").read_text().splitlines()
    m = json.loads(lines[-1])
    out = {k: m.get(k) for k in ("time_generate", "time_train", "time_step", "success")}
    out["metrics_trained_tokens"] = m.get("trained_tokens")  # the trainer's own count, for reference
    return {**out, **work_of_run(runs / "grpo")}


def sft_work(out: Path) -> dict[str, Any]:
    """The work of an SFT run, from the summary it wrote."""
    s = json.loads((out / "sft_summary.json").read_text())
    epochs = int(s.get("epochs") or 1)
    return {
        "examples": s.get("examples"),
        "optimizer_steps": s.get("steps"),
        "trained_tokens": int(s.get("trained_tokens_per_epoch") or 0) * epochs,
        "errors": 0,
    }


def not_equal(results: dict[str, Any], part: str, tolerance: float) -> list[str]:
    """Why ``part``'s before and after are not the same work (empty when they are)."""
    sides = [results.get(f"{part}/{label}") for label in ("before", "after")]
    if any(r is None for r in sides):
        return ["only one side ran"]
    return differences(sides[0], sides[1], tolerance, names=("before", "after"), keys=PART_WORK[part])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--before", default="f20ad89")
    ap.add_argument("--only", default="sft,grpo")
    ap.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="relative difference allowed in GRPO's work (default: 0.10)",
    )
    ap.add_argument(
        "--sft-tolerance",
        type=float,
        default=0.0,
        help="relative difference allowed in SFT's work (default: 0)",
    )
    ap.add_argument("--out", default="bench/results/real_model_memory.md")
    args = ap.parse_args()
    from agentgym_train.models.gguf import resolve_model

    model = resolve_model(args.model)
    results: dict[str, Any] = {"model": str(model), "before": args.before}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        old = tmp / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.before],
                       check=True, capture_output=True)  # fmt: skip
        try:
            envs = {"before": code_env(old), "after": code_env(ROOT)}
            demos = tmp / "demos.jsonl"
            subprocess.run([sys.executable, "-m", "agentgym", "collect", "--env", "babyai", "--policy", "scripted",
                            "--limit", "8", "-o", str(demos)], check=True, env=envs["after"], capture_output=True)  # fmt: skip
            for part in args.only.split(","):
                for label in ("before", "after"):
                    log = tmp / f"{part}-{label}.log"
                    if part == "sft":
                        r = timed(
                            sft_cmd(model, demos, tmp / f"sft-{label}", label == "before"), envs[label], log
                        )
                        if r["status"] == 0:
                            r.update(sft_work(tmp / f"sft-{label}"))
                    else:
                        runs = tmp / f"runs-{label}"
                        r = timed(grpo_cmd(model, runs, label == "before"), envs[label], log)
                        if r["status"] == 0:
                            r.update(grpo_times(runs))
                    results[f"{part}/{label}"] = r
                    print(part, label, json.dumps(r), flush=True)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True
            )
    tolerance = {"sft": args.sft_tolerance, "grpo": args.tolerance}
    results["tolerance"] = tolerance
    results["not_equal"] = {part: not_equal(results, part, tolerance[part]) for part in args.only.split(",")}
    print(json.dumps(results))
    for part in args.only.split(","):
        b, a = results[f"{part}/before"]["peak_rss_gb"], results[f"{part}/after"]["peak_rss_gb"]
        print(ratio_line(f"{part} peak RSS after/before", a, b, results["not_equal"][part]))
        if a and part in BUDGET_GB:  # over 1: over the budget the tests used to assert
            print(f"ratio {part}_peak_rss/budget: {a / BUDGET_GB[part]:.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table(results))


def table(results: dict[str, Any]) -> str:
    tol = results["tolerance"]
    work_cols = list(dict.fromkeys((*SFT_WORK, *WORK_KEYS, "errors")))
    lines = [
        f"# Peak memory of training SmolLM2-135M-Instruct: before ({results['before']}) and after",
        "",
        "Made by `bench/speed/real_model_memory.py` in one run on this machine (2 cores); each figure is the "
        "process's maximum RSS (GNU time). Work: SFT's from its summary, GRPO's from its episode files; "
        f"a ratio is given only where before and after did the same work (SFT within {tol['sft']:.0%}, "
        f"GRPO within {tol['grpo']:.0%}) without errors.",
        "",
        "| what | code | peak RSS GB | wall s | generate s | update s | "
        + " | ".join(work_cols)
        + " | status |",
        "|---|---|---|---|---|---|" + "---|" * (len(work_cols) + 1),
    ]
    for key, r in results.items():
        if "/" not in key:
            continue
        part, label = key.split("/")
        work = [str(r.get(k, "")) for k in work_cols]
        lines.append(
            f"| {part} | {label} | {r['peak_rss_gb']} | {r['wall_s']} | {r.get('time_generate', '')} | "
            f"{r.get('time_train', '')} | " + " | ".join(work) + f" | {r['status']} |"
        )
    lines.append("")
    for part, why in results["not_equal"].items():
        b, a = results[f"{part}/before"]["peak_rss_gb"], results[f"{part}/after"]["peak_rss_gb"]
        if why:
            lines.append(f"- {part}: no after/before ratio: not the same work ({'; '.join(why)}).")
        elif a and b:
            lines.append(f"- {part}: peak RSS after/before **{a / b:.3f}** (the same work).")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
