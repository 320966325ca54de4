"""Benchmark: the native trainer's two samplers in the real-model recipe's configuration:
``rollout=hf`` (the learner's own model) against ``rollout=vllm`` (a vLLM engine in the trainer's
process, given the trained weights after every update), on the same GRPO steps from the same SFT
checkpoint of SmolLM2-135M-Instruct. Runs in the hatch environment that has vLLM's CPU build:

    hatch run vllm:python -m bench.speed.real_model_rollout [--model DIR] [--demos 40] [--work DIR]
        [--steps 3] [--val-limit 8] [--val-n 2] [--tolerance 0.1]
        [--out bench/results/real_model_rollout.md]

The model: ``--model`` (an SFT checkpoint), else the recipe's own warm start (expert
demonstrations on the first ``--demos`` BabyAI train tasks, the recipe's SFT) made once in
``--work`` and reused. Both runs: the packaged recipe's RL stage (``recipes/smollm2.yaml``:
LoRA on a bfloat16 base, 4 tasks x 4 samples, 32 new tokens a reply, the same seed) with
``--steps`` steps, its ScalingInter rounds 4 -> 6 -> 8 advanced every step, and the test split's
first ``--val-limit`` tasks x ``--val-n`` samples after training (the trainer's validation), once
with each ``rollout``. Each run is a process of its own (``python -m agentgym train CONFIG``)
under GNU time, whose maximum resident set size is the peak RSS.

Per-step seconds come from the run's ``metrics.jsonl`` (generate: the sampler's own seconds;
update: scoring, the update and, for vllm, the weight sync); validation seconds are the run's
training wall time (``report.json``) less its steps. The work of each side (episodes, turns,
sampled and trained tokens, errors) is read from its episode files (``bench/common/equal_work.py``):
the two samplers draw different tokens at temperature 1, so a ``ratio vllm/hf`` line is printed,
and a ratio row written, only when both ran without errors and every count agrees within
``--tolerance``; otherwise the line says why not. Writes a markdown table. A benchmark: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common.equal_work import WORK_KEYS, differences, ratio_line
from bench.common.procs import timed
from bench.common.recipe_runs import derive, run_figures

ROLLOUTS = ("hf", "vllm")
#: The table's figures: (column, key in a run's results).
FIGURES = (
    ("generate s/step", "generate_s"),
    ("update s/step", "update_s"),
    ("step s", "step_s"),
    ("sampled tokens/s", "tokens_per_s"),
    ("generate s per 1k sampled tokens", "generate_s_per_1k"),
    ("update s per 1k trained tokens", "update_s_per_1k"),
    ("validation wall s", "validation_s"),
    ("process wall s", "wall_s"),
    ("peak RSS GB", "peak_rss_gb"),
)


def sft_checkpoint(args: argparse.Namespace) -> Path:
    """``--model``, or the recipe's warm start on ``--demos`` demonstrations (kept in ``--work``)."""
    if args.model:
        return Path(args.model)
    from agentgym_train.recipes import recipe_path
    from agentgym_train.recipes.runner import Phases, load_recipe

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    phases = Phases(work, load_recipe(recipe_path("smollm2"), overrides=[f"demos={args.demos}"]), print)
    phases.warm_start()  # skipped when its SFT model exists
    return phases.sft_dir


