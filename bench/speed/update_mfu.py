"""Benchmark: the RL update of a real model on this machine, as model FLOPs utilisation (MFU):
today's code against a baseline commit, in one run, on the same episodes.

    python -m bench.speed.update_mfu --episodes RUN/episodes/step_000001.jsonl [--model DIR]
        [--before REF] [--rows 16] [--repeats 2] [--variants JSON] [--profile]
        [--out bench/results/update_mfu.md]

The episodes are a real step's (any run's ``episodes/step_*.jsonl`` or an evaluation's episode
file; the first ``--rows`` that carry tokens), grouped by task; advantages are GRPO's on their
success. Each side loads ``--model`` (default: the SmolLM2 recipe's SFT model when given as a
directory, else ``smollm2``) with the recipe's RL settings (``recipes/smollm2.yaml``: LoRA
r16 over a bfloat16 base where the CPU has it, ``seq-mean-token-mean``, no KL term) and runs
``Learner.score`` and the RL step's ``update`` on the same rows ``--repeats`` times after one untimed
update; the figure is the best repeat. ``--before REF`` (default ``e310630``, main before issue
44) is checked out into a temporary git worktree and run from there (``PYTHONPATH`` over its
sources); ``--variants`` adds settings to try on today's code (a JSON object of name -> TrainConfig
overrides, each in a process of its own), and three that are not TrainConfig keys: ``threads``
(torch's), ``autocast`` (the forward passes under bfloat16 autocast, the adapters' matmuls too),
``compile`` (each decoder layer through ``torch.compile``, dynamic shapes), ``engine`` (a vLLM
engine built in the process first, as beside the recipe's trainer: run the script in the
``vllm`` environment), ``frees_to_system`` (the update inside
``agentgym_train.models.memory.frees_to_system``, as the trainer ran it).

Reported per side: the episodes' tokens (prompt, observations and replies: the work, the same on
every side) and the tokens its rows hold (today's code ends a row at its last sampled token), the
padded tokens its micro-batches ran, seconds, tokens/s (the episodes' tokens per second: what a
step's update costs), the model FLOPs its rows need (matmuls and attention, counted from the
model's config: forward, plus backward to the inputs, plus weight gradients only for trained
weights), FLOP/s, and MFU against this machine's bfloat16 and float32 matmul peaks measured by
this script (square matmuls, best of several sizes). ``--profile`` prints torch.profiler's top operators of one
update on today's code. Prints one JSON object and ``ratio`` lines (each only when both sides ran
the same rows); writes a markdown table. A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.equal_work import ratio_line
from bench.common.procs import code_env

ROOT = Path(__file__).resolve().parents[2]

BEFORE = "e310630"


def matmul_peak(dtype_name: str, seconds: float = 2.0) -> float:
    """The best FLOP/s of square matmuls of a few sizes in ``dtype_name`` on this process's threads."""
    import torch

    dtype = getattr(torch, dtype_name)
    best = 0.0
    for n in (1024, 2048, 3072):
        a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
        a @ b  # warm up (oneDNN picks its kernel)
        reps, t = 0, time.perf_counter()
        while time.perf_counter() - t < seconds / 3:
            a @ b
            reps += 1
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - t))
    return best


def update_flops(config: Any, lengths: list[int], sampled: int, *, lora: bool) -> float:
    """Model FLOPs of one update over rows of ``lengths`` tokens: each linear layer's matmuls and
    causal attention (half the T x T scores), forward; backward to the inputs costs the same
    again; weight gradients (the same again) only where the weights train (not under LoRA, whose
    adapters are negligible). The output layer runs on the ``sampled`` positions only."""
    d, layers = config.hidden_size, config.num_hidden_layers
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", heads) * (d // heads)
    ffn = config.intermediate_size
    per_token_linear = 2 * (d * d + 2 * d * kv + d * d + 3 * d * ffn) * layers
    attention = sum(2 * 2 * d * (t * (t + 1) / 2) * layers for t in lengths)  # QK^T and AV
    head = 2 * d * config.vocab_size * sampled
    forward = per_token_linear * sum(lengths) + attention + head
    return forward * (2 if lora else 3)


