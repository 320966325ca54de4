"""Pin the native RL step's numbers before a refactor, and compare after it.

Four short runs of the tiny model on BabyAI, 3 steps each, through every branch of
``agentgym_train.rl.step``: a critic (``gae``); KL and entropy terms over 2 epochs of 2
mini-batches in small micro-batches; prompts shared in the update; LoRA with dynamic sampling.
An invalid-action penalty gives the untrained model's rows advantages to train on. Written: every
metric of every step but the timings, the validation, and a digest of each run's final weights.

    python scripts/pin_rl_step.py before.json          # on the commit before the change
    python scripts/pin_rl_step.py after.json           # on the commit after it
    python scripts/pin_rl_step.py --compare before.json after.json   # exit 1 where they differ

Run both sides in one environment on one machine: the numbers are equal bit for bit or the step
changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

CORPUS = [
    "go to the red ball",
    "Action: turn left",
    "Action: move forward",
    "pick up the key",
    "open the door",
    "You see a wall 2 steps forward",
    "Thought: I will go",
] * 20
COMMON = {
    "envs": ["babyai"],
    "steps": 3,
    "tasks_per_step": 3,
    "n": 3,
    "max_new_tokens": 12,
    "horizon": "fixed",
    "horizon_params": {"horizon": 3},
    "val_limit": 3,
    "val_n": 1,
    "val_max_turns": 3,
    "lr": 1e-3,
    "logger": [],
    "progress": False,
    "reward": "success",
    "dtype": "float32",
    "invalid_action_penalty": 0.1,
}
ARMS = {
    "grpo_kl_epochs": {
        "algorithm": "grpo",
        "kl_coef": 0.01,
        "entropy_coef": 0.01,
        "ppo_epochs": 2,
        "mini_batches": 2,
        "micro_batch_tokens": 600,
    },
    "gae": {"algorithm": "gae", "kl_coef": 0.0, "entropy_coef": 0.0, "reward": "return"},
    "grpo_shared_inert": {
        "algorithm": "grpo",
        "kl_coef": 0.0,
        "entropy_coef": 0.0,
        "share_prompts": True,
        "loss_agg": "seq-mean-token-mean",
    },
    "rloo_lora_dynamic": {
        "algorithm": "rloo",
        "lora": True,
        "lora_r": 4,
        "kl_coef": 0.01,
        "dynamic_sampling": True,
        "dynamic_sampling_rounds": 1,
    },
}


def pin(out: Path) -> None:
    from agentgym_train.models.tiny import build_tiny
    from agentgym_train.rl.config import TrainConfig
    from agentgym_train.rl.trainer import TIMING_KEYS, run
    from safetensors.torch import load_file

    work = Path(tempfile.mkdtemp())
    model = build_tiny(work / "tiny", texts=CORPUS, vocab_size=400, size="nano")
    result = {}
    for name, arm in ARMS.items():
        cfg = TrainConfig.from_dict(
            {**COMMON, **arm, "model": str(model), "runs_dir": str(work), "name": name}
        )
        rows: list[dict] = []
        report = run(cfg, on_step=rows.append)
        weights = load_file(str(Path(report["model"]) / "model.safetensors"))
        digest = hashlib.sha256(b"".join(weights[k].float().numpy().tobytes() for k in sorted(weights)))
        validation = [{k: v[k] for k in ("step", "label", "success")} for v in report["validation"]]
        steps = [{k: v for k, v in m.items() if k not in (*TIMING_KEYS, "peak_cuda_gb")} for m in rows]
        result[name] = {"steps": steps, "validation": validation, "weights": digest.hexdigest()}
        print(f"{name}: {len(steps)} steps, weights {digest.hexdigest()[:16]}", flush=True)
    out.write_text(json.dumps(result, indent=1, sort_keys=True))


def compare(a: Path, b: Path) -> int:
    before, after = json.loads(a.read_text()), json.loads(b.read_text())
    differ = 0
    for name in before:
        same = before[name] == after.get(name)
        differ += not same
        print(f"{name}: {'equal' if same else 'DIFFERENT'}")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", type=Path, help="the JSON file to write")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        ap.error("give the JSON file to write, or --compare BEFORE AFTER")
    pin(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
