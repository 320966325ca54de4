"""Benchmark: the real model on all five envs, one table. Each env's packaged recipe (BabyAI's
``smollm2``, ``smollm2-textcraft``, ``smollm2-sciworld``, ``smollm2-search``, ``smollm2-webarena``)
with two RL seeds, and the untrained model (zero-shot) on the same test tasks the same way:

    python -m bench.experiments.real_model_five_envs [--envs sciworld,search] [--seeds 0,1]
        [--runs-dir DIR] [--out bench/results/real_model_five_envs.md] [--from-runs]

Per env: success % and mean score (Avg@1: the mean episode return, each env's partial credit) of
the zero-shot, SFT and RL models, greedy and sampled as the recipe scores them; SFT's gain over
zero-shot and each RL seed's over SFT with the paired standard error over test tasks; the wall
minutes of each phase, the peak memory (the largest process's, GNU time, and the whole process
tree's with the env's JVMs or browsers; the recipe process's as each phase ended), and where an RL
step's time went (generation, env, update); the SFT's work (examples, trained tokens, speed,
loss); what bounds the scores (the demonstrations' turns against the test's turn cap, the test
episodes the cap ended, GRPO's training success, its groups with no signal and steps that trained
nothing, its episodes ended by the horizon or a full context); how each model's greedy test
episodes ended and how many distinct action sequences they played. Resumable per env: each env
runs in ``DIR/ENV`` (the recipe skips the phases it finished; an env whose report holds every seed
is only read back), the table is rewritten after each env.
A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.common.recipe_runs import bench_launches, launch, launch_list, phase_seconds, report_seeds

ROOT = Path(__file__).resolve().parents[2]
DEMOS = {
    "babyai": "smollm2",
    "textcraft": "smollm2-textcraft",
    "sciworld": "smollm2-sciworld",
    "search": "smollm2-search",
    "webarena": "smollm2-webarena",
}
MODES = ("greedy", "sampled")


def zero_shot(run: Path, demo: str) -> dict[str, float]:
    """The untrained model on the recipe's test tasks, greedy and sampled as the recipe scores its
    SFT model (``zero_<mode>.json`` beside the recipe's files); the seconds each took."""
    from agentgym_train.models.gguf import resolve_model
    from agentgym_train.recipes import recipe_path
    from agentgym_train.recipes.runner import close_policy, eval_model, load_recipe, rl_config, sampler

    recipe = load_recipe(recipe_path(demo))
    model = resolve_model(recipe["model"])
    cfg = rl_config(recipe, run, model, recipe["seeds"][0])
    policy = functools.cache(lambda: sampler(model, cfg))
    seconds = {}
    for mode in MODES:  # each one's own seconds, from what it wrote (a rerun reads it back)
        report = eval_model(policy, run / f"zero_{mode}.json", cfg, greedy=mode == "greedy")
        seconds[mode] = round(sum(r["wall_s"] for r in report["envs"].values()), 1)
    if policy.cache_info().currsize:
        close_policy(policy())
    return seconds


def scores(run: Path, env: str, seeds: list[int]) -> dict[str, Any]:
    """Success and mean score of every model, and the paired gains (points, with SEs)."""
    from agentgym_train.recipes.report import paired_gain, per_task

    files = {
        **{f"zero {m}": run / f"zero_{m}.episodes.jsonl" for m in MODES},
        **{f"SFT {m}": run / f"sft_{m}.episodes.jsonl" for m in MODES},
    }
    for s in seeds:
        files[f"RL seed {s} greedy"] = run / f"rl-seed{s}_greedy.episodes.jsonl"
        files[f"RL seed {s} sampled"] = sorted((run / f"rl-seed{s}" / "episodes").glob("val_step_*.jsonl"))[
            -1
        ]
    tasks = {k: {v: per_task(f, env, value=v) for v in ("success", "return")} for k, f in files.items()}
    out: dict[str, Any] = {"models": {}, "gains": {}}
    for k, t in tasks.items():
        out["models"][k] = {v: round(100 * statistics.fmean(t[v].values()), 1) for v in t}
    for mode in MODES:
        pairs = {f"SFT - zero {mode}": (f"zero {mode}", f"SFT {mode}")}
        pairs |= {f"RL seed {s} - SFT {mode}": (f"SFT {mode}", f"RL seed {s} {mode}") for s in seeds}
        for name, (a, b) in pairs.items():
            out["gains"][name] = {v: paired_gain(tasks[a][v], tasks[b][v]) for v in ("success", "return")}
        # the seeds' mean against SFT: each task's gain averaged over the seeds, then paired
        common = set.intersection(*(set(tasks[f"RL seed {s} {mode}"]["success"]) for s in seeds))
        mean = {
            v: {t: statistics.fmean(tasks[f"RL seed {s} {mode}"][v][t] for s in seeds) for t in common}
            for v in ("success", "return")
        }
        out["gains"][f"RL mean - SFT {mode}"] = {
            v: paired_gain(tasks[f"SFT {mode}"][v], mean[v]) for v in ("success", "return")
        }
    out["tasks"] = len(tasks["SFT greedy"]["success"])
    return out


def step_split(rl_run: Path) -> dict[str, float]:
    """Where an RL step's seconds went, as means over the run's steps."""
    from agentgym_train.tracking.plots import read_metrics

    rows = read_metrics(rl_run)

    def mean(key: str) -> float:
        return round(statistics.fmean(r.get(key, 0.0) for r in rows), 1)

    return {
        "step_s": mean("time_step"),
        "generate_s": mean("time_generate"),
        "env_s": mean("time_env"),
        "update_s": mean("time_train"),
    }


def limits(run: Path, seeds: list[int], cap: int, ended: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What bounds an env's scores, read from the run's own files: the demonstrations' turns against
    the test's turn cap, the share of test episodes the cap ended, GRPO's training success (the
    env's success flag under the step's horizon, a mean over steps), how much of its batch carried
    no signal (groups whose samples all earned the same) and the steps that trained no token, and
    the episodes that ran into the step's horizon or filled the context."""

    from agentgym_train.tracking.plots import read_metrics

    from agentgym.trajectory import read_episodes

    def capped(who: str) -> float:  # from ``ended`` (:func:`endings`), which read those episodes
        return round(100 * ended[who]["terminations"].get("max_turns", 0) / ended[who]["episodes"], 1)

    turns = [e.num_turns for e in read_episodes(run / "demos.jsonl")]
    steps = [r for s in seeds for r in read_metrics(run / f"rl-seed{s}")]
    trained = [
        e
        for s in seeds
        for f in sorted((run / f"rl-seed{s}" / "episodes").glob("step_*.jsonl"))
        for e in read_episodes(f)
    ]
    return {
        "demo_turns_median": statistics.median(turns),
        "demos_over_cap": sum(t > cap for t in turns),
        "demos": len(turns),
        "capped_pct": {
            "SFT greedy": capped("SFT"),
            **{f"RL seed {s} greedy": capped(f"RL seed {s}") for s in seeds},
        },
        "train_success_pct": round(100 * statistics.fmean(r["success"] for r in steps), 1),
        "flat_groups_pct": round(100 * statistics.fmean(r["zero_variance_groups"] for r in steps), 1),
        # the update's own count: a step whose every group was flat trains no token (these
        # recipes add no KL or entropy term); a step with no batch at all writes no count
        "steps_untrained": sum(r.get("trained_tokens", 0) == 0 for r in steps),
        "steps": len(steps),
        "horizon_ended_pct": round(100 * statistics.fmean(r["truncation_rate"] for r in steps), 1),
        "context_full_pct": round(100 * statistics.fmean(e.context_full for e in trained), 1),
    }


def endings(run: Path, seeds: list[int]) -> dict[str, dict[str, Any]]:
    """How each model's greedy test episodes ended (counts by termination, as the eval reports count
    them; those that filled the context), and how many distinct action sequences they played: a
    policy that ignores its objective plays the same actions on tasks that start in the same state
    (replies that did not parse count as one action, ``None``)."""
    from agentgym_train.rollout.evaluate import score

    from agentgym.trajectory import read_episodes

    files = {
        "zero": "zero_greedy",
        "SFT": "sft_greedy",
        **{f"RL seed {s}": f"rl-seed{s}_greedy" for s in seeds},
    }
    out = {}
    for who, name in files.items():
        episodes = list(read_episodes(run / f"{name}.episodes.jsonl"))
        out[who] = {
            "episodes": len(episodes),
            "terminations": score(episodes)["terminations"],
            "context_full": sum(e.context_full for e in episodes),
            "distinct_action_sequences": len({tuple(st.action for st in e.steps) for e in episodes}),
        }
    return out


def run_env(env: str, seeds: list[int], runs_dir: Path, from_runs: bool) -> dict[str, Any]:
    """One env's zero-shot scores and recipe (launched unless its report holds every seed)."""
    demo = DEMOS[env]
    arm = runs_dir / env
    run = arm / "runs" / f"demo-{demo}"
    zero_s = zero_shot(run, demo)  # first: it needs nothing of the recipe's, and takes minutes
    done = set(seeds) <= set(report_seeds(run))
    proc = launch(arm, [f"seeds={seeds}"], from_runs=from_runs or done, demo=demo)
    result = json.loads((run / "recipe_report.json").read_text())
    result["run"] = str(run)
    # a launch cut short (a session's end) leaves no GNU time figure: the phases' own peaks (the
    # recipe process's high-water mark as each ended) stand in for it
    own = [result["sft"].get("peak_rss_gb") or 0, *(s.get("peak_rss_gb") or 0 for s in result["seeds"])]
    proc["peak_rss_gb"] = max(proc["peak_rss_gb"], *own)
    phases = phase_seconds(result)
    ended = endings(run, seeds)
    return {
        "env": env,
        "demo": demo,
        "process": proc,
        "scores": scores(run, env, seeds),
        "minutes": {
            "zero-shot (greedy + sampled)": round(sum(zero_s.values()) / 60, 1),
            **{k: round(v / 60, 1) for k, v in phases.items()},
        },
        "rl_steps": {s: step_split(run / f"rl-seed{s}") for s in seeds},
        "limits": limits(run, seeds, result["recipe"]["rl"]["val_max_turns"], ended),
        "endings": ended,
        "recipe": {
            k: result["recipe"]["rl"][k] for k in ("steps", "tasks_per_step", "n", "reward", "val_max_turns")
        },
        "sft": {
            k: result["sft"].get(k)
            for k in (
                "epochs",
                "wall_s",
                "peak_rss_gb",
                "trained_tokens_per_epoch",
                "tokens_per_s",
                "first_step_loss",
                "last_step_loss",
            )
        },
        "rl_peak_gb": {s["seed"]: s["peak_rss_gb"] for s in result["seeds"]},
        "demos": result["demos"],
    }


def table(results: dict[str, dict[str, Any]]) -> str:
    """The five-env tables: scores, gains, minutes, memory, the RL step's split, the SFT, what
    bounds the scores, how the greedy test episodes ended."""

    def gain(g: dict[str, float]) -> str:
        return f"{g['gain']:+.1f} ± {g['se']:.1f}"

    lines = [
        "| env | tasks | model | greedy success % | greedy score | sampled success % | sampled score |",
        "|---|---|---|---|---|---|---|",
    ]
    for env, r in results.items():
        models, seeds = r["scores"]["models"], list(r["rl_steps"])
        for who in ("zero", "SFT", *(f"RL seed {s}" for s in seeds)):
            g, s = models[f"{who} greedy"], models[f"{who} sampled"]
            lines.append(
                f"| {env} | {r['scores']['tasks']} | {who} | {g['success']:.1f} | {g['return'] / 100:.3f} | "
                f"{s['success']:.1f} | {s['return'] / 100:.3f} |"
            )
    lines += [
        "",
        "Gains in points (success) and in hundredths (mean score), with the paired SE over test tasks:",
        "",
        "| env | comparison | greedy success | greedy score | sampled success | sampled score |",
        "|---|---|---|---|---|---|",
    ]
    for env, r in results.items():
        gains = r["scores"]["gains"]
        for name in ("SFT - zero", *(f"RL seed {s} - SFT" for s in r["rl_steps"]), "RL mean - SFT"):
            g, s = gains[f"{name} greedy"], gains[f"{name} sampled"]
            lines.append(
                f"| {env} | {name} | {gain(g['success'])} | {gain(g['return'])} | "
                f"{gain(s['success'])} | {gain(s['return'])} |"
            )
    lines += [
        "",
        "| env | recipe | zero-shot min | demos + SFT min | SFT evals min | RL min per seed (steps + sampled eval; greedy eval) | peak GB (process; tree; process as SFT, RL seeds ended) | RL step s (generate / env / update) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for env, r in results.items():
        m, rc = r["minutes"], r["recipe"]
        rl = "; ".join(
            f"{m[f'RL seed {s}: GRPO steps and the sampled test split after']} + {m[f'RL seed {s}: test split greedy']}"
            for s in r["rl_steps"]
        )
        split = "; ".join(
            f"{x['step_s']} ({x['generate_s']} / {x['env_s']} / {x['update_s']})"
            for x in r["rl_steps"].values()
        )
        sft = m["expert demonstrations"] + m["SFT"]
        evals = m["SFT model, test split greedy"] + m["SFT model, test split sampled"]
        lines.append(
            f"| {env} | {r['demo']}: {rc['steps']} x {rc['tasks_per_step']} x {rc['n']}, reward {rc['reward']}, "
            f"{rc['val_max_turns']} turns | {m['zero-shot (greedy + sampled)']} | {sft:.1f} | {evals:.1f} | {rl} | "
            f"{r['process']['peak_rss_gb']}; {r['process'].get('peak_tree_gb', '-')}; {phase_peaks(r)} | {split} |"
        )
    lines += [
        "",
        "What bounds them: the demonstrations' turns against the test's turn cap, the test episodes the "
        "cap ended (greedy; an episode cut by a full context ends as the cap ends it, and counts here: "
        "the endings table below separates them), and in RL's steps (both seeds): the training episodes that succeeded, the "
        "groups with no signal (every sample earned the same), the steps that trained no token, the "
        "episodes the step's horizon ended and those that filled the context:",
        "",
        "| env | demos (median turns; over the cap) | turn cap | cap ended % (SFT; RL seeds) | RL train success % | RL flat groups % | RL steps untrained | RL horizon ended % | RL context full % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for env, r in results.items():
        if "limits" not in r:  # a record written before this table existed
            continue
        lim, capped = r["limits"], r["limits"]["capped_pct"]
        untrained = f"{lim['steps_untrained']} of {lim['steps']}" if "steps" in lim else "-"
        lines.append(
            f"| {env} | {lim['demos']} ({lim['demo_turns_median']}; {lim['demos_over_cap']}) | "
            f"{r['recipe']['val_max_turns']} | {'; '.join(str(v) for v in capped.values())} | "
            f"{lim.get('train_success_pct', '-')} | {lim['flat_groups_pct']} | {untrained} | "
            f"{lim['horizon_ended_pct']} | {lim['context_full_pct']} |"
        )
    lines += sft_table(results) + endings_table(results)
    return "\n".join(lines) + "\n"


def phase_peaks(r: dict[str, Any]) -> str:
    """The recipe process's peak GB as the SFT and each RL seed ended (it only rises within a
    launch), where the record holds them."""
    if "rl_peak_gb" not in r:  # a record written before these were kept
        return "-"
    return ", ".join(
        "-" if g is None else str(g) for g in [r["sft"]["peak_rss_gb"], *r["rl_peak_gb"].values()]
    )


def sft_table(results: dict[str, dict[str, Any]]) -> list[str]:
    """The SFT's work per env, where the record holds it."""
    lines = [
        "",
        "The SFT: its examples (the expert's successes), the assistant tokens it trains on per epoch, "
        "the tokens it reads per second (every token of a row: prompt, observations and replies) and "
        "the batch loss of its first and last step:",
        "",
        "| env | examples | epochs | trained tokens per epoch | tokens/s | loss (first step -> last) |",
        "|---|---|---|---|---|---|",
    ]
    for env, r in results.items():
        sft = r["sft"]
        if "tokens_per_s" not in sft:  # a record written before these were kept
            continue
        lines.append(
            f"| {env} | {r['demos']} | {sft['epochs']} | {sft['trained_tokens_per_epoch']} | "
            f"{sft['tokens_per_s']} | {sft['first_step_loss']} -> {sft['last_step_loss']} |"
        )
    return lines


def endings_table(results: dict[str, dict[str, Any]]) -> list[str]:
    """How the greedy test episodes ended, per env and model."""
    from agentgym.trajectory import TERMINATIONS

    seen = {t for r in results.values() for e in r.get("endings", {}).values() for t in e["terminations"]}
    kinds = [t for t in TERMINATIONS if t in seen]
    lines = [
        "",
        "How the greedy test episodes ended (episodes by termination; those that filled the context, "
        "whatever ended them; the distinct action sequences they played):",
        "",
        f"| env | model | episodes | {' | '.join(kinds)} | context full | distinct action sequences |",
        "|---|---|---|" + "---|" * (len(kinds) + 2),
    ]
    for env, r in results.items():
        for who, e in r.get("endings", {}).items():  # absent from records written before this table
            counts = " | ".join(str(e["terminations"].get(t, 0)) for t in kinds)
            lines.append(
                f"| {env} | {who} | {e['episodes']} | {counts} | {e['context_full']} | "
                f"{e['distinct_action_sequences']} |"
            )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", default=",".join(DEMOS), help="comma-separated, in the order to run them")
    ap.add_argument("--seeds", default="0,1", help="RL seeds per env")
    ap.add_argument("--runs-dir", type=Path, default=Path("/tmp/agentgym-five-envs"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "real_model_five_envs.md")
    ap.add_argument(
        "--from-runs", action="store_true", help="launch no recipe: the table of what --runs-dir holds"
    )
    args = ap.parse_args()
    envs = args.envs.split(",")
    if unknown := [e for e in envs if e not in DEMOS]:
        sys.exit(f"--envs: unknown {unknown} (known: {', '.join(DEMOS)})")
    seeds = [int(s) for s in args.seeds.split(",")]
    record = args.out.with_suffix(".json")
    results = json.loads(record.read_text()) if record.exists() else {}
    for env in envs:
        print(f"== {env}: {DEMOS[env]}, RL seeds {seeds}", flush=True)
        # the table is rewritten env by env: each env names the launches that wrote it
        launches = bench_launches(
            "bench.experiments.real_model_five_envs",
            results.get(env, {}).get("launches"),
            read_back=args.from_runs,
        )
        results[env] = {**run_env(env, seeds, args.runs_dir, args.from_runs), "launches": launches}
        ordered = {e: results[e] for e in DEMOS if e in results}
        record.write_text(json.dumps(ordered, indent=1))
        args.out.write_text(
            "# The real model on five envs (`bench/experiments/real_model_five_envs.py`)\n\n"
            "Written env by env:\n\n"
            + "".join(f"- {e}: {launch_list(r['launches'])}\n" for e, r in ordered.items())
            + "\nSmolLM2-135M-Instruct; each env's packaged recipe "
            "(`agentgym train --demo NAME`) with the RL seeds shown; zero-shot: the untrained model "
            "scored the same way. Score: the mean episode return (Avg@1; SciWorld's partial credit, "
            "BabyAI's reward less for each step taken, 0/1 elsewhere).\n\n" + table(ordered)
        )
        print(table(ordered), flush=True)


if __name__ == "__main__":
    main()