def worker(args: argparse.Namespace) -> None:
    """One side: load, then time the RL step's ``update`` on the rows (in this process's code)."""
    import torch
    from agentgym_train.models.memory import peak_rss_gb
    from agentgym_train.recipes import recipe_path
    from agentgym_train.recipes.runner import load_recipe
    from agentgym_train.rl.algorithms import grpo_advantages
    from agentgym_train.rl.batch import TokenBatch
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.rl.learner import Learner
    from agentgym_train.rl.step import update

    from agentgym.trajectory import read_episodes

    torch.manual_seed(0)
    episodes = [ep for ep in read_episodes(args.episodes) if ep.tokens and ep.tokens.reward_index is not None]
    episodes = episodes[: args.rows]
    for ep in episodes:
        ep.group = ep.task_id
    settings = json.loads(args.settings)
    threads = settings.pop("threads", None)
    settings_compile = settings.pop("compile", False)
    settings_autocast = settings.pop("autocast", False)
    beside_engine = settings.pop("engine", False)
    as_trainer = settings.pop("frees_to_system", False)
    if threads:
        torch.set_num_threads(threads)
    rl = {**load_recipe(recipe_path("smollm2"))["rl"], **settings}
    rl.pop("rollout", None)
    cfg = TrainConfig.from_dict({**rl, "model": args.model, "envs": ["babyai"], "progress": False})
    learner = Learner(cfg, args.model, critic=False, device="cpu")
    if beside_engine:  # as in the recipe: a vLLM engine in the process (it binds threads and memory)
        from agentgym_train.policies.vllm import colocated_policy

        engine = colocated_policy(
            args.model, dtype=cfg.dtype, seed=0, max_model_len=cfg.max_context, device="cpu"
        )
    if settings_autocast:  # tried here before it is a setting: the adapters' matmuls in bfloat16 too
        plain = learner.logprobs

        def autocast_logprobs(*a: Any, **k: Any) -> Any:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return plain(*a, **k)

        learner.logprobs = autocast_logprobs
    if settings_compile:  # tried here before it is a setting: each decoder layer, dynamic shapes
        base = learner.model.base_model.model if cfg.lora else learner.model
        for layer in base.get_decoder().layers:
            layer.compile(dynamic=True)
    batch = TokenBatch.from_episodes(episodes, "success")
    groups = [ep.task_id for ep in batch.episodes]
    adv, returns = grpo_advantages(batch.token_rewards(), batch.mask, groups)
    from agentgym_train.models.logprobs import micro_batches

    padded = sum(
        len(g) * max(batch.lengths[i] for i in g)
        for g in micro_batches(batch.lengths, cfg.micro_batch_tokens)
    )
    times = []
    for r in range(args.repeats + 1 + args.profile):  # a warm-up, the timed repeats, the profile
        t = time.perf_counter()
        scores = learner.score(batch)
        if args.profile and r == args.repeats + 1:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                update(learner, batch, scores, adv, returns)
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18), file=sys.stderr)
            continue
        if as_trainer:  # as the trainer runs its update: large blocks mapped and unmapped each time
            from agentgym_train.models.memory import frees_to_system

            with frees_to_system():
                update(learner, batch, scores, adv, returns)
        else:
            update(learner, batch, scores, adv, returns)
        if r:  # the first is a warm-up
            times.append(time.perf_counter() - t)
    base = learner.model.base_model.model.config if cfg.lora else learner.model.config
    sampled = int(batch.mask.sum())
    flops = update_flops(base, batch.lengths, sampled, lora=cfg.lora)  # the rows this side runs
    seconds = min(times)
    work = sum(len(ep.tokens.ids) for ep in batch.episodes)
    out = {
        "rows": len(batch.lengths),
        "tokens": work,  # the episodes' tokens: the same work on every side
        "processed_tokens": sum(batch.lengths),  # what this side's rows hold
        "sampled_tokens": sampled,
        "padded_tokens": padded,
        "seconds": round(seconds, 2),
        "seconds_all": [round(x, 2) for x in times],
        "tokens_per_s": round(work / seconds, 1),
        "tflops": round(flops / 1e12, 3),
        "flops_per_s": flops / seconds,
        "dtype": str(next(learner.model.parameters()).dtype),
        "threads": torch.get_num_threads(),
        "peak_rss_gb": peak_rss_gb(),
    }
    if beside_engine:
        engine.close()
    print("RESULT " + json.dumps(out), flush=True)


