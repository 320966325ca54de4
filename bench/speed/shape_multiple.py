"""Benchmark: the RL update's forward and backward passes on widths as they come against widths
rounded up to ``SHAPE_MULTIPLE`` (``agentgym_train.models.logprobs``): memory and time.

    python -m bench.speed.shape_multiple --episodes RUN/episodes [--model DIR] [--passes 60]
        [--out bench/results/shape_multiple.md]

The rows are a real run's (its ``step_*.jsonl`` files in order, each episode's tokens up to its
last sampled one, as the trainer cuts them), cut into micro-batches as the learner does
(``micro_batches``, the recipe's 2,048-token budget). Each arm runs in a process of its own on the
same micro-batches: the model loaded as the recipe's learner loads it (``TrainingModel``: LoRA r16
over a bfloat16 base where the CPU has it, gradient checkpointing), one malloc arena, and per
micro-batch ``sampled_logprobs`` with entropy, a backward of a loss over its sampled tokens, and
``release_memory`` (the trainer calls it after each update). The arm ``as they come`` sets
``SHAPE_MULTIPLE`` to 1. Reported per arm: resident memory after the first 5 passes and after
the last, its growth, the most it reached (sampled after every pass), and seconds per pass over
all passes; the ratio of the two arms' times. oneDNN caches a kernel for every new matrix shape,
which is what the rounding bounds. A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ARMS = {"as they come": 1, "rounded up to 64": 64}


def rows_of(episodes: Path) -> list[tuple[list[int], list[float]]]:
    """Every token row of the run's step files, in step order, ending at the last sampled token."""
    rows = []
    for path in sorted(episodes.glob("step_*.jsonl")):
        for line in path.read_text().splitlines():
            tokens = json.loads(line).get("tokens")
            if tokens and tokens.get("reward_index") is not None:
                end = tokens["reward_index"] + 1
                rows.append((tokens["ids"][:end], [float(m) for m in tokens["loss_mask"][:end]]))
    return rows


def rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024**2
    return float("nan")


def child(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from agentgym_train.models import loading, logprobs, memory

    logprobs.SHAPE_MULTIPLE = args.child
    memory.one_malloc_arena()
    model = loading.TrainingModel(lora_r=16, gradient_checkpointing=True).load(loading.model_dir(args.model))
    rows = rows_of(args.episodes)
    groups = logprobs.micro_batches([len(ids) for ids, _ in rows], 2048)[: args.passes]
    resident, t0 = [], time.perf_counter()
    for g in groups:
        ids, mask = logprobs.pad_rows([rows[i][0] for i in g], masks=[rows[i][1] for i in g])
        lp, ent, _ = logprobs.sampled_logprobs(model, ids, mask, entropy=True)
        (-(lp * mask).sum() / mask.sum().clamp(min=1)).backward()
        model.zero_grad(set_to_none=True)
        memory.release_memory()
        resident.append(rss_gb())
    seconds = time.perf_counter() - t0
    widths = {max(len(rows[i][0]) for i in g) for g in groups}
    return {
        "passes": len(groups),
        "distinct widths": len(widths),
        "GB after 5 passes": round(resident[min(4, len(resident) - 1)], 2),
        "GB at the end": round(resident[-1], 2),
        "growth GB": round(resident[-1] - resident[min(4, len(resident) - 1)], 2),
        "most GB": round(max(resident), 2),
        "s/pass": round(seconds / len(groups), 2),
        "torch threads": torch.get_num_threads(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=Path, required=True, help="a run's episodes/ folder (step_*.jsonl)")
    ap.add_argument("--model", default="smollm2", help="a model directory, a .gguf file or 'smollm2'")
    ap.add_argument("--passes", type=int, default=60, help="micro-batches to run, from the first step on")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "shape_multiple.md")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args)))
        return
    results = {}
    for arm, multiple in ARMS.items():
        cmd = [sys.executable, "-m", __spec__.name, "--episodes", str(args.episodes), "--model", args.model]
        cmd += ["--passes", str(args.passes), "--child", str(multiple)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ).stdout
        results[arm] = json.loads(out.strip().splitlines()[-1])
        print(arm, results[arm], flush=True)
    keys = list(next(iter(results.values())))
    lines = [
        "# Forward and backward on widths as they come against rounded up (`bench/speed/shape_multiple.py`)",
        "",
        f"`python -m bench.speed.shape_multiple {' '.join(sys.argv[1:])}`, {time.strftime('%Y-%m-%d')}. "
        "Rows of a real run's steps in order, micro-batches of 2,048 tokens as the learner cuts "
        "them, the recipe's learner model; each arm in a process of its own on the same passes.",
        "",
        "| arm | " + " | ".join(keys) + " |",
        "|---|" + "---|" * len(keys),
        *(f"| {arm} | " + " | ".join(str(r[k]) for k in keys) + " |" for arm, r in results.items()),
        "",
        "ratio s/pass rounded up to 64 / as they come: "
        f"{results['rounded up to 64']['s/pass'] / results['as they come']['s/pass']:.3f}",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
