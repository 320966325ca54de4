"""BabyAI expert success per level: the test split and the first N train ids.

    python bench/babyai_expert.py [--train 400] [--max-turns 1000]

Prints a markdown table (level, test, train) for the package README, then one JSON line with the
totals. The expert is the env's registered expert, acting through text actions.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

from agentgym_babyai.levels import LEVELS, level_of, short_name

import agentgym
from agentgym.testing import run_expert


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", type=int, default=400, help="how many of the first train ids (default: 400)")
    ap.add_argument("--max-turns", type=int, default=1000, help="expert turn cap per episode (default: 1000)")
    args = ap.parse_args(argv)
    spec = agentgym.env_specs()["babyai"]
    env = spec.make()
    t0 = time.perf_counter()
    table: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"test": [0, 0], "train": [0, 0]})
    failed: dict[str, list[int]] = {"test": [], "train": []}
    for split, ids in (("test", list(spec.splits["test"].task_ids)), ("train", range(args.train))):
        for task_id in ids:
            _, _, success = run_expert(spec, env, task_id, args.max_turns)
            cell = table[short_name(level_of(task_id))][split]
            cell[0] += success
            cell[1] += 1
            if not success:
                failed[split].append(task_id)
    print("| level | test | first train ids |")
    print("|---|---|---|")
    for level in LEVELS:
        row = table[short_name(level)]
        cells = [f"{s}/{n}" if n else "-" for s, n in (row["test"], row["train"])]
        print(f"| {short_name(level)} | {cells[0]} | {cells[1]} |")
    totals = {
        split: {
            "solved": sum(r[split][0] for r in table.values()),
            "tasks": sum(r[split][1] for r in table.values()),
            "failed_ids": failed[split],
        }
        for split in ("test", "train")
    }
    for t in totals.values():
        t["rate"] = round(t["solved"] / t["tasks"], 4)
    print(json.dumps({"seconds": round(time.perf_counter() - t0, 1), **totals}))


if __name__ == "__main__":
    main()