def run_side(
    src: Path, args: argparse.Namespace, settings: dict[str, Any], profile: bool = False
) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", __spec__.name, "--worker", "--episodes", args.episodes, "--model", args.model,
        "--rows", str(args.rows), "--repeats", str(args.repeats), "--settings", json.dumps(settings),
    ] + (["--profile"] if profile else [])  # fmt: skip
    env = code_env(src)
    env["PYTHONPATH"] += ":" + str(ROOT)  # the bench package, whichever tree runs
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if profile:
        print(p.stderr[-6000:], file=sys.stderr)
    found = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode or not found:
        return {"status": p.returncode, "error": p.stderr[-800:]}
    return {"status": 0, **json.loads(found[-1][len("RESULT ") :])}


def table(results: dict[str, Any]) -> str:
    peak16, peak32 = results["peak_bf16_flops"], results["peak_fp32_flops"]
    lines = [
        "# The RL update on this CPU: tokens/s and MFU (`bench/speed/update_mfu.py`)",
        "",
        f"`{results['command']}`, {results['date']}. Model: `{results['model']}`; episodes: "
        f"`{results['episodes']}` (first {results['rows']} with tokens). Peak matmul of this machine, "
        f"measured by the script: bfloat16 {peak16 / 1e12:.3f} TFLOP/s, float32 {peak32 / 1e12:.3f} TFLOP/s.",
        "",
        "| side | settings | rows | episode tokens | row tokens | padded | seconds | tokens/s | TFLOP | TFLOP/s | MFU (bf16 peak) | peak GB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results["sides"].items():
        settings = (
            json.dumps(results["settings"].get(name, {})) if results["settings"].get(name) else "recipe"
        )
        if r.get("status"):
            lines.append(f"| {name} | {settings} | failed: {r.get('error', '')[-120:]!r} |||||||| ")
            continue
        lines.append(
            f"| {name} | {settings} | {r['rows']} | {r['tokens']} | {r.get('processed_tokens', r['tokens'])} | "
            f"{r['padded_tokens']} | {r['seconds']} | "
            f"{r['tokens_per_s']} | {r['tflops']} | {r['flops_per_s'] / 1e12:.3f} | "
            f"{100 * r['flops_per_s'] / peak16:.1f}% | {r.get('peak_rss_gb')} |"
        )
    lines += ["", *results["ratios"], ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", required=True)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--variants", default="{}", help="JSON: name -> TrainConfig overrides, on today's code")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", default="bench/results/update_mfu.md")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--settings", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    from agentgym_train.models.loading import model_dir

    args.model = str(model_dir(args.model))
    results: dict[str, Any] = {
        "command": "python -m bench.speed.update_mfu " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "model": args.model,
        "episodes": args.episodes,
        "rows": args.rows,
        "peak_bf16_flops": matmul_peak("bfloat16"),
        "peak_fp32_flops": matmul_peak("float32"),
        "settings": json.loads(args.variants),
        "sides": {},
    }
    print(
        f"peak bf16 {results['peak_bf16_flops'] / 1e12:.3f} TFLOP/s, fp32 {results['peak_fp32_flops'] / 1e12:.3f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.before],
                       check=True, capture_output=True)  # fmt: skip
        try:
            results["sides"]["before"] = run_side(old, args, {})
            print("before", json.dumps(results["sides"]["before"]), flush=True)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True
            )
    results["sides"]["after"] = run_side(ROOT, args, {}, profile=args.profile)
    print("after", json.dumps(results["sides"]["after"]), flush=True)
    for name, settings in results["settings"].items():
        results["sides"][name] = run_side(ROOT, args, settings)
        print(name, json.dumps(results["sides"][name]), flush=True)
    ratios = []
    before = results["sides"]["before"]
    for name, side in results["sides"].items():
        if name == "before":
            continue
        why = []
        if side.get("status") or before.get("status"):
            why = ["a side failed"]
        elif (side["rows"], side["tokens"]) != (before["rows"], before["tokens"]):
            why = [f"rows/tokens {side['rows']}/{side['tokens']} vs {before['rows']}/{before['tokens']}"]
        ratios.append(
            ratio_line(
                f"update tokens/s {name}/before", side.get("tokens_per_s"), before.get("tokens_per_s"), why
            )
        )
    results["ratios"] = ratios
    print(json.dumps(results))
    print("\n".join(ratios))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table(results))
    Path(args.out).with_suffix(".json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
