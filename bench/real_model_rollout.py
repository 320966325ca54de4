"""Benchmark: the native trainer's two samplers on a real model (SmolLM2-135M-Instruct, or an SFT
checkpoint): ``rollout=hf`` (the learner's own model) against ``rollout=vllm`` (a vLLM engine in
the trainer's process, given the trained weights after every update), on the same short GRPO run.
Runs in the hatch environment that has vLLM's CPU build:

    hatch run vllm:python bench/real_model_rollout.py [--model smollm2|DIR] [--steps 3] [--tasks 4]
        [--n 8] [--val-limit 8] [--val-n 2] [--out bench/results/real_model_rollout.md]

Both runs: ``agentgym train`` with LoRA, ``dtype=auto``, BabyAI, ``--steps`` steps of ``--tasks``
tasks x ``--n`` samples, a fixed horizon of ``--horizon`` turns, ``--max-new-tokens`` per reply, and
``--val-limit`` test tasks x ``--val-n`` samples validated before and after (at most
``--val-max-turns`` turns). Each run is a process of its own (``python -m agentgym train`` of this
interpreter) under GNU time, whose maximum resident set size is the peak RSS. Per-step seconds come
from the run's ``metrics.jsonl`` (generate: the sampler's own seconds; update: scoring, the update
and, for vllm, the weight sync; tokens/s: sampled tokens over the rollout's wall time); validation
seconds are the run's training wall time (``report.json``) less its steps (checkpoints included).

Prints one JSON object and a ``ratio vllm/hf`` line per figure; writes a markdown table. A
benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from real_model_memory import timed  # bench/ is on sys.path: the script's own folder

ROLLOUTS = ("hf", "vllm")
#: The table's figures: (column, key in a run's results).
FIGURES = (
    ("generate s/step", "generate_s"),
    ("update s/step", "update_s"),
    ("step s", "step_s"),
    ("tokens/s", "tokens_per_s"),
    ("validation wall s", "validation_s"),
    ("process wall s", "wall_s"),
    ("peak RSS GB", "peak_rss_gb"),
)


def train_cmd(args: argparse.Namespace, model: Path, runs: Path, rollout: str) -> list[str]:
    overrides = {
        "name": rollout,
        "runs_dir": runs,
        "model": model,
        "rollout": rollout,
        "lora": "true",
        "dtype": "auto",
        "envs": "babyai",
        "steps": args.steps,
        "tasks_per_step": args.tasks,
        "n": args.n,
        "horizon": "fixed",
        "horizon_params": f"{{horizon: {args.horizon}}}",
        "max_new_tokens": args.max_new_tokens,
        "val_limit": args.val_limit,
        "val_n": args.val_n,
        "val_max_turns": args.val_max_turns,
        "seed": args.seed,
    }
    return [sys.executable, "-m", "agentgym", "train", *(f"{k}={v}" for k, v in overrides.items())]


def run_figures(run: Path) -> dict[str, Any]:
    """Mean per-step figures from the run's metrics, and its validation seconds."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    report = json.loads((run / "report.json").read_text())

    def mean(key: str) -> float:
        return round(sum(r.get(key, 0.0) for r in rows) / len(rows), 2)

    return {
        "steps": len(rows),
        "generate_s": mean("time_generate"),
        "update_s": mean("time_train"),
        "sync_s": mean("time_sync"),
        "step_s": mean("time_step"),
        "tokens_per_s": mean("tokens_per_s"),
        "validation_s": round(report["wall_s"] - sum(r["time_step"] for r in rows), 1),
        "success_before": report["before"],
        "success_after": report["after"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2", help="'smollm2' or a model directory (an SFT checkpoint)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=4, help="tasks per step")
    ap.add_argument("--n", type=int, default=8, help="samples per task")
    ap.add_argument("--horizon", type=int, default=6, help="turns per training episode (fixed)")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--val-limit", type=int, default=8)
    ap.add_argument("--val-n", type=int, default=2)
    ap.add_argument("--val-max-turns", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kv-cache-gb", default="2", help="VLLM_CPU_KVCACHE_SPACE for the vllm run")
    ap.add_argument("--only", default=",".join(ROLLOUTS), help="the rollouts to run (hf,vllm)")
    ap.add_argument("--out", default="bench/results/real_model_rollout.md")
    args = ap.parse_args()
    from agentgym_train.real_model import resolve_model

    model = resolve_model(args.model)
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    env["VLLM_CPU_KVCACHE_SPACE"] = env.get("VLLM_CPU_KVCACHE_SPACE", args.kv_cache_gb)
    results: dict[str, Any] = {"model": str(model), "settings": vars(args), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        for rollout in args.only.split(","):
            r = timed(train_cmd(args, model, tmp / "runs", rollout), env, tmp / f"{rollout}.log")
            if r["status"] == 0:
                r.update(run_figures(tmp / "runs" / rollout))
            results["runs"][rollout] = r
            print(rollout, json.dumps(r), flush=True)
    print(json.dumps(results))
    runs = results["runs"]
    if all(runs.get(k, {}).get("status") == 0 for k in ROLLOUTS):
        for label, key in FIGURES:
            a, b = runs["vllm"].get(key), runs["hf"].get(key)
            if a and b:
                print(f"ratio vllm/hf {label}: {a / b:.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table(results))


def table(results: dict[str, Any]) -> str:
    s, runs = results["settings"], results["runs"]
    lines = [
        "# The native trainer's samplers on a real model: rollout=hf against rollout=vllm",
        "",
        f"Made by `bench/real_model_rollout.py` in one run on this machine ({os.cpu_count()} cores): "
        f"`{results['model']}`, GRPO with LoRA, dtype auto, BabyAI, {s['steps']} steps x {s['tasks']} "
        f"tasks x {s['n']} samples, horizon {s['horizon']}, max_new_tokens {s['max_new_tokens']}, "
        f"validation {s['val_limit']} tasks x {s['val_n']} before and after. Per-step figures are means "
        "over the steps; update includes vllm's weight sync; peak RSS is GNU time's.",
        "",
        "| rollout | " + " | ".join(label for label, _ in FIGURES) + " | sync s/step | status |",
        "|---|" + "---|" * (len(FIGURES) + 2),
    ]
    for rollout, r in runs.items():
        cells = [str(r.get(key, "")) for _, key in FIGURES]
        lines.append(f"| {rollout} | " + " | ".join(cells) + f" | {r.get('sync_s', '')} | {r['status']} |")
    if all(runs.get(k, {}).get("status") == 0 for k in ROLLOUTS):
        ratios = []
        for _, key in FIGURES:
            a, b = runs["vllm"].get(key), runs["hf"].get(key)
            ratios.append(f"{a / b:.2f}" if a and b else "")
        lines.append("| vllm/hf | " + " | ".join(ratios) + " |  |  |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
