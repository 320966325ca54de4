"""Benchmark: a real pretrained model zero-shot on every env, with the agent's robustness options
off and on, greedy and sampled, in one run.

    python -m bench.experiments.real_model_zero_shot [--model smollm2] [--envs babyai,textcraft,sciworld,search,webarena]
        [--limit 6] [--max-turns 6] [--max-new-tokens 64] [--tolerance 0.1]
        [--out bench/results/real_model_zero_shot.md]

For each env: the first ``--limit`` task ids of its test split (a fixed subset), one episode per
task (Avg@1), ``--max-turns`` turns, each env's own prompt and parser. Four settings per env: the
agent as it was (``plain``: the env's prompt, its parser alone) and with the robustness options
(``robust``: ``format_hint`` and ``match_actions``), each greedy (temperature 0) and sampled
(temperature 1, the RL sampling). Per setting: Avg@1, success, the invalid-action rate (turns whose
reply did not parse or whose action the env rejected), the format-error rate, the share of
actions matched from free text, mean turns, and the time, and its work (``bench/common/equal_work.py``,
from its episodes: episodes, turns, sampled tokens, errors). Prints one JSON object and a ratio
(robust/plain greedy invalid-action rate, the mean over the envs), only when in every env the two
greedy runs had no errors, ran the same episodes (exactly) and the same turns within
``--tolerance`` (default 0.10: the two agents' replies differ, and with them when episodes end),
else ``no ratio ...: not the same work (...)``; writes a markdown table with the work columns.
An env that cannot run here (no Java, no Chromium) is reported as skipped. A benchmark: it asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from agentgym_train.policies.base import Sampling
from agentgym_train.policies.hf import HFPolicy
from agentgym_train.rollout.evaluate import evaluate

from agentgym.plugins import get_env_spec
from bench.common.equal_work import differences, ratio_line, work_of_episodes

SETTINGS = {
    "plain": {"format_hint": False, "match_actions": False},
    "robust": {"format_hint": True, "match_actions": True},
}
MODES = {"greedy": 0.0, "sampled": 1.0}


def runnable(env: str) -> str | None:
    """Why ``env`` cannot run on this machine, or None."""
    needs = get_env_spec(env).requires
    if "java" in needs and not shutil.which("java"):
        return "no java"
    if "chromium" in needs and not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return "no chromium"
    return None


def figures(report: dict[str, Any], episodes: list[Any], seconds: float) -> dict[str, Any]:
    steps = [st for ep in episodes for st in ep.steps]
    n = max(len(steps), 1)
    (r,) = report["envs"].values()
    return {
        "tasks": r["tasks"],
        "avg1": round(r["avg"], 3),
        "success": round(r["success"], 3),
        "invalid_action_rate": round(sum(not st.valid_action for st in steps) / n, 3),
        "format_error_rate": round(sum(bool(st.info.get("format_error")) for st in steps) / n, 3),
        "matched_rate": round(sum(bool(st.info.get("matched_action")) for st in steps) / n, 3),
        "mean_turns": round(r["mean_turns"], 2),
        "terminations": r["terminations"],
        "seconds": round(seconds, 1),
        "work": work_of_episodes(episodes),
    }


def not_equal(ran: dict[str, dict[str, Any]], tolerance: float) -> list[str]:
    """Why the greedy plain and robust runs are not the same work, env by env (empty when they are)."""
    if not ran:
        return ["no env ran"]
    why = []
    for env, rows in ran.items():
        if "plain/greedy" not in rows or "robust/greedy" not in rows:
            why.append(f"{env}: a greedy side did not run")
            continue
        plain, robust = rows["plain/greedy"]["work"], rows["robust/greedy"]["work"]
        names = ("plain", "robust")
        found = differences(plain, robust, 0.0, names, ("episodes",))
        found += differences({**plain, "errors": 0}, {**robust, "errors": 0}, tolerance, names, ("turns",))
        why += [f"{env}: {w}" for w in found]
    return why


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--envs", default="babyai,textcraft,sciworld,search,webarena")
    ap.add_argument("--limit", type=int, default=6)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--settings", default="plain,robust")
    ap.add_argument("--modes", default="greedy,sampled")
    ap.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="relative difference allowed between plain's and robust's turns (episodes: exact; default: 0.10)",
    )
    ap.add_argument("--out", default="bench/results/real_model_zero_shot.md")
    args = ap.parse_args()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    t0 = time.perf_counter()
    policy = HFPolicy(args.model, dtype=args.dtype)
    results: dict[str, Any] = {
        "model": args.model,
        "dtype": str(next(policy.model.parameters()).dtype).removeprefix("torch."),
        "limit": args.limit,
        "max_turns": args.max_turns,
        "max_new_tokens": args.max_new_tokens,
        "envs": {},
    }
    for env in args.envs.split(","):
        why = runnable(env)
        if why:
            results["envs"][env] = {"skipped": why}
            continue
        rows = results["envs"][env] = {}
        for setting in args.settings.split(","):
            for mode in args.modes.split(","):
                sampling = Sampling(temperature=MODES[mode], max_new_tokens=args.max_new_tokens, seed=0)
                t = time.perf_counter()
                report, episodes = evaluate(
                    [env],
                    policy,
                    split="test",
                    n=1,
                    limit=args.limit,
                    max_turns=args.max_turns,
                    sampling=sampling,
                    **SETTINGS[setting],
                )
                rows[f"{setting}/{mode}"] = figures(report, episodes, time.perf_counter() - t)
                print(env, setting, mode, json.dumps(rows[f"{setting}/{mode}"]), flush=True)
    results["wall_s"] = round(time.perf_counter() - t0, 1)
    ran = {env: r for env, r in results["envs"].items() if "skipped" not in r}
    results["tolerance"] = args.tolerance
    results["not_equal"] = not_equal(ran, args.tolerance)
    print(json.dumps(results))

    def mean_invalid(key: str) -> float:
        vals = [r[key]["invalid_action_rate"] for r in ran.values() if key in r]
        return sum(vals) / max(len(vals), 1)

    if {"plain", "robust"} <= set(args.settings.split(",")) and "greedy" in args.modes.split(","):
        plain = mean_invalid("plain/greedy")
        print(
            ratio_line(
                "robust/plain invalid-action rate (greedy)",
                mean_invalid("robust/greedy"),
                max(plain, 1e-9),
                results["not_equal"],
            )
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table(results))


def table(results: dict[str, Any]) -> str:
    lines = [
        f"# Zero-shot: {results['model']} ({results['dtype']}), first {results['limit']} test tasks per env, "
        f"{results['max_turns']} turns, {results['max_new_tokens']} new tokens a turn",
        "",
        "`plain`: the env's prompt and parser alone; `robust`: with `format_hint` and `match_actions`. "
        "Made by `bench/experiments/real_model_zero_shot.py` in one run "
        f"({results['wall_s']:.0f} s).",
        "",
        "| env | agent | sampling | Avg@1 | success % | invalid actions % | format errors % | matched % | mean turns "
        "| time s | episodes | turns | sampled tokens | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for env, rows in results["envs"].items():
        if "skipped" in rows:
            lines.append(f"| {env} | skipped: {rows['skipped']} | | | | | | | | | | | | |")
            continue
        for key, r in rows.items():
            setting, mode = key.split("/")
            w = r["work"]
            lines.append(
                f"| {env} | {setting} | {mode} | {r['avg1']:.3f} | {100 * r['success']:.1f} | "
                f"{100 * r['invalid_action_rate']:.1f} | {100 * r['format_error_rate']:.1f} | "
                f"{100 * r['matched_rate']:.1f} | {r['mean_turns']:.1f} | {r['seconds']:.0f} | "
                f"{w['episodes']} | {w['turns']} | {w['sampled_tokens']} | {w['errors']} |"
            )
    if results["not_equal"]:
        lines += ["", f"No robust/plain ratio: not the same work ({'; '.join(results['not_equal'])})."]
    else:
        lines += [
            "",
            f"robust/plain greedy runs did the same work in every env (the same episodes, turns within "
            f"{results['tolerance']:.0%}, no errors).",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
