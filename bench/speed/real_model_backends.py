"""Benchmark: the ``hf`` and ``vllm`` policies on the same multi-turn BabyAI episodes with a real
model (SmolLM2-135M-Instruct): sampled tokens per second side by side, and whether their greedy
episodes take the same actions. Runs in the hatch environment that has vLLM's CPU build:

    hatch run vllm:python -m bench.speed.real_model_backends [--model smollm2] [--tasks 8] [--max-turns 6]
        [--dtypes float32,bfloat16] [--out bench/results/real_model_backends.md]

Per dtype: the first ``--tasks`` BabyAI test tasks, greedy, ``--max-turns`` turns of at most 64
new tokens, ``format_hint`` on (so that episodes run their turns instead of ending in format
errors), all episodes in one batch, each backend in turn on the same engine settings. Tokens/s is
sampled tokens over the rollout's generation seconds (the engine's own clock; env time excluded).
Actions are compared turn by turn. Each side's work (episodes, turns, sampled tokens, errors;
``bench/common/equal_work.py``) is recorded: greedy decoding on two backends takes the same actions only
where their kernels round alike, so a ``ratio vllm/hf tokens_per_s`` line is printed only when both
sides' counts agree within ``--tolerance`` and neither had errors; otherwise the line says why.
A forward and backward pass (what the trainer runs) is timed in each dtype on the same episodes:
the first dtype's hf episodes, so every dtype does the same work. Every hf figure is taken before
the first vLLM engine starts: vLLM's CPU worker binds the process's threads when it starts. Prints one JSON object
and the ratio lines; writes a markdown table. A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from agentgym_train.models.loading import model_dir
from agentgym_train.policies import make_policy
from agentgym_train.policies.base import Sampling
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs
from agentgym_train.rollout.tasks import split_ids

from agentgym.plugins import get_env_spec
from bench.common.equal_work import differences, ratio_line, work_of_episodes
from bench.common.procs import machine


def play(policy: Any, tasks: list[Task], max_turns: int) -> tuple[list[Any], dict[str, Any]]:
    engine = RolloutEngine(
        policy,
        {"babyai": LocalEnvs(get_env_spec("babyai"))},
        sampling=Sampling(temperature=0.0, max_new_tokens=64, seed=0),
        max_turns=max_turns,
        batch_size=len(tasks),
        format_hint=True,
    )
    t = time.perf_counter()
    episodes = engine.run(tasks)
    s = engine.stats
    return episodes, {
        **work_of_episodes(episodes),
        "generate_s": round(s.generate_s, 2),
        "wall_s": round(time.perf_counter() - t, 2),
        "tokens_per_s": round(s.sampled_tokens / max(s.generate_s, 1e-9), 1),
        "success": sum(ep.success for ep in episodes) / len(episodes),
    }


def fwd_bwd_speed(model: Path, episodes: list[Any], dtype: str) -> dict[str, Any]:
    """Forward and backward over the episodes' tokens (the loss at the sampled ones) in
    micro-batches of at most 2,048 padded tokens, as the trainer runs them: padded tokens per second."""
    import torch
    from agentgym_train.models.loading import load_model
    from agentgym_train.models.logprobs import micro_batches, pad_rows, sampled_logprobs

    net = load_model(model, dtype=dtype, device="cpu").train()
    rows = sorted((ep.tokens.ids, ep.tokens.loss_mask) for ep in episodes)
    padded, t = 0, time.perf_counter()
    for group in micro_batches([len(ids) for ids, _ in rows], 2048):
        ids, mask = pad_rows([rows[i][0] for i in group], masks=[rows[i][1] for i in group])
        lp, _, _ = sampled_logprobs(net, ids, mask)
        (-(lp * mask).sum() / mask.sum().clamp(min=1)).backward()
        padded += ids.numel()
    seconds = time.perf_counter() - t
    del net
    torch.set_grad_enabled(True)
    return {"padded_tokens": padded, "seconds": round(seconds, 2), "tokens_per_s": round(padded / seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--tolerance", type=float, default=0.10, help="relative difference allowed in work")
    ap.add_argument("--out", default="bench/results/real_model_backends.md")
    args = ap.parse_args()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    model = model_dir(args.model)
    tasks = [Task("babyai", t, split="test") for t in split_ids("babyai", "test", args.tasks)]
    dtypes = args.dtypes.split(",")
    results: dict[str, Any] = {
        "model": str(model),
        "machine": machine(),
        "tasks": args.tasks,
        "max_turns": args.max_turns,
        "tolerance": args.tolerance,
        "runs": {},
        "not_equal": {},
        "fwd_bwd": {},
    }
    # every hf figure before the first vLLM engine: vLLM's CPU worker binds the process's threads
    # (and refuses torch.set_num_threads after), so torch's own runs are kept clear of it
    actions: dict[str, dict[str, list[Any]]] = {dtype: {} for dtype in dtypes}
    fixed: list[Any] = []  # the episodes every dtype's forward and backward runs on
    for backend in ("hf", "vllm"):
        for dtype in dtypes:
            extra = {"max_model_len": 8192} if backend == "vllm" else {"device": "cpu"}
            policy = make_policy(backend, model=str(model), dtype=dtype, **extra)
            episodes, fig = play(policy, tasks, args.max_turns)
            actions[dtype][backend] = [[st.action for st in ep.steps] for ep in episodes]
            fixed = fixed or episodes
            results["runs"][f"{dtype}/{backend}"] = fig
            print(dtype, backend, json.dumps(fig), flush=True)
            del policy
        if backend == "hf":
            for dtype in dtypes:
                results["fwd_bwd"][dtype] = fwd_bwd_speed(model, fixed, dtype)
                print(dtype, "fwd+bwd", json.dumps(results["fwd_bwd"][dtype]), flush=True)
    for dtype in dtypes:
        hf_actions, vllm_actions = actions[dtype]["hf"], actions[dtype]["vllm"]
        same = [a == b for a, b in zip(hf_actions, vllm_actions, strict=True)]
        turns = [
            x == y for a, b in zip(hf_actions, vllm_actions, strict=True) for x, y in zip(a, b, strict=False)
        ]
        results["runs"][f"{dtype}/same_actions"] = {
            "episodes_identical": f"{sum(same)}/{len(same)}",
            "turns_identical": f"{sum(turns)}/{len(turns)}",
        }
        print(dtype, "same actions", json.dumps(results["runs"][f"{dtype}/same_actions"]), flush=True)
        hf, vl = results["runs"][f"{dtype}/hf"], results["runs"][f"{dtype}/vllm"]
        results["not_equal"][dtype] = differences(hf, vl, args.tolerance, names=("hf", "vllm"))
    print(json.dumps(results))
    for dtype in dtypes:
        hf, vl = results["runs"][f"{dtype}/hf"], results["runs"][f"{dtype}/vllm"]
        why = results["not_equal"][dtype]
        print(ratio_line(f"vllm/hf tokens_per_s ({dtype})", vl["tokens_per_s"], hf["tokens_per_s"], why))
    if len(dtypes) > 1:  # the same padded tokens in every dtype, by construction
        first, last = results["fwd_bwd"][dtypes[0]], results["fwd_bwd"][dtypes[-1]]
        print(ratio_line(f"fwd+bwd tokens_per_s {dtypes[-1]}/{dtypes[0]}", last["tokens_per_s"],
                         first["tokens_per_s"], []))  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table(results))


def table(results: dict[str, Any]) -> str:
    lines = [
        f"# hf vs vllm policies on SmolLM2-135M-Instruct: {results['tasks']} BabyAI test tasks, greedy, "
        f"{results['max_turns']} turns",
        "",
        "Made by `hatch run vllm:python -m bench.speed.real_model_backends` in one run "
        f"({results['machine']}). A ratio is "
        f"given only where both sides did the same work (every count within {results['tolerance']:.0%}, "
        "no errors).",
        "",
        "| dtype | backend | episodes | turns | sampled tokens | errors | generate s | tokens/s | success |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    dtypes = list(dict.fromkeys(key.split("/")[0] for key in results["runs"]))
    for dtype, what in ((d, w) for d in dtypes for w in ("hf", "vllm", "same_actions")):
        r = results["runs"][f"{dtype}/{what}"]
        if what == "same_actions":
            lines.append(
                f"| {dtype} | same greedy actions | episodes {r['episodes_identical']}, "
                f"turns {r['turns_identical']} | | | | | | |"
            )
            why = results["not_equal"][dtype]
            hf, vl = results["runs"][f"{dtype}/hf"], results["runs"][f"{dtype}/vllm"]
            ratio = "" if why else f"{vl['tokens_per_s'] / max(hf['tokens_per_s'], 1e-9):.2f}"
            note = f"no ratio: {'; '.join(why)}" if why else ""
            lines.append(f"| {dtype} | vllm/hf | {note} | | | | | {ratio} | |")
        else:
            lines.append(
                f"| {dtype} | {what} | {r['episodes']} | {r['turns']} | {r['sampled_tokens']} | {r['errors']} | "
                f"{r['generate_s']} | {r['tokens_per_s']} | {r['success']:.2f} |"
            )
    lines += [
        "",
        "Forward and backward (2,048-token micro-batches, the trainer's way) on the same episodes in "
        "every dtype (the first dtype's hf episodes):",
        "",
        "| dtype | padded tokens | seconds | tokens/s |",
        "|---|---|---|---|",
    ]
    for dtype, r in results["fwd_bwd"].items():
        lines.append(f"| {dtype} | {r['padded_tokens']} | {r['seconds']} | {r['tokens_per_s']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
