"""Benchmark: seconds per training step on verl's trainer (CPU) beside the native trainer, same run.

    hatch run verl:python bench/verl_step.py [--steps 4] [--tasks 4] [--n 4] [--max-turns 4] [--model smollm2]

Both train the same model (the nano tiny model, built once, untrained: its episodes run to the
turn cap; or ``--model``: ``smollm2``, a .gguf file or an HF directory, full fine-tune in float32,
with ``format_hint``) on
the same BabyAI train tasks with the same config: GRPO, ``--tasks`` x ``--n`` episodes per step, a
fixed horizon. The native trainer runs in this process; verl runs through
``agentgym train --backend verl`` (its own processes: Ray, FSDP2 on CPU, the ``agentgym_hf``
rollout). Per step: the native trainer's ``time_step`` (``metrics.jsonl``) and verl's
``timing_s/step`` (``verl_metrics.jsonl``); the first step of each is left out of the mean (verl's
first step includes warm-up). Prints one JSON object with the ratio verl / native. A benchmark,
not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentgym_train.config import TrainConfig
from agentgym_train.tiny import build_tiny
from agentgym_train.trainer import run as train_native


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--model", default=None, help="smollm2, a .gguf file or an HF directory (default: tiny)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="verl-step-"))
    if args.model is None:
        model, real = build_tiny(root / "tiny", envs=["babyai"], tasks_per_env=20, size="nano"), {}
    else:
        from agentgym_train.real_model import resolve_model

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
    subprocess.run([agentgym, "train", "--backend", "verl", "--device", "cpu", *overrides],
                   check=True, capture_output=True, text=True)  # fmt: skip
    verl_wall = time.perf_counter() - t
    verl = [
        m["data"]["timing_s/step"]
        for m in map(json.loads, (root / "verl" / "verl_metrics.jsonl").read_text().splitlines())
        if "timing_s/step" in m["data"]
    ]
    native_mean, verl_mean = statistics.mean(native[1:] or native), statistics.mean(verl[1:] or verl)
    print(
        json.dumps(
            {
                "model": str(model),
                "episodes_per_step": args.tasks * args.n,
                "max_turns": args.max_turns,
                "native_step_s": [round(x, 2) for x in native],
                "verl_step_s": [round(x, 2) for x in verl],
                "native_mean_s": round(native_mean, 2),
                "verl_mean_s": round(verl_mean, 2),
                "ratio_verl_over_native": round(verl_mean / native_mean, 2),
                "native_wall_s": round(native_wall, 1),
                "verl_wall_s (Ray and model start-up included)": round(verl_wall, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
