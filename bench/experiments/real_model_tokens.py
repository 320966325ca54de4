"""Benchmark: how far re-tokenizing a real model's sampled text drifts from the ids it sampled
(what the reference trains on: it decodes replies and encodes the conversation again), measured on
token-exact rollouts of SmolLM2-135M-Instruct on BabyAI and TextCraft.

    python -m bench.experiments.real_model_tokens [--model smollm2] [--tasks 8] [--n 2] [--max-turns 4]
        [--temperature 1.0] [--out bench/results/real_model_tokens.md]

Per env: ``--tasks`` train tasks x ``--n`` samples, sampled at ``--temperature`` (RL's sampling),
``format_hint`` on. For every reply: its sampled ids (what our rollout trains on) against the
encoding of its decoded text (per turn), and for every episode its whole id sequence against the
encoding of the rendered conversation (the reference's way). Prints one JSON object and ``ratio``
lines (the share of replies and of episodes whose re-encoding differs); writes a markdown table.
A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from agentgym_train.policies.base import Sampling
from agentgym_train.policies.hf import HFPolicy
from agentgym_train.rl.batch import turn_spans
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs

from agentgym.plugins import get_env_spec


def drift(policy: HFPolicy, episodes: list[Any]) -> dict[str, Any]:
    chat, tok = policy.chat, policy.tokenizer
    replies = changed = tokens = 0
    ep_changed = ep_len_diff = 0
    examples: list[dict[str, Any]] = []
    for ep in episodes:
        for a, b in turn_spans(ep.tokens.loss_mask):
            run = ep.tokens.ids[a:b]
            body = run[:-1] if run[-1] in chat.stop_ids else run
            again = chat.encode(tok.decode(body))
            replies += 1
            tokens += len(body)
            if again != body:
                changed += 1
                if len(examples) < 3:
                    examples.append(
                        {"text": tok.decode(body)[:80], "sampled": body[:12], "re_encoded": again[:12]}
                    )
        messages = [{"role": m.role, "content": m.content} for m in ep.messages]
        whole = chat.conversation(messages).ids
        n = min(len(whole), len(ep.tokens.ids))
        if whole[:n] != ep.tokens.ids[:n]:
            ep_changed += 1
        ep_len_diff += abs(len(whole) - len(ep.tokens.ids))
    return {
        "episodes": len(episodes),
        "replies": replies,
        "sampled_tokens": tokens,
        "replies_re_encoded_differently": changed,
        "episodes_re_encoded_differently": ep_changed,
        "mean_abs_length_difference": round(ep_len_diff / max(len(episodes), 1), 2),
        "examples": examples,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--envs", default="babyai,textcraft")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--out", default="bench/results/real_model_tokens.md")
    args = ap.parse_args()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    policy = HFPolicy(args.model)
    results: dict[str, Any] = {"model": args.model, "temperature": args.temperature, "envs": {}}
    for env in args.envs.split(","):
        engine = RolloutEngine(
            policy,
            {env: LocalEnvs(get_env_spec(env))},
            sampling=Sampling(temperature=args.temperature, max_new_tokens=64, seed=0),
            max_turns=args.max_turns,
            format_hint=True,
            episode_seed=0,
        )
        tasks = [Task(env, t, sample=k, split="train") for t in range(args.tasks) for k in range(args.n)]
        results["envs"][env] = drift(policy, engine.run(tasks))
        print(env, json.dumps(results["envs"][env]), flush=True)
    print(json.dumps(results))
    for env, r in results["envs"].items():
        print(
            f"ratio {env} replies re-encoded differently: {r['replies_re_encoded_differently'] / max(r['replies'], 1):.3f}"
        )
        print(
            f"ratio {env} episodes re-encoded differently: {r['episodes_re_encoded_differently'] / max(r['episodes'], 1):.3f}"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# Re-tokenization drift on SmolLM2-135M-Instruct rollouts (temperature {args.temperature})",
        "",
        "Made by `bench/experiments/real_model_tokens.py` in one run. Our rollouts train on the sampled ids; these "
        "columns count where encoding the decoded text again (the reference's way) gives other ids.",
        "",
        "| env | episodes | replies | sampled tokens | replies re-encoded differently | episodes re-encoded differently | mean length difference (tokens) |",
        "|---|---|---|---|---|---|---|",
    ]
    for env, r in results["envs"].items():
        lines.append(
            f"| {env} | {r['episodes']} | {r['replies']} | {r['sampled_tokens']} | "
            f"{r['replies_re_encoded_differently']} | {r['episodes_re_encoded_differently']} | "
            f"{r['mean_abs_length_difference']} |"
        )
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
