"""BabyAI expert success per level: the test split and the first N train ids, per turn budget.

    python -m bench.experiments.babyai_expert [--train 400] [--budgets 20,1000]

Prints a markdown table (level, then test and train success for each budget) for the package
README, then one JSON line with the totals. The expert is the env's registered expert, acting
through text actions; 20 turns is BabyAI's turn cap in evaluation.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from agentgym_babyai.levels import LEVELS, level_of, short_name

import agentgym
from agentgym.testing import run_expert
from bench.common.findings import Findings


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", type=int, default=400, help="how many of the first train ids (default: 400)")
    ap.add_argument(
        "--budgets", default="20,1000", help="comma-separated expert turn caps per episode (default: 20,1000)"
    )
    args = ap.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    spec = agentgym.env_specs()["babyai"]
    env = spec.make()
    t0 = time.perf_counter()
    runs = [(f"{split} @{b}", split, b) for b in budgets for split in ("test", "train")]
    table: dict[str, dict[str, list[int]]] = defaultdict(lambda: {run: [0, 0] for run, _, _ in runs})
    failed: dict[str, list[int]] = {run: [] for run, _, _ in runs}
    for run, split, budget in runs:
        ids = list(spec.splits["test"].task_ids) if split == "test" else range(args.train)
        for task_id in ids:
            _, _, success = run_expert(spec, env, task_id, budget)
            cell = table[short_name(level_of(task_id))][run]
            cell[0] += success
            cell[1] += 1
            if not success:
                failed[run].append(task_id)
    print("| level | " + " | ".join(run.replace("train", "first train ids") for run, _, _ in runs) + " |")
    print("|---" * (len(runs) + 1) + "|")
    for level in LEVELS:
        row = table[short_name(level)]
        cells = [f"{s}/{n}" if n else "-" for s, n in (row[run] for run, _, _ in runs)]
        print(f"| {short_name(level)} | " + " | ".join(cells) + " |")
    totals = {
        run: {
            "solved": sum(r[run][0] for r in table.values()),
            "tasks": sum(r[run][1] for r in table.values()),
            "failed_ids": failed[run],
        }
        for run, _, _ in runs
    }
    for t in totals.values():
        t["rate"] = round(t["solved"] / t["tasks"], 4)
    Findings().show({"seconds": round(time.perf_counter() - t0, 1), **totals}, indent=None)


if __name__ == "__main__":
    main()
