"""Benchmark: the real-model recipe's RL steps under memory settings — peak RSS against update speed.

    python -m bench.speed.rl_memory --sft RUN/sft [--steps 3] [--horizon 8]
        [--variants JSON] [--out bench/results/rl_memory.md]

Each variant runs the SmolLM2 recipe's RL stage (``recipes/smollm2.yaml``: LoRA over a
bfloat16 base, rows sampled by an in-process vLLM engine beside the trainer, as ``hatch run
vllm:demo-real`` runs it; run the script in the ``vllm`` environment) from the same SFT model for
``--steps`` steps at a fixed turn cap of ``--horizon`` (the recipe's longest, so the longest
rows), in a process of its own: the same seed, so every variant samples the same episodes and
trains on the same rows. A variant is a JSON object of ``env`` (environment variables of its
process: glibc's ``MALLOC_*`` settings, read at start) and ``config`` (TrainConfig overrides).

Reported per variant: the process's peak RSS (GB), the mean update tokens/s over the steps that
trained, the update's seconds and the step's. The default variants: the recipe as it is (gradient
checkpointing; the trainer keeps one malloc arena since this script first ran, so
``MALLOC_ARENA_MAX`` no longer varies anything), without checkpointing, without it and with
``share_prompts``, and without it with every block of 1 MB or more mapped afresh (what
``frees_to_system`` does). Prints one JSON object and writes a markdown table. A benchmark: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

VARIANTS: dict[str, dict[str, Any]] = {
    "the recipe": {},
    "no checkpointing": {"config": {"gradient_checkpointing": False}},
    "no checkpointing, prompts shared": {"config": {"gradient_checkpointing": False, "share_prompts": True}},
    "no checkpointing, mmap >= 1 MB": {
        "env": {"MALLOC_MMAP_THRESHOLD_": str(1 << 20)},
        "config": {"gradient_checkpointing": False},
    },
}


def child(sft: str, runs: str, steps: int, horizon: int, config: dict[str, Any]) -> dict[str, Any]:
    """One variant's RL run, in this process; its figures."""
    from agentgym_train.models.memory import peak_memory
    from agentgym_train.recipes import recipe_path
    from agentgym_train.recipes.runner import load_recipe, rl_config
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.rl.trainer import run
    from agentgym_train.tracking.plots import read_metrics

    recipe_cfg = rl_config(load_recipe(recipe_path("smollm2")), Path(runs), Path(sft), 0).to_dict()
    cfg = TrainConfig.from_dict(  # checked like any run's
        {
            **recipe_cfg,
            "steps": steps,
            "horizon": "fixed",
            "horizon_params": {"horizon": horizon},
            "val_limit": 1,
            "val_n": 1,
            "save_every": 0,
            "progress": False,
            **config,
        }
    )
    t = time.perf_counter()
    run(cfg)
    wall = time.perf_counter() - t
    rows = read_metrics(Path(runs) / cfg.name)
    trained = [r for r in rows if r.get("update_tokens_per_s") and r.get("time_train", 0) > 2]

    def mean(key: str, of: list[dict[str, Any]]) -> float | None:
        return round(statistics.fmean(r[key] for r in of), 1) if of else None

    return {
        **peak_memory(),
        "wall_s": round(wall, 1),
        "steps_trained": len(trained),
        "update_tokens_per_s": mean("update_tokens_per_s", trained),
        "update_s": mean("time_train", trained),
        "step_s": mean("time_step", rows),
        "trained_tokens": [r.get("trained_tokens") for r in trained],
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "# The recipe's RL steps under memory settings (`bench/speed/rl_memory.py`)",
        "",
        f"`{result['command']}`, {result['date']}. SFT model `{result['sft']}`; {result['steps']} steps at "
        f"a fixed cap of {result['horizon']} turns, 4 tasks x 4 samples, an in-process vLLM engine beside "
        "the trainer; every variant in a process of its own, on the same episodes.",
        "",
        "| variant | settings | peak GB | update tokens/s | update s/step | s/step |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in result["variants"].items():
        settings = json.dumps({k: v for k, v in r["variant"].items() if v}) or "-"
        lines.append(
            f"| {name} | `{settings}` | {r.get('peak_rss_gb')} | {r.get('update_tokens_per_s')} | "
            f"{r.get('update_s')} | {r.get('step_s')} |"
        )
    base = next(iter(result["variants"].values()))
    lines.append("")
    for name, r in list(result["variants"].items())[1:]:
        if base.get("update_tokens_per_s") and r.get("update_tokens_per_s"):
            lines.append(
                f"ratio update tokens/s {name} / {next(iter(result['variants']))}: "
                f"{r['update_tokens_per_s'] / base['update_tokens_per_s']:.3f}"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sft", required=True, help="the recipe's SFT model directory (RUN/sft)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--horizon", type=int, default=8)
    ap.add_argument("--variants", type=json.loads, default=VARIANTS)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "rl_memory.md")
    ap.add_argument("--child", type=json.loads, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print("RESULT " + json.dumps(child(args.sft, **args.child)), flush=True)
        return
    result: dict[str, Any] = {
        "command": "python -m bench.speed.rl_memory " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "sft": args.sft,
        "steps": args.steps,
        "horizon": args.horizon,
        "variants": {},
    }
    for name, variant in args.variants.items():
        with tempfile.TemporaryDirectory(prefix="rl-memory-") as runs:
            spec = {
                "runs": runs,
                "steps": args.steps,
                "horizon": args.horizon,
                "config": variant.get("config", {}),
            }
            env = {**os.environ, **variant.get("env", {}), "TRANSFORMERS_VERBOSITY": "error"}
            print(f"variant {name}: {variant}", flush=True)
            proc = subprocess.run(
                [sys.executable, "-m", __spec__.name, "--sft", args.sft, "--child", json.dumps(spec)],
                env=env,
                capture_output=True,
                text=True,
            )
        found = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        figures = json.loads(found[-1][7:]) if found else {"error": (proc.stderr or proc.stdout)[-2000:]}
        result["variants"][name] = {"variant": variant, **figures}
        print(json.dumps(result["variants"][name]), flush=True)
        args.out.write_text(table(result))
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=2))
    print(table(result))


if __name__ == "__main__":
    main()
