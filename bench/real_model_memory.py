"""Benchmark: peak memory and time of SFT and of a GRPO step on a real model (SmolLM2-135M-Instruct),
the code before this project could train real models against today's, in one run.

    python bench/real_model_memory.py [--model smollm2] [--before REF] [--only sft,grpo]
        [--out bench/results/real_model_memory.md]

``--before REF`` (default ``f20ad89``, the last commit before the real-model work) is checked out
into a temporary git worktree and run from there (``PYTHONPATH`` over its packages' sources), with
the same commands, data and model directory. Each command runs in a process of its own under
GNU time, whose maximum resident set size is the figure (the kernel's high-water mark).

- SFT: ``agentgym sft`` of the model on 8 BabyAI expert episodes (2 steps of 4 episodes); before:
  the old command's defaults (float32, no checkpointing, 8,192-token micro-batches); after: the new
  defaults (float32 weights, gradient checkpointing, 4,096-token micro-batches, chunked log-probs).
- GRPO: one step of ``agentgym train model=... lora=true dtype=bfloat16 steps=1 tasks_per_step=4
  n=4`` (16 episodes, 6 turns) as the issue's user ran it; after: the same with
  ``gradient_checkpointing=true``. Generation and update seconds come from the run's metrics.

Prints one JSON object and ``ratio`` lines (after/before peak memory); writes a markdown table.
A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agentgym-core", "agentgym-train", "agentgym-env-babyai", "agentgym-env-textcraft")


def timed(cmd: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> dict[str, Any]:
    """Run ``cmd`` (in ``cwd``) under GNU time; its peak RSS (GB), wall seconds and exit status.
    The other real-model benches measure their processes with it too."""
    t = time.perf_counter()
    with open(log, "w") as f:
        p = subprocess.run(
            ["/usr/bin/time", "-f", "MAXRSS_KB %M", *cmd],
            env=env,
            cwd=cwd,
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    text = log.read_text()
    m = re.findall(r"MAXRSS_KB (\d+)", text)
    return {
        "peak_rss_gb": round(int(m[-1]) / 2**20, 2) if m else None,
        "wall_s": round(time.perf_counter() - t, 1),
        "status": p.returncode,
        "tail": text[-600:] if p.returncode else "",
    }


def code_env(src_root: Path) -> dict[str, str]:
    """The environment that runs the packages of ``src_root`` (a worktree) instead of the installed ones."""
    paths = [str(src_root / "packages" / p / "src") for p in PACKAGES]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TRANSFORMERS_VERBOSITY": "error"}


def sft_cmd(model: Path, demos: Path, out: Path, before: bool) -> list[str]:
    cmd = [sys.executable, "-m", "agentgym", "sft", "--model", str(model), "--data", str(demos),
           "--output", str(out), "--epochs", "1", "--batch-size", "4", "--lr", "1e-5"]  # fmt: skip
    return cmd


def grpo_cmd(model: Path, runs: Path, before: bool) -> list[str]:
    cmd = [sys.executable, "-m", "agentgym", "train", f"model={model}", f"runs_dir={runs}", "name=grpo",
           "lora=true", "dtype=bfloat16", "steps=1", "tasks_per_step=4", "n=4", "val_limit=1", "val_n=1",
           "val_max_turns=1"]  # fmt: skip
    return cmd if before else [*cmd, "gradient_checkpointing=true"]


def grpo_times(runs: Path) -> dict[str, Any]:
    lines = (runs / "grpo" / "metrics.jsonl").read_text().splitlines()
    m = json.loads(lines[-1])
    return {k: m.get(k) for k in ("time_generate", "time_train", "time_step", "trained_tokens", "success")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--before", default="f20ad89")
    ap.add_argument("--only", default="sft,grpo")
    ap.add_argument("--out", default="bench/results/real_model_memory.md")
    args = ap.parse_args()
    from agentgym_train.real_model import resolve_model

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
    print(json.dumps(results))
    for part in args.only.split(","):
        b, a = results[f"{part}/before"]["peak_rss_gb"], results[f"{part}/after"]["peak_rss_gb"]
        if a and b:
            print(f"ratio {part} peak RSS after/before: {a / b:.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table(results))


def table(results: dict[str, Any]) -> str:
    lines = [
        f"# Peak memory of training SmolLM2-135M-Instruct: before ({results['before']}) and after",
        "",
        "Made by `bench/real_model_memory.py` in one run on this machine (2 cores); each figure is the "
        "process's maximum RSS (GNU time).",
        "",
        "| what | code | peak RSS GB | wall s | generate s | update s | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, r in results.items():
        if "/" not in key:
            continue
        part, label = key.split("/")
        lines.append(
            f"| {part} | {label} | {r['peak_rss_gb']} | {r['wall_s']} | {r.get('time_generate', '')} | "
            f"{r.get('time_train', '')} | {r['status']} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
