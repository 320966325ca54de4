"""Benchmark: the ``hf`` and ``vllm`` policies on the same multi-turn BabyAI episodes with a real
model (SmolLM2-135M-Instruct): sampled tokens per second side by side, and whether their greedy
episodes take the same actions. Runs in the hatch environment that has vLLM's CPU build:

    hatch run vllm:python bench/real_model_backends.py [--model smollm2] [--tasks 8] [--max-turns 6]
        [--dtypes float32,bfloat16] [--out bench/results/real_model_backends.md]

Per dtype: the first ``--tasks`` BabyAI test tasks, greedy, ``--max-turns`` turns of at most 64
new tokens, ``format_hint`` on (so that episodes run their turns instead of ending in format
errors), all episodes in one batch, each backend in turn on the same engine settings. Tokens/s is
sampled tokens over the rollout's generation seconds (the engine's own clock; env time excluded).
Actions are compared turn by turn. The hf rows also time a forward and backward pass over the
episodes' tokens in that dtype (what the trainer runs). Prints one JSON object and ``ratio vllm/hf tokens_per_s``
lines; writes a markdown table. A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from agentgym_train.envs import LocalEnvs
from agentgym_train.modeling import model_dir
from agentgym_train.policies import make_policy
from agentgym_train.policies.base import Sampling
from agentgym_train.rollout import RolloutEngine, Task
from agentgym_train.tasks import split_ids

from agentgym.plugins import get_env_spec


def play(policy: Any, tasks: list[Task], max_turns: int) -> tuple[list[Any], dict[str, Any]]:
    engine = RolloutEngine(
        policy,
        {"babyai": LocalEnvs(get_env_spec("babyai"))},
        chat=policy.chat,
        sampling=Sampling(temperature=0.0, max_new_tokens=64, seed=0),
        max_turns=max_turns,
        batch_size=len(tasks),
        format_hint=True,
    )
    t = time.perf_counter()
    episodes = engine.run(tasks)
    s = engine.stats
    return episodes, {
        "episodes": len(episodes),
        "turns": s.turns,
        "sampled_tokens": s.sampled_tokens,
        "generate_s": round(s.generate_s, 2),
        "wall_s": round(time.perf_counter() - t, 2),
        "tokens_per_s": round(s.sampled_tokens / max(s.generate_s, 1e-9), 1),
        "success": sum(ep.success for ep in episodes) / len(episodes),
    }


def fwd_bwd_speed(model: Path, episodes: list[Any], dtype: str) -> dict[str, Any]:
    """Forward and backward over the episodes' tokens (the loss at the sampled ones) in
    micro-batches of at most 2,048 padded tokens, as the trainer runs them: padded tokens per second."""
    import torch
    from agentgym_train.modeling import load_model, micro_batches, pad_rows, sampled_logprobs

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
    ap.add_argument("--out", default="bench/results/real_model_backends.md")
    args = ap.parse_args()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    model = model_dir(args.model)
    tasks = [Task("babyai", t, split="test") for t in split_ids("babyai", "test", args.tasks)]
    results: dict[str, Any] = {
        "model": str(model),
        "tasks": args.tasks,
        "max_turns": args.max_turns,
        "runs": {},
    }
    for dtype in args.dtypes.split(","):
        actions = {}
        for backend in ("hf", "vllm"):
            extra = {"max_model_len": 8192} if backend == "vllm" else {"device": "cpu"}
            policy = make_policy(backend, model=str(model), dtype=dtype, **extra)
            episodes, fig = play(policy, tasks, args.max_turns)
            actions[backend] = [[st.action for st in ep.steps] for ep in episodes]
            if backend == "hf":
                fig["fwd_bwd"] = fwd_bwd_speed(model, episodes, dtype)
            results["runs"][f"{dtype}/{backend}"] = fig
            print(dtype, backend, json.dumps(fig), flush=True)
            del policy
        same = [a == b for a, b in zip(actions["hf"], actions["vllm"], strict=True)]
        turns = [
            x == y
            for a, b in zip(actions["hf"], actions["vllm"], strict=True)
            for x, y in zip(a, b, strict=False)
        ]
        results["runs"][f"{dtype}/same_actions"] = {
            "episodes_identical": f"{sum(same)}/{len(same)}",
            "turns_identical": f"{sum(turns)}/{len(turns)}",
        }
        print(dtype, "same actions", json.dumps(results["runs"][f"{dtype}/same_actions"]), flush=True)
    print(json.dumps(results))
    for dtype in args.dtypes.split(","):
        hf, vl = results["runs"][f"{dtype}/hf"], results["runs"][f"{dtype}/vllm"]
        print(
            f"ratio vllm/hf tokens_per_s ({dtype}): {vl['tokens_per_s'] / max(hf['tokens_per_s'], 1e-9):.3f}"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table(results))


def table(results: dict[str, Any]) -> str:
    lines = [
        f"# hf vs vllm policies on SmolLM2-135M-Instruct: {results['tasks']} BabyAI test tasks, greedy, "
        f"{results['max_turns']} turns",
        "",
        "Made by `hatch run vllm:python bench/real_model_backends.py` in one run (2-core CPU).",
        "",
        "| dtype | backend | turns | sampled tokens | generate s | tokens/s | success | fwd+bwd tokens/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, r in results["runs"].items():
        dtype, what = key.split("/")
        if what == "same_actions":
            lines.append(
                f"| {dtype} | same greedy actions | episodes {r['episodes_identical']}, turns {r['turns_identical']} | | | | | |"
            )
        else:
            lines.append(
                f"| {dtype} | {what} | {r['turns']} | {r['sampled_tokens']} | {r['generate_s']} | "
                f"{r['tokens_per_s']} | {r['success']:.2f} | {r.get('fwd_bwd', {}).get('tokens_per_s', '')} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
