"""Tune the embedded demo's RL settings on a dev set, never on the test split.

The dev set is the last ``--dev-tasks`` BabyAI *train* ids of the demo's level families (the
highest seeds); those ids are held out of the RL task draws (``train_limit``). The SFT checkpoint
is built once (the demo's own stages 1-3) and shared by every configuration; each configuration
then runs the demo's GRPO with the given ``key=value`` overrides and is scored on the dev set
with the demo's sampling, turn cap and ``n``. The test split is never touched here.

    python -m bench.experiments.demo_dev --runs-dir /tmp/dev --tag base
    python -m bench.experiments.demo_dev --runs-dir /tmp/dev --tag mb4 mini_batches=4

Prints one line per run (dev success before -> after) and appends it to ``<runs-dir>/dev.jsonl``.
``--threads 1`` lets two configurations share the 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from agentgym_train.policies.base import Sampling
from agentgym_train.recipes import recipe_path
from agentgym_train.recipes.runner import TINY, Phases, load_recipe, rl_config
from agentgym_train.rl.config import parse_overrides
from agentgym_train.rl.trainer import Trainer
from agentgym_train.rollout.evaluate import evaluate
from agentgym_train.rollout.tasks import category_ids, demo_levels


def dev_success(policy, ids: list[int], cfg) -> dict:
    """The demo's validation (sampling, turn cap, n, forked RNG) on train ids instead of test."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1_000_003)
        report, _ = evaluate(
            ["babyai"],
            policy,
            split="train",
            task_ids=ids,
            n=cfg.val_n,
            max_turns=cfg.val_max_turns,
            batch_size=cfg.rollout_batch,
            sampling=Sampling(temperature=cfg.val_temperature, max_new_tokens=cfg.max_new_tokens),
            max_context=cfg.max_context,
        )
    return report["envs"]["babyai"]


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="key=value overrides of the demo's RL config")
    ap.add_argument("--runs-dir", default="/tmp/demo_dev")
    ap.add_argument("--tag", required=True, help="name of this configuration's run")
    ap.add_argument("--dev-tasks", type=int, default=160)
    ap.add_argument(
        "--base", default="base", help="directory (under --runs-dir) of the shared SFT checkpoint"
    )
    ap.add_argument("--size", default=TINY["size"], help="tiny model size of a new --base")
    ap.add_argument(
        "--sft",
        action="append",
        default=[],
        help="key=value override of the SFT stage of a new --base (repeatable)",
    )
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    return ap.parse_args()


def train(trainer: Trainer, tag: str) -> None:
    """The run's remaining steps, a line every 8."""
    while trainer.step < trainer.cfg.steps:
        m = trainer.train_step()
        if m["step"] % 8 == 0:
            print(
                f"  [{tag}] step {m['step']} horizon {m['horizon']} success {m['success']:.2f} "
                f"kl {m.get('kl', 0):.3f} clip {m.get('clip_frac', 0):.3f} {m['time_step']:.1f}s",
                flush=True,
            )


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    root = Path(args.runs_dir)
    base = root / args.base
    sft_params = parse_overrides(args.sft)
    sft = [f"sft.{k}={json.dumps(v)}" for k, v in sft_params.items()]
    recipe = load_recipe(recipe_path("tiny"), [f"tiny.size={args.size}", *sft])
    phases = Phases(base, recipe, print)
    phases.warm_start()
    every = category_ids("babyai", "train", demo_levels())
    dev = every[-args.dev_tasks :]
    overrides = parse_overrides(args.overrides)
    # the dev ids are the highest of the demo's levels: the RL draws stop below them, whatever
    # subset of the levels a configuration trains on
    cats = overrides.get("train_categories", demo_levels())
    below = sum(t < dev[0] for t in category_ids("babyai", "train", cats))
    cfg = rl_config(
        recipe,
        root,
        phases.sft_dir,
        0,
        name=args.tag,
        val_before=True,
        train_limit=below,
        progress=False,
        **overrides,
    )
    trainer = Trainer(cfg)
    trainer.setup()
    t0 = time.perf_counter()
    cache = base / f"dev_before_{args.dev_tasks}_n{cfg.val_n}_t{cfg.val_max_turns}.json"
    if cache.is_file():
        before = json.loads(cache.read_text())
    else:
        before = dev_success(trainer.policy, dev, cfg)
        cache.write_text(json.dumps(before))
    try:
        train(trainer, args.tag)
        rl_s = time.perf_counter() - t0
        after = dev_success(trainer.policy, dev, cfg)
    finally:
        trainer.close()
    row = {
        "tag": args.tag,
        "base": args.base,
        "overrides": overrides,
        "dev_tasks": len(dev),
        "before": before["success"],
        "after": after["success"],
        "gain_points": round(100 * (after["success"] - before["success"]), 1),
        "pass_before": before.get("pass"),
        "pass_after": after.get("pass"),
        "rl_s": round(rl_s, 1),
    }
    print(json.dumps(row), flush=True)
    with open(root / "dev.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
