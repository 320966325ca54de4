"""ScalingInter-RL beside a fixed horizon (the largest), same budget, on the demo set-up.

    python -m bench.experiments.scaling_inter [--steps 16] [--runs-dir runs/compare] [--out docs/scaling_inter_vs_fixed.png]

Prepares the demo's SFT checkpoint once (tiny model, expert demonstrations, SFT), then trains two
GRPO runs from it with identical settings and seed — the same tasks in the same order — except
the horizon: ``scaling_inter`` (the demo's rounds, spread evenly over the steps) and ``fixed`` at
the last round's horizon. Both
runs get the same number of steps (the same episodes and updates). Writes one PNG with both
runs' training success and mean turns per step plus their test-split success before and after,
and prints one JSON object with the figures (wall time included: short horizons are cheaper).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    from agentgym_train.cli.ui import quiet_transformers
    from agentgym_train.recipes import recipe_path
    from agentgym_train.recipes.runner import Phases, load_recipe, rl_config
    from agentgym_train.rl.trainer import Trainer
    from agentgym_train.tracking.plots import read_metrics

    recipe = load_recipe(recipe_path("tiny"))
    RL = recipe["rl"]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=RL["steps"], help=f"steps per run (default: {RL['steps']})")
    ap.add_argument("--runs-dir", default="runs/compare")
    ap.add_argument("--out", default="docs/scaling_inter_vs_fixed.png")
    args = ap.parse_args(argv)
    quiet_transformers()
    runs = Path(args.runs_dir)
    phases = Phases(runs / "base", recipe, print)
    phases.warm_start()
    rounds = RL["horizon_params"]["rounds"]
    # the rounds spread over the steps given (the demo's own: every = steps / 3)
    every = max(1, args.steps // len(rounds))
    variants = {
        "scaling_inter": {"horizon": "scaling_inter", "horizon_params": {"rounds": rounds, "every": every}},
        "fixed": {"horizon": "fixed", "horizon_params": {"horizon": rounds[-1]}},
    }
    results = {}
    for name, horizon in variants.items():
        cfg = rl_config(
            recipe, runs, phases.sft_dir, 0, name=name, steps=args.steps, val_before=True, **horizon
        )
        trainer = Trainer(cfg, log=print)
        trainer.setup()
        t0 = time.perf_counter()
        try:
            report = trainer.train()
        finally:
            trainer.close()
        rows = read_metrics(runs / name)
        results[name] = {
            "before": report["before"],
            "after": report["after"],
            "wall_s": round(time.perf_counter() - t0, 1),
            "train_success": [r["success"] for r in rows],
            "turns": [r["turns"] for r in rows],
            "horizon": [r["horizon"] for r in rows],
            "env_steps": sum(r["turns"] for r in rows) * cfg.tasks_per_step * cfg.n,
        }
    plot(results, Path(args.out))
    print(
        json.dumps(
            {k: {x: v[x] for x in ("before", "after", "wall_s", "env_steps")} for k, v in results.items()}
        )
    )
    print(f"plot: {args.out}")


def plot(results: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for name, r in results.items():
        steps = range(1, len(r["train_success"]) + 1)
        axes[0].plot(steps, r["train_success"], marker=".", label=name)
        axes[1].plot(steps, r["turns"], marker=".", label=f"{name} (mean turns)")
        axes[1].step(steps, r["horizon"], where="mid", alpha=0.4, linestyle="--", label=f"{name} (horizon)")
    axes[0].set(title="training success per step", xlabel="step", ylabel="success")
    axes[1].set(title="turns per episode and horizon", xlabel="step", ylabel="turns")
    names = list(results)
    x = range(len(names))
    for shift, key, label in ((-0.2, "before", "before (SFT)"), (0.2, "after", "after GRPO")):
        bars = axes[2].bar([i + shift for i in x], [results[n][key] for n in names], width=0.4, label=label)
        axes[2].bar_label(bars, fmt="%.3f", fontsize=7)
    axes[2].set_xticks(list(x), names)
    top = max(max(r["before"], r["after"]) for r in results.values())
    axes[2].set(title="test split success", ylabel="success", ylim=(0, top * 1.35))
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
