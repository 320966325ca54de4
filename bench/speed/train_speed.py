"""Benchmark: the CPU speed-ups of RL sampling and training, each against its baseline in the same run.

    python -m bench.speed.train_speed [--model DIR] [--tasks 4] [--n 8] [--max-turns 8] [--repeats 3] [--threads N]
                                [--tolerance 0.1]

1. Sampling: a GRPO step's rollouts on BabyAI train tasks (``--tasks`` x ``--n`` episodes,
   ``--max-turns`` turns, the same seed) three ways: our right-padded sampling loop with each
   episode's KV cache carried across turns (the default), the same loop running every turn's
   whole context (``kv_reuse=False``), and ``transformers``' ``generate`` on left-padded prompts
   (``HFPolicy(fast=False)``).
2. Training forward and backward on those episodes, right-padded: what the trainer does (no
   padding mask, the vocabulary projection on the sampled tokens only), the same over every
   token's logits, and that with a padding mask.

Without ``--model`` a nano tiny model is built in a temporary directory (untrained: its episodes
run to the turn cap, the long contexts that matter). Prints one JSON object and a ratio per
part. A benchmark, not a test: it asserts nothing.

Each side's work is in the JSON's ``work``: for sampling, that of the episodes of the run whose
seconds are kept (the fastest of ``--repeats``): episodes, turns, sampled tokens, trained tokens
and errors (``bench/common/equal_work.py``); the three ways sample at temperature 1 by different code, so
their tokens may differ, and a sampling ratio is printed only when neither had an error and every
count agrees within ``--tolerance`` (default 0.10). For forward and backward, the tokens each pass
was given (forward tokens, loss tokens) and the passes, counted in the timed functions; all three
run on the same batch, so these must agree exactly (tolerance 0). Otherwise the line is ``no ratio
...: not the same work (...)``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from agentgym_train.models.logprobs import pad_rows, sampled_logprobs, token_logprobs
from agentgym_train.models.tiny import build_tiny
from agentgym_train.policies.base import Sampling
from agentgym_train.policies.hf import HFPolicy
from agentgym_train.rollout.engine import RolloutEngine, Task
from agentgym_train.rollout.envs import LocalEnvs
from agentgym_train.rollout.experts import expert_texts
from agentgym_train.rollout.tasks import category_ids

from agentgym.plugins import get_env_spec
from bench.common.equal_work import WORK_KEYS, differences, work_of_episodes
from bench.common.findings import Findings


def rollout_seconds(policy: HFPolicy, tasks: list[Task], max_turns: int) -> tuple[float, list]:
    engine = RolloutEngine(
        policy,
        {"babyai": LocalEnvs(get_env_spec("babyai"))},
        sampling=Sampling(temperature=1.0, max_new_tokens=24, seed=0),
        max_turns=max_turns,
    )
    episodes = engine.run(tasks)
    return engine.stats.generate_s, episodes


FWD_BWD_KEYS = ("passes", "forward_tokens", "loss_tokens")


def count_pass(work: dict, ids: torch.Tensor, loss_mask: torch.Tensor) -> None:
    """Add one forward and backward pass over ``ids`` (the loss on ``loss_mask``) to ``work``."""
    work["passes"] = work.get("passes", 0) + 1
    work["forward_tokens"] = work.get("forward_tokens", 0) + ids.numel()
    work["loss_tokens"] = work.get("loss_tokens", 0) + int(loss_mask.sum())


def fwd_bwd_seconds(
    model, ids: torch.Tensor, attn: torch.Tensor | None, loss_mask: torch.Tensor, work: dict
) -> float:
    t = time.perf_counter()
    out = model(input_ids=ids, attention_mask=attn)
    (token_logprobs(out.logits, ids) * loss_mask).sum().backward()
    model.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - t
    count_pass(work, ids, loss_mask)
    return seconds


def sampled_fwd_bwd_seconds(model, ids: torch.Tensor, loss_mask: torch.Tensor, work: dict) -> float:
    t = time.perf_counter()
    (sampled_logprobs(model, ids, loss_mask)[0] * loss_mask).sum().backward()
    model.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - t
    count_pass(work, ids, loss_mask)
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a local HF model directory (default: build a nano tiny model)")
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)")
    ap.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="relative difference allowed between two samplers' work (episodes, turns, tokens) before "
        "their ratio is withheld (default: 0.10; forward and backward: exact)",
    )
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = tempfile.TemporaryDirectory()
    model_dir = args.model or str(
        build_tiny(Path(tmp.name) / "tiny", expert_texts(["babyai"], 50), size="nano")
    )
    policy = HFPolicy(model_dir)
    ids = category_ids("babyai", "train", ["GoToObjS6", "Pickup", "GoToLocalS8N7", "SynthLoc"])
    tasks = [Task("babyai", t, sample=k, split="train") for t in ids[: args.tasks] for k in range(args.n)]

    sampling, work = {}, {}
    for name, fast, reuse in (("generate", False, False), ("ours", True, False), ("ours_kv", True, True)):
        policy.fast, policy.kv_reuse = fast, reuse
        runs = [rollout_seconds(policy, tasks, args.max_turns) for _ in range(args.repeats)]
        sampling[name], kept = min(runs, key=lambda r: r[0])
        work[name] = work_of_episodes(kept)
    episodes = runs[-1][1]

    tokens = [ep.tokens for ep in episodes if ep.tokens]
    lengths = [len(t.ids) for t in tokens]
    batch, attn = pad_rows([t.ids for t in tokens])
    _, loss_mask = pad_rows([t.ids for t in tokens], masks=[t.loss_mask for t in tokens])
    attn = attn.long()
    model = policy.model.train()
    fb_work: dict[str, dict] = {"sampled_only": {}, "no_mask": {}, "mask": {}}
    train = {
        "sampled_only": min(
            sampled_fwd_bwd_seconds(model, batch, loss_mask, fb_work["sampled_only"])
            for _ in range(args.repeats)
        ),
        "no_mask": min(
            fwd_bwd_seconds(model, batch, None, loss_mask, fb_work["no_mask"]) for _ in range(args.repeats)
        ),
        "mask": min(
            fwd_bwd_seconds(model, batch, attn, loss_mask, fb_work["mask"]) for _ in range(args.repeats)
        ),
    }
    ratios = [  # (label, part, numerator, denominator)
        ("sampling generate/ours", "sampling", "generate", "ours"),
        ("sampling ours/ours_kv", "sampling", "ours", "ours_kv"),
        ("fwd+bwd mask/no-mask", "fwd_bwd", "mask", "no_mask"),
        ("fwd+bwd all-logits/sampled-only", "fwd_bwd", "no_mask", "sampled_only"),
    ]
    seconds = {"sampling": sampling, "fwd_bwd": train}
    works = {"sampling": work, "fwd_bwd": fb_work}
    why = {
        label: differences(
            works[part][a],
            works[part][b],
            args.tolerance if part == "sampling" else 0.0,
            names=(a, b),
            keys=WORK_KEYS if part == "sampling" else FWD_BWD_KEYS,
        )
        for label, part, a, b in ratios
    }
    findings = Findings()
    findings.show(
        {
            "episodes": len(episodes),
            "mean_tokens": round(sum(lengths) / len(lengths)),
            "longest": max(lengths),
            "sampled_tokens": int(loss_mask.sum()),
            "sampling_s": {k: round(v, 3) for k, v in sampling.items()},
            "fwd_bwd_s": {k: round(v, 3) for k, v in train.items()},
            "threads": torch.get_num_threads(),
            "tolerance": {"sampling": args.tolerance, "fwd_bwd": 0.0},
            "work": {"sampling": work, "fwd_bwd": fb_work},
            "not_equal": {label: w for label, w in why.items() if w},
        }
    )
    for label, part, a, b in ratios:
        findings.ratio(label, seconds[part][a], seconds[part][b], why[label])


if __name__ == "__main__":
    main()
