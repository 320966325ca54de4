"""Benchmark: a real-model recipe (``agentgym train --demo smollm2``, or ``--demo NAME``) end to
end, with its figures.

    python -m bench.experiments.real_model_recipe [KEY=VALUE ...] [--demo smollm2-textcraft] [--runs-dir DIR]
        [--out bench/results/real_model_recipe.md]

Runs the recipe in a process of its own under GNU time (maximum RSS: the whole run's peak) with
the given overrides (none: the packaged recipe, one RL seed), then writes a markdown table from
its ``recipe_report.json``: test success of the SFT model and of each RL seed on each of the
recipe's envs, greedy and sampled, the gains in points with their paired standard errors over test tasks, the seconds of
every phase, SFT and GRPO speed, and the peak memory. A rerun with the same ``--runs-dir`` skips
the phases already done; each phase's seconds are read from what it wrote, so they count once.
A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.common.recipe_runs import launch, phase_seconds, run_figures

ROOT = Path(__file__).resolve().parents[2]


def table(result: dict[str, Any], proc: dict[str, Any]) -> str:
    from agentgym_train.recipes.report import SUMMARY_COLUMNS, summary_rows

    lines = []
    envs = result.get("envs", ["babyai"])
    for env in envs:
        lines += [f"{env}:", ""] if len(envs) > 1 else []
        lines += ["| " + " | ".join(SUMMARY_COLUMNS) + " |", "|---" * len(SUMMARY_COLUMNS) + "|"]
        lines += [
            "| " + " | ".join(row) + " |" for row in summary_rows(result, env if len(envs) > 1 else None)
        ]
        lines.append("")
    run = Path(result["run"])
    rl = result["recipe"]["rl"]
    sft = result["sft"]
    tasks = {
        env: (result["seeds"][0]["by_env"][env] if "by_env" in result["seeds"][0] else result["seeds"][0])[
            "greedy_gain"
        ]["tasks"]
        for env in envs
    }
    lines += [
        f"Test split: {' and '.join(f'{n} {env} test tasks' for env, n in tasks.items())}; greedy once each, sampled "
        f"{rl['val_n']} times each (temperature {rl['val_temperature']}), {rl['val_max_turns']} turns. "
        f"SFT: {result['demos']} expert episodes, {sft['epochs']} epoch(s), {sft['tokens_per_s']} tokens/s, "
        f"peak {sft['peak_rss_gb']} GB. GRPO: {rl['steps']} steps x {rl['tasks_per_step']} tasks x {rl['n']} samples.",
        "",
        "| phase | seconds |",
        "|---|---|",
    ]
    phases = phase_seconds(result)
    lines += [f"| {k} | {v:.1f} |" for k, v in phases.items()]
    lines += [
        f"| total (the phases) | {sum(phases.values()):.1f} |",
        f"| the last launch (phases done by an earlier launch are read back, not rerun) | {proc['wall_s']} |",
        "",
        "| RL seed | s/step | generate s/step | update s/step | sampled tokens/s | peak GB |",
        "|---|---|---|---|---|---|",
    ]
    for s in result["seeds"]:
        f = run_figures(run / f"rl-seed{s['seed']}")
        lines.append(
            f"| {s['seed']} | {f['step_s']:.1f} | {f['generate_s']:.1f} | {f['update_s']:.1f} | "
            f"{f['tokens_per_s']:.1f} | {s['peak_rss_gb']} |"
        )
    lines += [
        "",
        f"Peak memory of the whole recipe (GNU time, maximum RSS, over its {proc['launches']} launch(es)): "
        f"{proc['peak_rss_gb']} GB.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="KEY=VALUE overrides of the recipe (seeds=[0], steps=4 ...)")
    ap.add_argument("--demo", default="smollm2", help="the recipe: smollm2 (BabyAI), smollm2-textcraft, ...")
    ap.add_argument("--runs-dir", type=Path, default=Path("/tmp/agentgym-recipe"), help="where runs/ goes")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "real_model_recipe.md")
    ap.add_argument("--from-run", action="store_true", help="write the table of the run in --runs-dir again")
    args = ap.parse_args()
    args.runs_dir.mkdir(parents=True, exist_ok=True)
    proc = launch(args.runs_dir, args.overrides, from_runs=args.from_run, demo=args.demo)
    result = json.loads((args.runs_dir / "runs" / f"demo-{args.demo}" / "recipe_report.json").read_text())
    result["run"] = str(args.runs_dir / result["run"])  # relative to where the recipe ran
    text = table(result, proc)
    print(text)
    print(json.dumps({"process": proc, "result": result}, indent=1)[:4000])
    args.out.write_text(
        f"# The real-model recipe (`agentgym train --demo {args.demo}`)\n\n"
        f"`python -m bench.experiments.real_model_recipe {' '.join(sys.argv[1:])}`\n\n" + text
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