def config_file(args: argparse.Namespace, model: Path, runs: Path, rollout: str) -> Path:
    """The recipe's RL stage as a config file for ``agentgym train``: only the steps, the
    validation's size and the sampler differ from the packaged recipe."""
    import yaml
    from agentgym_train.recipes.runner import load_recipe, rl_config

    recipe = load_recipe(
        overrides=[
            f"steps={args.steps}",
            "horizon_params={rounds: [4, 6, 8], every: 1}",
            f"val_limit={args.val_limit}",
            f"val_n={args.val_n}",
            f"rollout={rollout}",
        ]
    )
    cfg = rl_config(recipe, runs, model, args.seed).to_dict()
    cfg["name"] = rollout
    path = runs.parent / f"{rollout}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="an SFT checkpoint (default: the recipe's warm start)")
    ap.add_argument("--demos", type=int, default=40, help="demonstrations for the warm start")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "agentgym-bench-rollout"),
                    help="where the warm start is kept between runs")  # fmt: skip
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--val-limit", type=int, default=8)
    ap.add_argument("--val-n", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=0.10, help="relative difference allowed in work")
    ap.add_argument("--kv-cache-gb", default="2", help="VLLM_CPU_KVCACHE_SPACE for the vllm run")
    ap.add_argument("--only", default=",".join(ROLLOUTS), help="the rollouts to run (hf,vllm)")
    ap.add_argument("--out", default="bench/results/real_model_rollout.md")
    ap.add_argument("--from-json", default=None, help="write the table again from a run's saved JSON")
    args = ap.parse_args()
    if args.from_json:
        results = json.loads(Path(args.from_json).read_text())
        for r in results["runs"].values():
            derive(r)
        Path(args.out).write_text(table(results))
        return
    model = sft_checkpoint(args)
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    env["VLLM_CPU_KVCACHE_SPACE"] = env.get("VLLM_CPU_KVCACHE_SPACE", args.kv_cache_gb)
    results: dict[str, Any] = {"model": str(model), "settings": vars(args), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        for rollout in args.only.split(","):
            cmd = [
                sys.executable,
                "-m",
                "agentgym",
                "train",
                str(config_file(args, model, tmp / "runs", rollout)),
            ]
            r = timed(cmd, env, tmp / f"{rollout}.log")
            if r["status"] == 0:
                r.update(run_figures(tmp / "runs" / rollout))
            results["runs"][rollout] = r
            print(rollout, json.dumps(r), flush=True)
    runs = results["runs"]
    results["not_equal"] = not_equal(runs, args.tolerance)
    print(json.dumps(results))
    if all(k in runs for k in ROLLOUTS):
        for label, key in FIGURES:
            print(
                ratio_line(
                    f"vllm/hf {label}", runs["vllm"].get(key), runs["hf"].get(key), results["not_equal"]
                )
            )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).with_suffix(".json").write_text(json.dumps(results, indent=1))
    Path(args.out).write_text(table(results))


def not_equal(runs: dict[str, Any], tolerance: float) -> list[str]:
    """Why the two runs are not the same work (empty when they are)."""
    if not all(k in runs for k in ROLLOUTS):
        return ["only one side ran"]
    return differences(runs["hf"], runs["vllm"], tolerance, names=ROLLOUTS)


def table(results: dict[str, Any]) -> str:
    s, runs = results["settings"], results["runs"]
    source = (
        f"`{s['model']}`"
        if s["model"]
        else f"the recipe's SFT on the expert's episodes of the first {s['demos']} train tasks"
    )
    work_cols = [*WORK_KEYS, "errors"]
    lines = [
        "# The native trainer's samplers in the real-model recipe: rollout=hf against rollout=vllm",
        "",
        f"Made by `hatch run vllm:python -m bench.speed.real_model_rollout` in one run on this machine "
        f"({os.cpu_count()} cores): the recipe's RL stage from {source}, {s['steps']} steps "
        f"(ScalingInter 4 -> 6 -> 8 turns, one round a step), validation {s['val_limit']} test tasks x "
        f"{s['val_n']} after. Per-step figures are means over the steps; update includes vllm's weight "
        "sync; peak RSS is GNU time's; the work columns count every training episode of the run.",
        "",
        "| rollout | "
        + " | ".join(label for label, _ in FIGURES)
        + " | sync s/step | "
        + " | ".join(work_cols)
        + " | status |",
        "|---|" + "---|" * (len(FIGURES) + len(work_cols) + 2),
    ]
    for rollout, r in runs.items():
        cells = [str(r.get(key, "")) for _, key in FIGURES]
        work = [str(r.get(key, "")) for key in work_cols]
        lines.append(
            f"| {rollout} | " + " | ".join(cells) + f" | {r.get('sync_s', '')} | " + " | ".join(work)
            + f" | {r['status']} |"
        )  # fmt: skip
    if results["not_equal"]:
        lines += ["", f"No vllm/hf ratio: not the same work ({'; '.join(results['not_equal'])}; "
                  f"tolerance {s['tolerance']:.0%})."]  # fmt: skip
    else:
        ratios = []
        for _, key in FIGURES:
            a, b = runs["vllm"].get(key), runs["hf"].get(key)
            ratios.append(f"{a / b:.2f}" if a and b else "")
        cells = ["vllm/hf", *ratios, "", *[""] * len(work_cols), ""]
        lines.append("| " + " | ".join(cells) + " |")
        lines += ["", f"The same work on both sides (every count within {s['tolerance']:.0%}, no errors)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
