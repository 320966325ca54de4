"""Benchmark: seconds per training step on verl's trainer (CPU) beside the native trainer, same run.

    hatch run verl:python -m bench.speed.verl_step [--steps 4] [--tasks 4] [--n 4] [--max-turns 4] [--model smollm2]

Both train the same model (the nano tiny model, built once, untrained: its episodes run to the
turn cap; or ``--model``: ``smollm2``, a .gguf file or an HF directory, full fine-tune in float32,
with ``format_hint``) on
the same BabyAI train tasks with the same config: GRPO, ``--tasks`` x ``--n`` episodes per step, a
fixed horizon. The native trainer runs in this process; verl runs through
``agentgym train --backend verl`` (its own processes: Ray, FSDP2 on CPU, the ``agentgym_hf``
rollout). Both with gradient checkpointing (verl's CPU setting, which the native trainer is given
too, so both recompute the same forward passes). Per step: the native trainer's ``time_step``
(``metrics.jsonl``) and verl's ``timing_s/step`` (``verl_metrics.jsonl``); the first step of each is
left out of the mean (verl's first step includes warm-up). Each side's work (episodes, turns,
sampled and trained tokens, errors) is read from the episode files both trainers write
(``bench/common/equal_work.py``); the ratio verl / native is printed only when both did the same work
within ``--tolerance``. Both play the same tasks and seed every request alike, so their first
steps draw the same tokens at any temperature; after an update the two trainers' weights differ by
their arithmetic's rounding, which ``--temperature 0.01`` (near-greedy; the trainer refuses 0)
keeps from changing what they sample. Prints one JSON object and writes a markdown table (``--out``; default
``bench/results/verl_step.md``, or ``bench/results/real_model_verl.md`` with ``--model``). A
benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentgym_train.models.tiny import build_tiny
from agentgym_train.rl.config import TrainConfig
from agentgym_train.rl.trainer import run as train_native
from agentgym_train.rollout.experts import expert_texts

from bench.common.equal_work import WORK_KEYS, differences, ratio_line, work_of_run

#: The budget of a real model's verl run on this 24 GB machine (Ray kills workers near the top).
MEMORY_BUDGET_GB = 16.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--model", default=None, help="smollm2, a .gguf file or an HF directory (default: tiny)")
    ap.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling temperature of both trainers (0.01: near-greedy, so both draw the same tokens)",
    )
    ap.add_argument("--tolerance", type=float, default=0.10, help="relative difference allowed in work")
    ap.add_argument("--out", default=None, help="the markdown table (default: by model, in bench/results)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="verl-step-"))
    if args.model is None:
        model, real = build_tiny(root / "tiny", expert_texts(["babyai"], 20), size="nano"), {}
    else:
        from agentgym_train.models.gguf import resolve_model

        model, real = resolve_model(args.model), {"format_hint": True, "lr": 1e-5}
    keys = {
        "runs_dir": str(root),
        "model": str(model),
        "envs": ["babyai"],
        "steps": args.steps,
        "tasks_per_step": args.tasks,
        "n": args.n,
        "train_limit": 200,
        "val_limit": 2,
        "val_n": 1,
        "max_context": 2048,
        "max_new_tokens": 24,
        "lr": 1e-3,
        "horizon": "fixed",
        "horizon_params": {"horizon": args.max_turns},
        "dtype": "float32",
        "temperature": args.temperature,
        "gradient_checkpointing": True,  # verl's setting on CPU (verl_backend/translate.py)
        "progress": False,
        **real,
    }
    t = time.perf_counter()
    train_native(TrainConfig.from_dict({**keys, "name": "native"}), log=lambda m: None)
    native_wall = time.perf_counter() - t
    native = [json.loads(x)["time_step"] for x in (root / "native" / "metrics.jsonl").read_text().splitlines()
              if "time_step" in x]  # fmt: skip

    agentgym = str(Path(sys.executable).parent / "agentgym")
    overrides = [f"{k}={json.dumps(v)}" for k, v in {**keys, "name": "verl"}.items() if k != "progress"]
    t = time.perf_counter()
    done = subprocess.run([agentgym, "train", "--backend", "verl", "--device", "cpu", *overrides],
                          check=True, capture_output=True, text=True)  # fmt: skip
    peak = re.findall(r"peak memory: ([\d.]+) GB", done.stdout + done.stderr)
    verl_wall = time.perf_counter() - t
    verl = [
        m["data"]["timing_s/step"]
        for m in map(json.loads, (root / "verl" / "verl_metrics.jsonl").read_text().splitlines())
        if "timing_s/step" in m["data"]
    ]
    native_mean, verl_mean = statistics.mean(native[1:] or native), statistics.mean(verl[1:] or verl)
    work = {"native": work_of_run(root / "native"), "verl": work_of_run(root / "verl")}
    why = differences(work["native"], work["verl"], args.tolerance, names=("native", "verl"))
    result = {
        "model": f"{args.model} ({model.name})" if args.model else "tiny (nano, untrained)",
        "command": "hatch run verl:python -m bench.speed.verl_step " + " ".join(sys.argv[1:]),
        "episodes_per_step": args.tasks * args.n,
        "steps": args.steps,
        "max_turns": args.max_turns,
        "tolerance": args.tolerance,
        "temperature": args.temperature,
        "native_step_s": [round(x, 2) for x in native],
        "verl_step_s": [round(x, 2) for x in verl],
        "native_mean_s": round(native_mean, 2),
        "verl_mean_s": round(verl_mean, 2),
        "native_wall_s": round(native_wall, 1),
        "verl_wall_s": round(verl_wall, 1),  # Ray and model start-up included
        # the summed PSS of verl's process tree, as `agentgym train --backend verl` prints it
        "verl_peak_memory_gb": float(peak[-1]) if peak else None,
        "work": work,
        "not_equal": why,
    }
    if not why:
        result["ratio_verl_over_native"] = round(verl_mean / native_mean, 2)
    print(json.dumps(result, indent=2))
    print(ratio_line("verl/native step s", verl_mean, native_mean, why))
    if args.model and result["verl_peak_memory_gb"]:  # a real model's step must fit well within 24 GB
        print(f"ratio verl_peak_memory/budget: {result['verl_peak_memory_gb'] / MEMORY_BUDGET_GB:.3f}")
    default = "real_model_verl.md" if args.model else "verl_step.md"
    out = Path(args.out or Path(__file__).resolve().parents[1] / "results" / default)
    out.write_text(table(result))


def table(r: dict) -> str:
    mean_of = "steps 2 on" if r["steps"] > 1 else "the one step"
    lines = [
        f"# verl against the native trainer: {r['model']}",
        "",
        f"`{r['command']}`, one run on this machine: the same GRPO config on both (BabyAI, "
        f"{r['episodes_per_step']} episodes a step, {r['max_turns']} turns, temperature {r['temperature']}, "
        "float32, gradient checkpointing "
        "on both), the native trainer in the bench's process, verl through `agentgym train --backend verl "
        "--device cpu` (Ray, FSDP2 on CPU, the `agentgym_hf` rollout). Work counts every training "
        f"episode of the run; a ratio is given only where both did the same work (within {r['tolerance']:.0%}).",
        "",
        "| trainer | step s | mean s ("
        + mean_of
        + ") | process wall s | "
        + " | ".join(WORK_KEYS)
        + " | errors |",
        "|---|---|---|---|" + "---|" * (len(WORK_KEYS) + 1),
    ]
    for side in ("native", "verl"):
        w = r["work"][side]
        steps = ", ".join(str(x) for x in r[f"{side}_step_s"])
        wall = f"{r[f'{side}_wall_s']}" + (" (Ray and model start-up included)" if side == "verl" else "")
        lines.append(
            f"| {side} | {steps} | {r[f'{side}_mean_s']} | {wall} | "
            + " | ".join(str(w[k]) for k in WORK_KEYS) + f" | {w['errors']} |"
        )  # fmt: skip
    if r.get("verl_peak_memory_gb"):
        lines += [
            "",
            f"verl's peak memory: {r['verl_peak_memory_gb']} GB (PSS of verl, Ray and their workers).",
        ]
    if r["not_equal"]:
        lines += ["", f"No verl/native ratio: not the same work ({'; '.join(r['not_equal'])})."]
    else:
        lines += ["", f"verl / native, mean step: **{r['ratio_verl_over_native']}**."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
