"""Benchmark: a real-model recipe's SFT in float32 against bfloat16 autocast, on equal work.

    python -m bench.speed.sft_autocast [--demo smollm2] [--runs-dir DIR] [--out bench/results/sft_autocast_<env>.md]

Both arms run the recipe's own SFT phase (``agentgym train --demo NAME``'s settings: its model,
demonstrations, epochs, batch, learning rate, seed) on the same expert demonstrations, one after
the other, each in a fresh process (its peak memory is its own); they differ only in
``sft.autocast``: float32 products, or bfloat16 ones over float32 weights and optimizer
(``torch.autocast``). Each SFT model then plays the recipe's test split greedily, as the recipe
scores its SFT model. The table: SFT seconds and tokens per second (and the speed ratio), the
mean loss of the first and the last epoch, the last batch's loss, peak GB, greedy test success and
the autocast model's paired difference from the float32 one. Equal work: both arms train on the
same rows for the same steps (the table's ``trained tokens`` and ``steps`` columns must agree).
Finished arms are read back on a rerun. A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ARMS = {"float32": False, "autocast": True}


def arm(demo: str, runs_dir: Path, name: str) -> dict[str, Any]:
    """One arm in this process: the recipe's SFT phase, then its model greedy on the test split."""
    from agentgym_train.models.memory import bound_kernel_cache, one_malloc_arena
    from agentgym_train.recipes import recipe_path
    from agentgym_train.recipes.runner import Phases, eval_model, load_recipe, rl_config, sampler

    one_malloc_arena()  # as the recipe runner does before its SFT
    bound_kernel_cache()
    recipe = load_recipe(recipe_path(demo), [f"sft.autocast={str(ARMS[name]).lower()}"])
    run = runs_dir / name
    run.mkdir(parents=True, exist_ok=True)
    if not (run / "demos.jsonl").is_file():
        shutil.copy(runs_dir / "demos.jsonl", run / "demos.jsonl")
    phases = Phases(run, recipe, print)
    phases.warm_start()
    cfg = rl_config(recipe, run, phases.sft_dir, recipe["seeds"][0])
    greedy = eval_model(lambda: sampler(phases.sft_dir, cfg), run / "sft_greedy.json", cfg, greedy=True)
    return {"sft": json.loads((phases.sft_dir / "sft_summary.json").read_text()), "greedy": greedy}


def table(demo: str, results: dict[str, dict[str, Any]], runs_dir: Path, command: str) -> str:
    from agentgym_train.recipes.report import paired_gain, per_task, success_pct

    base = results["float32"]["sft"]
    lines = [
        f"# SFT in float32 against bfloat16 autocast: the `{demo}` recipe (`bench/speed/sft_autocast.py`)",
        "",
        f"`{command}`",
        "",
        "| arm | examples | trained tokens | steps | SFT s | tokens/s | speed x | first epoch loss "
        "| last epoch loss | last batch loss | peak GB | greedy test % | greedy diff (± SE) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    fp32_tasks = per_task(runs_dir / "float32" / "sft_greedy.episodes.jsonl")
    for name, r in results.items():
        s = r["sft"]
        diff = ""
        if name != "float32":
            g = paired_gain(fp32_tasks, per_task(runs_dir / name / "sft_greedy.episodes.jsonl"))
            diff = f"{g['gain']:+.1f} ± {g['se']:.1f}"
        lines.append(
            f"| {name} | {s['examples']} | {s['trained_tokens_per_epoch'] * s['epochs']} | {s['steps']} "
            f"| {s['wall_s']} | {s['tokens_per_s']} | {base['wall_s'] / s['wall_s']:.2f} "
            f"| {s['first_epoch_loss']} | {s['last_epoch_loss']} | {s['last_step_loss']} "
            f"| {s['peak_rss_gb']} | {success_pct(r['greedy']):.1f} | {diff} |"
        )
    lines += [
        "",
        "Speed x: the float32 arm's SFT seconds over the arm's. Greedy diff: points of test success "
        "over the float32 model on the same test tasks, with the standard error of the paired per-task "
        "differences. Peak GB: the SFT's peak resident memory (its own process).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo", default="smollm2")
    ap.add_argument("--runs-dir", type=Path, default=Path("runs/sft_autocast"))
    ap.add_argument("--out", type=Path, help="default: bench/results/sft_autocast_<env>.md")
    ap.add_argument("--arm", choices=list(ARMS), help=argparse.SUPPRESS)  # one arm, in its own process
    args = ap.parse_args()
    runs_dir = args.runs_dir.resolve() / args.demo
    if args.arm:
        print("RESULT " + json.dumps(arm(args.demo, runs_dir, args.arm)))
        return

    from agentgym_train.recipes import recipe_path
    from agentgym_train.recipes.runner import load_recipe
    from agentgym_train.rollout.experts import collect_demos

    recipe = load_recipe(recipe_path(args.demo))
    runs_dir.mkdir(parents=True, exist_ok=True)
    collect_demos(runs_dir / "demos.jsonl", recipe["demos"], recipe["envs"])
    results = {}
    for name in ARMS:
        print(f"== {name}", flush=True)
        cmd = [
            sys.executable,
            "-m",
            __spec__.name,
            "--demo",
            args.demo,
            "--runs-dir",
            str(args.runs_dir),
            "--arm",
            name,
        ]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        print(out, end="")
        results[name] = json.loads(out.rsplit("RESULT ", 1)[1])
    env = "_".join(recipe["envs"])
    out_md = args.out or ROOT / "bench" / "results" / f"sft_autocast_{env}.md"
    command = f"python -m bench.speed.sft_autocast --demo {args.demo}"
    out_md.write_text(table(args.demo, results, runs_dir, command))
    out_md.with_suffix(".json").write_text(json.dumps(results, indent=2))
    print(out_md.read_text())


if __name__ == "__main__":
    main()
